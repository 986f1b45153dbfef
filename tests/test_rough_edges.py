"""Issue 12, section 4: rough edges a new user hits in the CLI (hints that work, flags without `<bool>`)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import typer.main
import yaml
from typer.testing import CliRunner

from planner import catalog
from planner.cli import app
from tests.helpers import H200_POINTS, h200_points_of, kvplan

runner = CliRunner()
HINT = re.compile(r"; try (.+)$")


def hints_of(error: str) -> list[list[str]]:
    """The alternatives of a "does not fit ...; try A or B or C" line, each as flags (`--dtype int8 or
    w8a16` is two alternatives of one flag)."""
    match = HINT.search(error.strip())
    assert match, error
    alternatives: list[list[str]] = []
    for part in match.group(1).split(" or "):
        words = shlex.split(part)
        if words == ["less"]:  # "--ctx N or less"
            continue
        if words[0].startswith("--"):
            alternatives.append(words)
        else:  # "w8a16" continuing "--dtype int8 or w8a16"
            alternatives.append([alternatives[-1][0], words[0]])
    return alternatives


@pytest.mark.slow
@pytest.mark.parametrize("card", catalog.card_ids())
def test_every_does_not_fit_hint_leads_to_a_plan(card: str) -> None:
    tried = 0
    for model in catalog.model_ids():
        flags = ["--model", model, "--card", card, "--ctx", "32k"]
        refused = runner.invoke(app, flags)
        if refused.exit_code != 3:
            continue
        for hint in hints_of(refused.output):
            changed = [*flags, *hint] if hint[0] != "--ctx" else [*flags[:-2], *hint]
            result = runner.invoke(app, changed)
            assert result.exit_code == 0, (changed, result.output[-300:])
            tried += 1
    assert tried or card != "ascend-910b4"  # the grid runs hints, not only refusals


def test_no_fp8_hint_on_a_card_without_fp8_and_the_first_tp_that_fits() -> None:
    result = runner.invoke(app, ["--model", "llama-3.1-70b", "--card", "ascend-910b4"])
    assert result.exit_code == 3
    assert "fp8" not in result.output and "try --tp 8" in result.output
    assert (
        runner.invoke(app, ["--model", "llama-3.1-70b", "--card", "ascend-910b4", "--tp", "4"]).exit_code == 3
    )


@pytest.mark.parametrize(
    "command", [[], ["mindie"], ["vllm"], ["serve"], ["sweep"], ["calibrate"], ["models"]]
)
def test_help_shows_no_type_on_flags(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"], terminal_width=160)
    assert result.exit_code == 0
    assert "--json" in result.output or "--help" in result.output
    assert "<bool>" not in result.output
    assert "<" in result.output or command == ["models"]  # value options keep their type (<int>, <str>)


@pytest.mark.slow
def test_calibrate_from_bench_takes_the_card_from_the_csv(tmp_path: Path) -> None:
    points, out = h200_points_of("qwen3-8b", tmp_path), tmp_path / "fitted.yaml"
    kvplan("calibrate --from-bench", points, "--out", out)
    assert yaml.safe_load(out.read_text())["id"] == "nvidia-h200"
    mixed = tmp_path / "mixed.csv"
    last = H200_POINTS.read_text().splitlines()[-1]
    mixed.write_text(points.read_text() + last.replace("nvidia-h200", "ascend-950pr", 1) + "\n")
    refused = runner.invoke(app, ["calibrate", "--from-bench", str(mixed), "--out", str(tmp_path / "x.yaml")])
    assert refused.exit_code == 2 and "--card: required when" in refused.output


def test_prompt_flag_help_names_the_default_the_plan_uses() -> None:
    """The plan's TTFT is for the default workload's prompt (kinds.default_request_tokens: 256 at 32k), not
    for a --ctx-long prompt; --input-tokens' help said "default: --ctx"."""
    params = typer.main.get_command(app).params
    (help_text,) = [p.help for p in params if "--input-tokens" in p.opts]
    assert help_text is not None and "(default: --ctx)" not in help_text
    assert help_text.startswith("Prompt length for TTFT (default: the default workload's 256")
    plan = runner.invoke(app, ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8", "--json"])
    assert json.loads(plan.output)["performance"]["ttft_prompt_tokens"] == 256
