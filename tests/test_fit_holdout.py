"""Leave-one-model-out inside `kvplan calibrate --from-bench` (planner/fit/holdout.py)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import yaml

from planner import catalog, units
from planner.cli.calibrate import held_out_errors
from planner.fit import holdout, solver
from planner.importers.benchpoints import read_bench_rows
from planner.perf import ranges
from tests.helpers import kvplan

pytestmark = pytest.mark.lab  # reads the lab's data or scripts (tests/conftest.py: lab implies slow)

ROOT = Path(__file__).resolve().parents[1]
# 5 models: 4 CI floors, one row each, and Alauda's 10 open-loop Qwen3-14B rows (issue 27)
A2_ROWS = ROOT / "lab" / "published" / "fit-rows" / "ascend-910b3.vllm.csv"
SEED_ROWS = ROOT / "lab" / "published" / "fit-rows" / "ascend-950pr.mindie.csv"  # one model


def test_four_or_more_models_get_a_held_out_range_recorded_and_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One `calibrate` run (the whole fit plus one refit per model, ~5 s each): the leave-one-model-out it
    ran is recorded as it runs (its rows, card and answer, and the rows of every refit), not redone."""
    fits: list[set[str]] = []  # the models of each fit's serving rows, in call order
    lomo: list[tuple[list[object], dict[str, object], dict[str, list[float]]]] = []  # rows, keywords, answer
    fit_of, lomo_of = solver.fit_coefficients, holdout.leave_one_model_out

    def recorded_fit(points, **kwargs):  # type: ignore[no-untyped-def]
        fits.append({row.model for row in kwargs.get("serving", ())})
        return fit_of(points, **kwargs)

    def recorded_lomo(rows, **kwargs):  # type: ignore[no-untyped-def]
        held = lomo_of(rows, **kwargs)
        lomo.append((list(rows), kwargs, held))
        return held

    monkeypatch.setattr(solver, "fit_coefficients", recorded_fit)
    monkeypatch.setattr(holdout, "leave_one_model_out", recorded_lomo)
    out = tmp_path / "a2.yaml"
    result = kvplan("calibrate --card ascend-910b3 --engine vllm --from-bench", A2_ROWS, "--out", out)
    _, rows = read_bench_rows(A2_ROWS)
    models = {row.model for row in rows}
    assert len(models) >= holdout.MIN_MODELS
    assert fits == [models] + [models - {model} for model in sorted(models)]  # the fit, then one per model
    [(lomo_rows, keywords, held)] = lomo
    assert lomo_rows == rows and keywords["hardware"] == catalog.resolve_card("ascend-910b3")
    assert keywords["errors"] is held_out_errors  # the refit the CLI wires: solver, then serving_rows
    errors = [e for model_errors in held.values() for e in model_errors]
    assert set(held) == models and len(errors) == len(rows)
    assert all(len(held[model]) == sum(row.model == model for row in rows) for model in models)
    low, high, count = holdout.held_out_factors(errors)
    assert low <= 1 <= high and count == len(rows)
    assert f"held out: {len(rows)} rows of {len(models)} models" in result.output
    monkeypatch.setattr(holdout, "leave_one_model_out", lambda *_, **__: held)  # summary's arithmetic alone
    summary = holdout.summary(rows, hardware=catalog.resolve_card("ascend-910b3"), errors=held_out_errors)
    assert summary is not None and summary.factors == [low, high, count] and summary.models == len(models)
    assert summary.median_abs_error == statistics.median(abs(e) for e in errors)
    assert f"median |error| {units.fmt_fraction(summary.median_abs_error)}" in result.output
    assert f"ran at {low:g}x-{high:g}x the estimate" in result.output
    profile = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert profile["measured"]["samples"]["held_out_factors"] == [low, high, count]
    assert "held out:" in profile["measured"]["notes"]
    measured = catalog.resolve_card(str(out)).measured
    assert measured is not None and ranges.held_out_pair(measured) == (low, high, len(rows))


def test_fewer_models_say_the_range_is_untested(tmp_path: Path) -> None:
    out = tmp_path / "seed.yaml"
    result = kvplan("calibrate --card ascend-950pr --engine mindie --from-bench", SEED_ROWS, "--out", out)
    assert "held out: not tested (1 model(s)" in result.output
    profile = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert "held_out_factors" not in profile["measured"]["samples"]
    _, rows = read_bench_rows(SEED_ROWS)
    assert rows
    assert (
        holdout.leave_one_model_out(
            rows, hardware=catalog.resolve_card("ascend-950pr"), errors=held_out_errors
        )
        == {}
    )
    assert (
        holdout.summary(rows, hardware=catalog.resolve_card("ascend-950pr"), errors=held_out_errors) is None
    )
