"""The hostile and fuzz tests run `kvplan` in a child forked from the test process (tests/hostile/promise.py):
it must answer exactly as the installed script started afresh, or those tests would check the wrong thing.

One case per kind of answer: a plan, strict JSON, a usage error (2), a does-not-fit error (3), a rich
help screen, an uncaught exception's traceback, a file written in the working directory, and a hang."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.promise import BASE, Run, broken_promises, run_kvplan

CASES = [
    BASE,
    [*BASE, "--json"],
    [*BASE, "--tp", "abc"],
    ["--model", "llama-3.1-70b", "--card", "ascend-910b4", "--ctx", "128k"],
    ["serve", "--help"],
    ["mindie", *BASE, "--weights-path", "/w", "--out", "config.json"],
]


def normalised(run: Run, cwd: Path) -> tuple[int | None, str, str, list[str]]:
    files = sorted(f"{p.name}:{p.read_text()}" for p in cwd.iterdir() if p.is_file())
    return run.returncode, run.stdout, run.stderr, files


@pytest.mark.slow
@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a))
def test_forked_run_equals_a_fresh_process(tmp_path: Path, args: list[str]) -> None:
    forked_dir, fresh_dir = tmp_path / "forked", tmp_path / "fresh"
    forked_dir.mkdir()
    fresh_dir.mkdir()
    forked = run_kvplan(args, cwd=forked_dir, forked=True)
    fresh = run_kvplan(args, cwd=fresh_dir, forked=False)
    assert normalised(forked, forked_dir) == normalised(fresh, fresh_dir)
    assert forked.returncode in (0, 2, 3)


def test_forked_run_reports_a_traceback_and_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child shows an uncaught exception as a fresh interpreter would (exit 1, a traceback) and is
    killed at the timeout (returncode None): the two promises the hostile tests exist to catch."""
    import planner.cli

    def crash(*args, **kwargs):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(planner.cli, "app", crash)
    crashed = run_kvplan(BASE, cwd=tmp_path, forked=True)
    assert crashed.returncode == 1 and "Traceback" in crashed.stderr and "ZeroDivisionError" in crashed.stderr
    assert any("traceback" in problem for problem in broken_promises(crashed))

    def hang(*args, **kwargs):
        while True:
            pass

    monkeypatch.setattr(planner.cli, "app", hang)
    hung = run_kvplan(BASE, cwd=tmp_path, forked=True, timeout_s=0.5)
    assert hung.returncode is None and broken_promises(hung)
