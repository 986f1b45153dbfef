"""`kvplan --help` lists every command with a one-paragraph summary: no line break carried over from a
docstring wrapped in the source (the list printed those as they stood, so summaries came out ragged)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from planner.cli import app

WIDE = {"COLUMNS": "300", "TERMINAL_WIDTH": "300"}  # wide enough that no summary needs to wrap


def command_rows(args: list[str]) -> list[list[str]]:
    """The [name, summary] cells of each line of the help's Commands panel."""
    result = CliRunner().invoke(app, [*args, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    panel = result.stdout.split("Commands", 1)[1].split("╰", 1)[0]
    lines = [line.strip("│ ") for line in panel.splitlines()[1:] if line.startswith("│")]
    return [line.split(None, 1) for line in lines]


@pytest.mark.parametrize(
    ("args", "names"),
    [([], {"serve", "validate", "models"}), (["models"], {"import"}), (["bench"], {"import"})],
)
def test_every_command_summary_is_one_line_when_the_screen_is_wide(args: list[str], names: set[str]) -> None:
    rows = command_rows(args)
    assert names <= {row[0] for row in rows}
    for row in rows:  # a continuation line would start with words of a summary, not a command's name
        assert len(row) == 2 and row[1].endswith("."), row
