"""Defect report h53: the prefill budget is one setting on every command (`--max-prefill-tokens` =
`--max-num-batched-tokens`, `simulate`'s `--max-batched-tokens` too); vLLM's max_num_batched_tokens >=
max_num_seqs is kept alike by the plan, `kvplan vllm`, `serve` and `simulate` (a cap with a note, a larger
`--batch` / `--max-batch` refused in one line); `simulate --trace` refuses the flags it ignores, notes a sort
and names the line that does not fit; house-style messages for the knobs; lab/accuracy/sim_accuracy.py runs.
Each test failed on main before these changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()
TRACES = Path(__file__).parent / "fixtures" / "traces"  # copied from the defect report's repro files
QWEN = ["-m", "qwen3-27b", "--dtype", "fp8"]
SIM = ["simulate", *QWEN, "--rate", "1", "--requests", "20", "--json"]
VLLM_RULE = "vLLM refuses max_num_batched_tokens < max_num_seqs, vllm/config/scheduler.py:250-261"


def ok(args: list[str]) -> str:
    """stdout + stderr of a run that exits 0."""
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output


def refused(args: list[str], message: str, *, code: int = 2) -> None:
    """The command exits `code` with one `kvplan: error:` line that starts with `message`."""
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    assert result.stderr.startswith(f"kvplan: error: {message}"), result.stderr
    assert result.stderr.count("\n") == 1


def simulated(args: list[str]) -> dict[str, object]:
    """`kvplan simulate --json`: the summary."""
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


# --- 1. one prefill budget, whatever its spelling ----------------------------------------------------


def test_every_spelling_of_the_prefill_budget_is_the_engines_budget_in_simulate() -> None:
    """MindIE: --max-num-batched-tokens 1 was vLLM's knob, ignored (the run equalled no flag); now it is
    maxPrefillTokens, raised to the longest prompt as --max-prefill-tokens 1 is. vLLM: --max-prefill-tokens
    was MindIE's knob, ignored (2048-token chunks); now every spelling sets max_num_batched_tokens."""
    plain = simulated(SIM)
    spelled = [simulated([*SIM, flag, "1"]) for flag in ("--max-prefill-tokens", "--max-num-batched-tokens")]
    assert spelled[0] == spelled[1] != plain
    vllm = [*SIM, "--engine", "vllm"]
    budgets = [
        simulated([*vllm, flag, "64"])
        for flag in ("--max-prefill-tokens", "--max-num-batched-tokens", "--max-batched-tokens")
    ]
    assert budgets[0] == budgets[1] == budgets[2]
    assert budgets[0]["scheduler"]["max_batched_tokens"] == 64  # type: ignore[index]
    assert simulated(vllm)["scheduler"]["max_batched_tokens"] == 2048  # type: ignore[index]


def test_the_flag_parity_exception_for_simulate_is_gone() -> None:
    from tests import test_cli_flag_parity as parity

    assert ("simulate", "--max-prefill-tokens") not in parity.NOT_THE_ENGINE_SETTING
    assert {"--max-prefill-tokens", "--max-num-batched-tokens"} <= parity.options_of("simulate")


# --- 2. vLLM: max_num_batched_tokens >= max_num_seqs, on every command --------------------------------

CAPPED = f"--max-num-seqs is capped at --max-num-batched-tokens 1 ({VLLM_RULE})"


@pytest.mark.parametrize(
    "command",
    [
        [*QWEN, "--engine", "vllm"],
        ["serve", *QWEN, "--engine", "vllm"],
        ["simulate", *QWEN, "--engine", "vllm", "--rate", "1", "--requests", "5"],
    ],
)
def test_a_budget_below_the_batch_caps_it_with_a_note(command: list[str]) -> None:
    """simulate exited 2 ("below max_num_seqs"), the plan and serve capped the batch at 1 without a line."""
    output = ok([*command, "--max-prefill-tokens", "1"])
    assert CAPPED in " ".join(output.split())


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        ([*QWEN, "--engine", "vllm"], "--batch"),
        (["vllm", *QWEN], "--batch"),
        (["serve", *QWEN, "--engine", "vllm"], "--max-batch"),
        (["simulate", *QWEN, "--engine", "vllm", "--rate", "1", "--requests", "5"], "--max-batch"),
        (["simulate", *QWEN, "--engine", "vllm", "--rate", "1", "--requests", "5"], "--max-num-seqs"),
    ],
)
def test_a_batch_above_the_budget_is_refused_alike(command: list[str], flag: str) -> None:
    """The plan said "4 sequences ... do not fit" (exit 3), serve ran 1 user silently."""
    refused(
        [*command, "--max-num-batched-tokens", "1", flag, "4"],
        f"{flag}: above --max-num-batched-tokens (got 4, expected <= 1: {VLLM_RULE})",
    )


# --- 3. traces ---------------------------------------------------------------------------------------

TRACE = ["simulate", *QWEN, "--trace"]


@pytest.mark.parametrize(
    ("extra", "flag", "value"),
    [
        (["--input-tokens", "1k", "--output-tokens", "9"], "--input-tokens", "1k"),
        (["--requests", "5"], "--requests", "5"),
        (["--prompt-tokens", "512"], "--prompt-tokens", "512"),
        (["--seed", "3"], "--seed", "3"),
    ],
)
def test_a_trace_refuses_the_flags_it_would_ignore(extra: list[str], flag: str, value: str) -> None:
    path = TRACES / "ok.csv"
    refused([*TRACE, str(path), *extra], f"{flag}: not used with --trace (got {value} beside --trace {path}")


def test_an_unsorted_trace_is_sorted_with_a_note() -> None:
    path = TRACES / "unsorted.csv"
    output = ok([*TRACE, str(path)])
    assert (
        f"note: --trace {path}: rows sorted by arrival_s (line 3 arrives at 0.5 s, before line 2's 1 s)"
        in (output)
    )
    assert "rows sorted" not in ok([*TRACE, str(TRACES / "ok.csv")])


def test_a_trace_that_does_not_fit_names_its_line() -> None:
    path = TRACES / "longin.csv"
    refused(
        [*TRACE, str(path)], f"--trace {path}:2: its 1000128-token request sizes the deployment: ", code=3
    )


# --- 4. one-line messages in the house style ---------------------------------------------------------

BASE = ["simulate", *QWEN, "--rate", "1", "--requests", "5"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-batch", "0"], "--max-batch: out of range (got 0, expected 1..1000000)"),
        (["--max-num-seqs", "2000000"], "--max-num-seqs: out of range (got 2000000, expected 1..1000000)"),
        (
            ["--max-batch", "6000"],
            "--max-batch: more than the simulator steps (got 6000, expected <= 5000: its step table holds "
            "one row per running-batch size",
        ),
        (["--seed", "-1"], "--seed: out of range (got -1, expected 0..9223372036854775807)"),
        (["--max-batched-tokens", "0"], "--max-batched-tokens: out of range (got 0, expected 1..1073741824)"),
        (
            ["--select-batch", "maybe"],
            "--select-batch: a switch, takes no value (got --select-batch maybe, expected --select-batch "
            "alone",
        ),
        (
            ["--input-tokens", "empirical:"],
            "--input-tokens: empirical names no file (got 'empirical:', expected empirical:FILE",
        ),
        (["--max-prefill-batch", "0"], "--max-prefill-batch: out of range (got 0, expected 1..5000"),
    ],
)
def test_simulate_refuses_in_the_house_style(extra: list[str], message: str) -> None:
    refused([*BASE, *extra], message)


def test_the_batch_range_is_the_plans_on_every_command() -> None:
    for command, flag in (([*QWEN], "--batch"), (["serve", *QWEN], "--max-batch"), (BASE, "--max-batch")):
        refused([*command, flag, "0"], f"{flag}: out of range (got 0, expected 1..1000000)")
    refused(["serve", *QWEN, "--concurrency", "0"], "--concurrency: out of range (got 0, expected >= 1)")


def test_empirical_lengths_are_written_as_any_token_flag() -> None:
    """A `1k` line was refused ("not a token count")."""
    lengths = f"empirical:{TRACES / 'lengths-1k.txt'}"
    summary = simulated([*SIM, "--input-tokens", lengths])
    assert summary["requests"] == 20


def test_simulate_help_names_every_search_and_the_time_knobs() -> None:
    from tests.test_cli_flags import every_command

    params = {param.name: param for param in every_command()["simulate"].params}
    assert "max-rate, max-concurrency, knee or pd" in str(params["search"].help)
    for name in ("prefill_time_ms_per_req", "decode_time_ms_per_req"):
        assert "MindIE" in str(params[name].help)


# --- 5. lab/accuracy/sim_accuracy.py -----------------------------------------------------------------


@pytest.mark.lab
def test_sim_accuracy_runs_its_pd_section(capsys: pytest.CaptureFixture[str]) -> None:
    """pd_lines passed prefill_tp= to pdspec.spec_for, which no longer takes it (TypeError)."""
    from lab.accuracy import sim_accuracy

    sim_accuracy.pd_lines()
    rows = capsys.readouterr().out.splitlines()
    assert [row.split(" |")[0] for row in rows] == ["| fixed 256", "| lognormal 256 x e^(0.9 N), <= 4k"]
