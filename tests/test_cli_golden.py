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
        assert text == recorder.case_path(number).read_text(), f"kvplan {recorder.commands()[number]}"
