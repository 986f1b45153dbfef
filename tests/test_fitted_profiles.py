"""Issue 10: profiles fitted to published serving results, per (card, engine), picked for that pair.

hwprofiles/fitted/<card>.<engine>.yaml are written by lab/published/fit_profiles.py through
`kvplan calibrate --from-bench`; each names the rows it stands on (lab/published/fit-rows/).
"""

from __future__ import annotations

import csv
import functools
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner import catalog
from planner.cli import app

ROOT = Path(__file__).resolve().parents[1]
FITTED = sorted((ROOT / "hwprofiles" / "fitted").glob("*.yaml"))
runner = CliRunner()


def _pair(path: Path) -> tuple[str, str]:
    card, engine = path.name.removesuffix(".yaml").rsplit(".", 1)
    return card, engine


def test_fitted_profiles_are_shipped() -> None:
    assert {_pair(p) for p in FITTED} >= {("ascend-910c", "vllm"), ("ascend-950pr", "mindie")}


@pytest.mark.parametrize("path", FITTED, ids=lambda p: p.name)
def test_fitted_profile_differs_from_its_card_only_in_measured(path: Path) -> None:
    card, engine = _pair(path)
    fitted = catalog.fitted_profile(card, engine)
    base = catalog.load_card(card)
    assert fitted is not None and fitted.measured is not None and fitted.measured.backend == "bench-fit"
    assert fitted.model_dump(exclude={"measured"}) == base.model_dump(exclude={"measured"})


@pytest.mark.lab
@pytest.mark.parametrize("path", FITTED, ids=lambda p: p.name)
def test_fitted_profile_names_the_rows_it_stands_on(path: Path) -> None:
    card, engine = _pair(path)
    measured = catalog.fitted_profile(card, engine).measured  # type: ignore[union-attr]
    pattern = r"calibrated: fit from (\d+) published points \(.*\), (lab/published/\S+\.csv)$"
    match = re.match(pattern, measured.device_name)
    assert match, measured.device_name
    with (ROOT / match.group(2)).open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == int(match.group(1)) == len(measured.samples["measured_output_tokens_per_s"])
    # one hardware's rows only: a fit never mixes cards or engines
    assert {(r["card"], r["engine"]) for r in rows} == {(card, engine)}


def test_card_and_engine_pick_the_fitted_profile() -> None:
    for path in FITTED:
        card, engine = _pair(path)
        assert catalog.resolve_card(card, engine=engine).is_calibrated
        assert catalog.resolve_card(card) == catalog.load_card(card)
        others = {"mindie", "vllm", "transformers"} - {engine}
        for other in others:
            if not (ROOT / "hwprofiles" / "fitted" / f"{card}.{other}.yaml").exists():
                assert catalog.resolve_card(card, engine=other) == catalog.load_card(card)


def test_plan_says_which_data_its_speeds_stand_on() -> None:
    card, engine = _pair(FITTED[0])
    args = ["--model", "qwen3-8b", "--card", card, "--engine", engine, "--ctx", "4k", "--json"]
    fitted = json.loads(runner.invoke(app, args).output)
    plain = json.loads(runner.invoke(app, [*args, "--uncalibrated"]).output)
    notes = " ".join(fitted["warnings"])
    assert "speeds: calibrated: fit from" in notes and "published points" in notes
    assert "is uncalibrated" not in notes
    assert not any("speeds: calibrated" in n for n in plain["warnings"])
    assert fitted["performance"]["decode_step_s"] != plain["performance"]["decode_step_s"]


@pytest.mark.lab
@pytest.mark.parametrize("path", FITTED, ids=lambda p: p.name)
def test_a_profile_stands_only_on_its_own_hardware_rows(path: Path) -> None:
    """A fit from one hardware's rows never changes another's profile: each profile's fit rows (and the corpus
    lines they come from) are of its own card and engine only."""
    card, engine = _pair(path)
    rows_path = ROOT / "lab" / "published" / "fit-rows" / path.name.replace(".yaml", ".csv")
    rows = list(csv.DictReader(rows_path.read_text(encoding="utf-8").splitlines()))
    assert rows and {(r["card"], r["engine"]) for r in rows} == {(card, engine)}
    corpus = ROOT / "lab" / "published" / "ascend-serving.csv"
    lines = list(csv.DictReader(corpus.read_text(encoding="utf-8").splitlines()))
    assert {lines[int(r["corpus_row"]) - 2]["card"] for r in rows} == {card}


@functools.cache
def _corpus_groups() -> dict:
    from lab.published import fit_profiles

    return fit_profiles.corpus_groups()


@pytest.mark.lab  # a MAP fit per profile: 0.1-2.5 s of CPU each (ascend-910c.vllm the longest)
@pytest.mark.parametrize("path", FITTED, ids=lambda p: p.name)
def test_fit_profiles_reproduces_the_shipped_profile(path: Path) -> None:
    """`lab/published/fit_profiles.py --write` made this profile: today's corpus and fit give the same rows
    (fit-rows/, columns the fit leaves empty aside) and the same coefficients within REPRODUCE_REL_TOL, in a
    fit `kvplan calibrate` still writes (no "do not trust" warning). A fit input that moved (a prior, a row,
    a conversion) fails here until the profile is refitted."""
    from lab.published import fit_profiles

    card, engine = _pair(path)
    group = _corpus_groups()[(card, engine)]
    rows_path = ROOT / "lab" / "published" / "fit-rows" / path.name.replace(".yaml", ".csv")
    with rows_path.open(encoding="utf-8") as handle:
        written = [{k: v for k, v in row.items() if v} for row in csv.DictReader(handle)]
    assert written == [{k: v for k, v in bench.items() if v} for _, bench, _ in group]
    result = fit_profiles.fitted([point for _, _, point in group], card)
    assert result is not None, fit_profiles.REFUSALS[-1]
    # a "do not trust" fit is one `kvplan calibrate --from-bench` (fit_profiles --write's writer) refuses
    assert not result.poor_fit, f"MAPE {result.mape_fraction:.1%}: calibrate would exit 4 (--accept-poor-fit)"
    assert fit_profiles.reproduction_gaps(card, engine, result) == [], (
        f"refit with: PYTHONPATH=. python lab/published/fit_profiles.py --only {card}.{engine} --write"
    )


@pytest.mark.lab
def test_a_rewrite_of_fit_rows_keeps_the_committed_column_order(tmp_path: Path) -> None:
    """`fit_profiles.py --write` keeps a fit-rows file's committed column order when the columns are the
    same (a rewrite changes values only); a new column set is written in the fit's own order."""
    from lab.published import fit_profiles

    rows_path = tmp_path / "card.engine.csv"
    rows_path.write_text("model,input_tokens,output_tokens,mtp\nm,1,2,\n", encoding="utf-8")
    fresh = ["model", "input_tokens", "mtp", "output_tokens"]
    assert fit_profiles.committed_columns(rows_path, fresh=fresh) == [
        "model",
        "input_tokens",
        "output_tokens",
        "mtp",
    ]
    assert fit_profiles.committed_columns(rows_path, fresh=[*fresh, "dp"]) == [*fresh, "dp"]
    assert fit_profiles.committed_columns(tmp_path / "absent.csv", fresh=fresh) == fresh
