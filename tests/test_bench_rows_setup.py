"""`calibrate --from-bench` and `validate` read a bench row only for its own card and engine (h4 item 3):
a row naming another card than --card, an unknown card, or (in a fit) another engine than the fit's
refuses the file with one line naming file:line, the column, the value and what was expected (exit 2),
where both commands used to fit or predict it on --card's profile silently. One check (planner/importers/
benchsetup.py) serves both commands; each test failed before it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner import catalog
from planner.cli import app
from planner.errors import DataFileError
from planner.importers import benchpoints, benchsetup
from tests.helpers import kvplan, write_csv

HEADER = "model,card,dtype,kv_dtype,tp,batch,ctx,per_user_tokens_per_s"
STEP_ROWS = [f"qwen3-27b,{{card}},fp8,bf16,1,{b},384,{r}" for b, r in ((1, 15.8), (8, 11), (32, 7))]
SERVING_HEADER = (
    "model,card,dtype,kv_dtype,tp,engine,concurrency,input_tokens,output_tokens,output_tokens_per_s"
)


def steps(path: Path, *cards: str, engine: str | None = None) -> Path:
    """A step-row CSV, one row per card in `cards` (batch 1, 8, 32), with an engine column when given."""
    header = HEADER + (",engine" if engine is not None else "")
    rows = [row.format(card=card) + (f",{engine}" if engine is not None else "") for row, card in
            zip(STEP_ROWS, cards, strict=False)]  # fmt: skip
    return write_csv(path, header + "\n", *rows)


def fit(path: Path, out: Path, *flags: str, code: int = 0) -> str:
    return kvplan("calibrate --from-bench", path, "--out", out, *flags, code=code).output


@pytest.mark.parametrize("command", ["calibrate", "validate"])
def test_a_row_of_another_card_refuses_the_file_in_both_commands(tmp_path: Path, command: str) -> None:
    path = steps(tmp_path / "mixed.csv", "ascend-950pr", "ascend-910c", "ascend-950pr")
    out = tmp_path / "fit.yaml"
    args = ("calibrate --from-bench", path, "--out", out) if command == "calibrate" else ("validate", path)
    result = kvplan(args[0], *args[1:], "--card", "ascend-950pr", code=2)
    assert (
        f"{path}:3: column card: another card than --card (got 'ascend-910c', expected ascend-950pr"
        in result.output
    )
    assert not out.exists()


@pytest.mark.parametrize("command", ["calibrate", "validate"])
def test_a_row_naming_an_unknown_card_refuses_the_file_with_or_without_card(
    tmp_path: Path, command: str
) -> None:
    path = steps(tmp_path / "unknown.csv", "ascend-950pr", "ascend-999", "ascend-950pr")
    words = "calibrate --from-bench" if command == "calibrate" else "validate"
    extra = ("--out", tmp_path / "fit.yaml") if command == "calibrate" else ()
    result = kvplan(words, path, *extra, "--card", "ascend-950pr", code=2)
    assert f"{path}:3: column card: unknown hardware profile 'ascend-999'" in result.output


def test_a_variant_of_the_card_and_a_profile_yaml_of_it_are_the_same_chip(tmp_path: Path) -> None:
    path = steps(tmp_path / "variant.csv", "ascend-950pr-64g", "ascend-950pr", "ascend-950pr")
    out = tmp_path / "fit.yaml"
    assert "wrote" in fit(path, out, "--card", "ascend-950pr")
    assert "MAPE" in kvplan("validate", path, "--card", out).output


def test_a_fit_refuses_a_row_of_another_engine_than_its_first_rows_validate_predicts_it(
    tmp_path: Path,
) -> None:
    rows = (
        "qwen3-27b,ascend-950pr,fp8,,1,mindie,16,256,128,170.7",
        "qwen3-27b,ascend-950pr,fp8,,1,vllm,1,256,128,15.8",
    )
    path = write_csv(tmp_path / "engines.csv", SERVING_HEADER + "\n", *rows)
    result = fit(path, tmp_path / "fit.yaml", "--card", "ascend-950pr", code=2)
    assert (
        f"{path}:3: column engine: another engine (got 'vllm', expected mindie: the fit's, from {path}:2"
        in result
    )
    assert "serving MAPE" in kvplan("validate", path).output  # each row predicted under its own engine


def test_engine_fills_empty_cells_and_refuses_a_row_naming_another(tmp_path: Path) -> None:
    unnamed = steps(tmp_path / "unnamed.csv", *["ascend-950pr"] * 3)
    assert "wrote" in fit(unnamed, tmp_path / "a.yaml", "--card", "ascend-950pr", "--engine", "vllm")
    assert "engine vllm)" in (tmp_path / "a.yaml").read_text()
    named = steps(tmp_path / "named.csv", *["ascend-950pr"] * 3, engine="mindie")
    for words in ("calibrate --from-bench", "validate"):
        extra = ("--out", tmp_path / "b.yaml") if words.startswith("calibrate") else ()
        result = kvplan(words, named, *extra, "--engine", "vllm", code=2)
        assert (
            f"{named}:2: column engine: another engine (got 'mindie', expected vllm: --engine's"
            in result.output
        )


def test_the_one_check_is_the_library_function_both_commands_call(tmp_path: Path) -> None:
    path = steps(tmp_path / "mixed.csv", "ascend-950pr", "ascend-910c")
    points, serving = benchpoints.read_bench_rows(path)
    hw = catalog.resolve_card("ascend-950pr")
    with pytest.raises(DataFileError, match=r"mixed\.csv:3: column card"):
        benchsetup.rows_for(points, serving, hardware=hw, engine=None, one_engine=False)
    kept, _ = benchsetup.rows_for(points, serving, hardware=None, engine=None, one_engine=True)
    assert [p.card for p in kept] == ["ascend-950pr", "ascend-910c"]


def test_validate_json_is_one_object_with_every_row_and_the_mape(tmp_path: Path) -> None:
    """h4 item 14: validate printed tables only; --json gives each row measured vs predicted and the MAPE,
    stdout the JSON alone (the repeated-row note goes to stderr)."""
    import json

    path = steps(tmp_path / "points.csv", *["ascend-950pr"] * 3)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(STEP_ROWS[0].format(card="ascend-950pr") + "\n")  # a repeat
    result = CliRunner().invoke(app, ["validate", str(path), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [row["batch"] for row in payload["decode_steps"]] == [1, 8, 32]
    first = payload["decode_steps"][0]
    assert first["predicted_decode_step_s"] == pytest.approx(
        first["measured_decode_step_s"] * (1 + first["error_fraction"])
    )
    errors = [abs(row["error_fraction"]) for row in payload["decode_steps"]]
    assert payload["decode_step_mape_fraction"] == pytest.approx(sum(errors) / 3)
    assert payload["serving"] == [] and payload["serving_mape_fraction"] is None
    assert "repeated row" in result.stderr
