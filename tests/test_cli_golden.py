"""Recorded CLI outputs: a fixed set of `kvplan` invocations must print, exit and write exactly what
tests/golden/cli/cases/ holds. Refresh deliberately: `python3 tests/record_cli_outputs.py --write`."""

from __future__ import annotations

import pytest

from tests import record_cli_outputs as recorder


@pytest.mark.slow
def test_recorded_cli_outputs_unchanged() -> None:
    outputs = recorder.transcripts()
    assert len(outputs) == len(list((recorder.GOLDEN / "cases").glob("*.txt")))
    for number, text in enumerate(outputs):
        assert text == recorder.case_path(number).read_text(), f"kvplan {recorder.commands()[number]}"
