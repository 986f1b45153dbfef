"""Recorded CLI outputs: a fixed set of `kvplan` invocations must print, exit and write exactly what
tests/golden/cli/cases/ holds. Refresh deliberately: `python3 tests/record_cli_outputs.py --write`.

Each case runs in a child forked from this process (tests/hostile/promise.py; tests/test_hostile_runner.py
checks a forked run equals a fresh one), not a new interpreter: the same transcripts without an interpreter
start per case; the recorder itself (`--write`) still starts a fresh interpreter per case."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import record_cli_outputs as recorder
from tests.hostile.promise import run_kvplan


def run_forked(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """What recorder.run_fresh returns, from a forked child; newlines read as text mode reads them."""
    run = run_kvplan(args, cwd=cwd, env=env, forked=True, timeout_s=120)
    assert run.returncode is not None, run.describe()
    return tuple(  # type: ignore[return-value]
        [run.returncode, *(s.replace("\r\n", "\n").replace("\r", "\n") for s in (run.stdout, run.stderr))]
    )


@pytest.mark.slow
def test_recorded_cli_outputs_unchanged() -> None:
    outputs = recorder.transcripts(run_forked)
    assert len(outputs) == len(list((recorder.GOLDEN / "cases").glob("*.txt")))
    for number, text in enumerate(outputs):
        recorded = recorder.case_path(number).read_text()
        assert recorder.same_transcript(text, recorded), f"kvplan {recorder.commands()[number]}"
        assert recorder.comparable(text) == recorder.comparable(recorded)  # the diff pytest shows


def test_transcripts_compare_long_floats_to_twelve_digits() -> None:
    """The last digits numpy's build moves are ignored; a change a user could see is not."""
    recorded = '{"rate": 1711.4280586877003, "batch": 31, "ttft_s": 0.5472085730463732}'
    assert recorder.same_transcript(recorded.replace("003", "005"), recorded)
    assert not recorder.same_transcript(recorded.replace("1711.428", "1711.429"), recorded)
    assert not recorder.same_transcript(recorded.replace("31", "32"), recorded)
    assert recorder.comparable(recorded) == '{"rate": 1711.42805869, "batch": 31, "ttft_s": 0.547208573046}'
