"""`kvplan` run as a program builds its sub-commands only when the arguments ask for one (start-up time of
the mission command), and answers exactly as the fully built app does."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import planner.cli as cli

MISSION = ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8"]


def run_as_program(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Exit code and stdout+stderr of `app(args)` the way the `kvplan` script calls it."""
    with pytest.raises(SystemExit) as done:
        cli.app(args, prog_name="kvplan")
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


def test_mission_builds_no_sub_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    built: list[str] = []
    real = cli.KvplanGroup._load

    def spy(self: cli.KvplanGroup) -> None:
        built.append("sub-commands")
        real(self)

    monkeypatch.setattr(cli.KvplanGroup, "_load", spy)
    code, text = run_as_program(MISSION, capsys)
    assert code == 0 and "Recommended: max_batch_size" in text
    assert built == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [MISSION, ["--help"], ["models", "--help"], ["mindei"], ["--json", "cardz"], ["cards", "--json"]],
)
def test_program_matches_fully_built_app(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run_as_program(args, capsys)
    full = CliRunner().invoke(cli.app, args, prog_name="kvplan")
    assert (code, text) == (full.exit_code, full.output)
