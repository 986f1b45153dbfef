"""One option given twice with different values, by two spellings or one repeated, is refused in one line
naming both as typed, exit 2 (planner/cli/repeats.py, from options.TypelessFlags.parse_args: every command);
the same value twice is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.cli.repeats import conflict, occurrences
from tests.hostile.promise import broken_promises, run_kvplan

runner = CliRunner()


def refused(args: list[str]) -> str:
    """The one stderr line of a run that must exit 2."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and result.stdout == "", result.output
    return lines[0]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["-m", "qwen3-27b", "--tp", "2", "--tensor-parallel-size", "4"],
            "kvplan: error: --tp 2 and --tensor-parallel-size 4 set the same option; give one",
        ),
        (
            ["-m", "qwen3-27b", "--tp", "2", "--tp", "4"],
            "kvplan: error: --tp 2 and --tp 4 set the same option; give one",
        ),
        (
            ["dashboard", "--open-browser", "--no-browser"],
            "kvplan: error: --open-browser and --no-browser set the same option; give one",
        ),
        (
            ["serve", "-m", "qwen3-27b", "--max-model-len=8k", "--ctx", "4k"],
            "kvplan: error: --max-model-len 8k and --ctx 4k set the same option; give one",
        ),
        (
            ["-m", "qwen3-27b", "--model", "qwen3-8b"],
            "kvplan: error: -m qwen3-27b and --model qwen3-8b set the same option; give one",
        ),
    ],
)
def test_two_values_for_one_option_are_refused(args: list[str], line: str) -> None:
    assert refused(args) == line


def test_the_same_value_twice_is_accepted() -> None:
    twice = runner.invoke(app, ["-m", "qwen3-27b", "--tp", "2", "--tensor-parallel-size", "2", "--tp=2"])
    once = runner.invoke(app, ["-m", "qwen3-27b", "--tp", "2"])
    assert twice.exit_code == 0, twice.output
    assert twice.stdout == once.stdout


def test_a_long_or_hostile_value_is_cut_and_escaped_in_one_line() -> None:
    line = refused(["-m", "qwen3-27b", "--card", "x" * 300, "--card", "a\nb\x1d"])
    assert "set the same option" in line and "x" * 37 + "..." in line and "\\x1d" in line


def test_a_fresh_process_keeps_the_error_promise(tmp_path: Path) -> None:
    run = run_kvplan(["serve", "-m", "qwen3-27b", "--batch", "4", "--max-num-seqs", "8"], cwd=tmp_path)
    assert run.returncode == 2 and broken_promises(run) == []
    assert run.stderr.strip() == "kvplan: error: --batch 4 and --max-num-seqs 8 set the same option; give one"


def test_the_walk_reads_values_as_the_parser_does() -> None:
    """Attached values (--tp=4, -mNAME), a value that looks like a flag, and a group stopping at its
    sub-command (the sub-command's own flags are its parse's)."""
    from tests.test_cli_flags import every_command

    root = every_command()[""]
    params = root.params
    uses = occurrences(
        params, ["-mqwen3", "--tp=4", "--card", "--tp", "serve", "--tp", "8"], interspersed=False
    )
    assert [(u.spelling, u.value) for u in uses["model"]] == [("-m", "qwen3")]
    assert [(u.spelling, u.value) for u in uses["tp"]] == [("--tp", "4")]
    assert [(u.spelling, u.value) for u in uses["card"]] == [("--card", "--tp")]
    assert conflict(params, ["--tp", "2", "--", "--tp", "4"], interspersed=True) is None


def test_a_flag_repeated_is_accepted() -> None:
    """On/off flags typed twice the same way (--json --json, --uncalibrated twice) are one value."""
    twice = runner.invoke(app, ["-m", "qwen3-8b", "--json", "--uncalibrated", "--json", "--uncalibrated"])
    once = runner.invoke(app, ["-m", "qwen3-8b", "--json", "--uncalibrated"])
    assert twice.exit_code == 0, twice.output
    assert twice.stdout == once.stdout


@pytest.mark.parametrize(
    "typed",
    [
        "-m qwen3-8b --max-model-len 8k --tensor-parallel-size 2 --max-num-seqs 8 --prefix-cached-fraction .5"
        " --uncalibrated",
        "-m qwen3-8b --engine vllm --kv-cache-dtype auto --gpu-memory-utilization 0.9 --ctx 4k --ctx 4k",
        "-m deepseek-v3 --card ascend-910c --dtype int8 --tp 16 --ctx 16k --mtp 1 --batch 2",
    ],
)
def test_the_printed_next_command_is_not_refused(typed: str) -> None:
    """kvplan's own `Next:` command (the typed flags in their first spelling, plus what the config command
    needs) passes the repeats walk of the command it names, placeholders filled."""
    import json
    import shlex

    from tests.test_cli_flags import every_command

    result = runner.invoke(app, [*shlex.split(typed), "--json"])
    assert result.exit_code == 0, result.output
    words = shlex.split(
        json.loads(result.stdout)["engine_config"]["next_command"].replace("<", "").replace(">", "")
    )
    command = every_command()[words[1]]
    assert conflict(command.params, words[2:], interspersed=True) is None, words
    assert len([w for w in words if w.startswith("--")]) == len({w for w in words if w.startswith("--")})
