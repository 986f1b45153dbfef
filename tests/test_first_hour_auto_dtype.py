"""A first hour with --dtype auto (the default since 7 Dec 2026: the card's 16-bit dtype): every command that
takes --dtype reads it the same way, `kvplan bench import` included; its refusals list it; the no-fit
refusal names the card's checkpoint dtype once."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from planner import catalog
from planner.cli import app
from planner.dtypes import activation_dtype_of

ROOT = Path(__file__).resolve().parents[1]
VLLM_RESULT = ROOT / "tests" / "fixtures" / "bench_results" / "vllm_bench_serve.json"
runner = CliRunner()


def imported_row(*flags: str) -> dict[str, str]:
    """The one serving row `kvplan bench import` prints for the vLLM fixture with these flags."""
    result = runner.invoke(app, ["bench", "import", str(VLLM_RESULT), "--model", "Qwen/Qwen3-8B", *flags])
    assert result.exit_code == 0, result.output
    (row,) = csv.DictReader(io.StringIO(result.stdout))
    return row


@pytest.mark.parametrize("card", ["atlas-300i-duo", "ascend-910b3"])
@pytest.mark.parametrize("dtype", [[], ["--dtype", "auto"], ["--dtype", " AUTO "]])
def test_bench_import_reads_auto_and_no_dtype_as_the_cards_16_bit_dtype(card: str, dtype: list[str]) -> None:
    """`bench import r.json --card atlas-300i-duo` was refused (its bf16 default on a card without bf16) and
    `--dtype auto`, listed in its --help, was an unknown weight dtype; the KV column was bf16 whatever the
    card. Both columns now read as the plan does: the card's 16-bit dtype."""
    row = imported_row("--card", card, *dtype)
    own = catalog.resolve_card(card).activation_dtype
    assert row["dtype"] == own and row["kv_dtype"] == own


@pytest.mark.parametrize("dtype", ["fp16", "int8"])
def test_bench_import_kv_column_is_the_plans_auto_kv_dtype(dtype: str) -> None:
    """No --kv-dtype (or --kv-dtype auto, as its --help says) is the plan's auto KV: fp16 weights run fp16."""
    row = imported_row("--card", "ascend-910b3", "--dtype", dtype, "--kv-dtype", "auto")
    card = catalog.resolve_card("ascend-910b3")
    assert row["kv_dtype"] == activation_dtype_of(dtype, card_activation=card.activation_dtype).value
    assert imported_row("--card", "ascend-910b3", "--dtype", dtype)["kv_dtype"] == row["kv_dtype"]


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["sweep"],
        ["bench", "import", str(VLLM_RESULT), "--model", "Qwen/Qwen3-8B", "--card", "ascend-910b3"],
    ],
)
def test_an_unknown_dtype_is_refused_with_auto_among_the_accepted(command: list[str]) -> None:
    model = [] if "bench" in command else ["-m", "qwen3-8b"]
    result = runner.invoke(app, [*command, *model, "--dtype", "autox"])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    accepted = line.split("expected one of ", 1)[1]
    assert "auto" in accepted.rstrip(")").split(", ")


def test_the_no_fit_refusal_names_the_checkpoints_dtype_once(tmp_path: Path) -> None:
    """The checkpoint's dtype came first ('(the checkpoint's)'), then again in the smaller-dtype list."""
    card = yaml.safe_load((ROOT / "modelcards" / "kimi-k2.5.yaml").read_text())
    card.update(id="kimi-imported", aliases=[], checkpoint_dtype="w4a16-moe")
    path = tmp_path / "kimi-imported.yaml"
    path.write_text(yaml.safe_dump(card))
    args = ["--model", str(path), "--card", "ascend-910c", "--tp", "16", "--ep", "16", "--ctx", "8k"]
    refused = runner.invoke(app, [*args, "--engine", "vllm"])
    assert refused.exit_code == 3
    hints = refused.output.split("; try ", 1)[1]
    assert "(the checkpoint's)" in hints and hints.count("w4a16-moe") == 1, hints


def test_an_fp32_plan_without_an_fp32_peak_suggests_the_cards_own_16_bit_dtype() -> None:
    """It said 'pick --dtype bf16' on the 300I Duo too, which then refuses bf16 (no native bf16 units)."""
    card = "atlas-300i-duo"  # no fp32 peak stated, no bf16 units
    refused = runner.invoke(
        app, ["-m", "qwen3-8b", "--card", card, "--dtype", "fp32", "--engine", "transformers"]
    )
    assert refused.exit_code == 2
    suggested = refused.output.rsplit("pick --dtype ", 1)[1].split()[0]
    planned = runner.invoke(
        app, ["-m", "qwen3-8b", "--card", card, "--dtype", suggested, "--engine", "transformers"]
    )
    assert planned.exit_code == 0, planned.output
