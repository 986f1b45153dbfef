"""Run `kvplan` as a subprocess, under a time and memory bound, and check the README's error promise.

The promise (README "Errors", issue 14): exit 0, 2 or 3; for 2 and 3 stderr is exactly one line
(`kvplan: error: ...`) naming the flag or file and the value; never a traceback; never a hang; with
`--json` (or `--format json`) stdout is strict JSON: no NaN, Infinity or -Infinity.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HOSTILE_DIR = Path(__file__).resolve().parent
REPO = HOSTILE_DIR.parents[1]
TIMEOUT_S = float(os.environ.get("KVPLAN_HOSTILE_TIMEOUT_S", "20"))
MEMORY_LIMIT_BYTES = 3 * 2**30  # a /dev/zero read dies of MemoryError here instead of taking the machine
FILE_LIMIT_BYTES = 256 * 2**20  # no run may write more than this to one file

# argv shared by tests/test_hostile_cases.py and issue_examples.py
BASE = ["--model", "qwen3-8b", "--ctx", "4k"]
WEIGHTS = ["--weights-path", "/data/models/qwen3-8b"]
MINDIE = ["mindie", *BASE, *WEIGHTS]
FIRST_K_DENSE_CARD = HOSTILE_DIR / "modelcards" / "deepseek-first-k-dense-1000.yaml"
# DeepSeek with first_k_dense_replace 1000 (more than its 61 layers) on a 910C at tp 16
FIRST_K_DENSE = [
    "--model",
    str(FIRST_K_DENSE_CARD),
    "--card",
    "ascend-910c",
    "--tp",
    "16",
    "--dtype",
    "int8",
    "--ctx",
    "16k",
]


def kvplan_command() -> list[str]:
    """The installed `kvplan` console script next to this interpreter; else the planner.cli entry point."""
    script = Path(sys.executable).parent / "kvplan"
    if script.exists():
        return [str(script)]
    found = shutil.which("kvplan")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from planner.cli import app; sys.argv[0] = 'kvplan'; app()"]


def _limits() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT_BYTES, FILE_LIMIT_BYTES))


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str

    def describe(self) -> str:
        shown = " ".join(repr(a) if (not a or " " in a) else a for a in self.args)
        return (
            f"kvplan {shown[:600]}\n  rc={self.returncode}\n  stderr: {self.stderr[-1500:]!r}"
            f"\n  stdout: {self.stdout[:300]!r}"
        )


def run_kvplan(args: list[str], *, cwd: Path, timeout_s: float = TIMEOUT_S) -> Run:
    """Run kvplan with `args` in `cwd`; a run past `timeout_s` is killed and reported as returncode None."""
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1", TERM="dumb", PYTHONHASHSEED="0")
    # the checkout under test, not whichever tree the console script's editable install points at
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.pop("FORCE_COLOR", None)
    try:
        done = subprocess.run(
            [*kvplan_command(), *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
            preexec_fn=_limits,
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode("utf-8", "replace")
        err = (exc.stderr or b"").decode("utf-8", "replace")
        return Run(tuple(args), None, out, err)
    return Run(
        tuple(args),
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def _no_constant(name: str) -> object:
    raise ValueError(f"non-standard JSON constant {name}")


def strict_json(text: str) -> object:
    """json.loads that refuses NaN, Infinity and -Infinity (RFC 8259 has none of them)."""
    return json.loads(text, parse_constant=_no_constant)


def wants_json(args: tuple[str, ...]) -> bool:
    if "--json" in args:
        return True
    return any(a == "--format" and b == "json" for a, b in itertools.pairwise(args))


EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")


def exception_line(stderr: str) -> str:
    """The `SomeError: message` line of the last traceback in `stderr`."""
    found = [m.group(0) for m in map(EXCEPTION_LINE.match, stderr.splitlines()) if m]
    return found[-1] if found else (stderr.strip().splitlines() or ["?"])[-1]


def broken_promises(run: Run) -> list[str]:
    """Every way `run` breaks the promise (empty when it keeps it)."""
    problems: list[str] = []
    if run.returncode is None:
        return [f"no answer within {TIMEOUT_S:.0f} s (hang or unbounded work)"]
    if "Traceback" in run.stderr or "Traceback" in run.stdout:
        problems.append(f"traceback: {exception_line(run.stderr)[:200]}")
    if run.returncode not in (0, 2, 3):
        problems.append(f"exit code {run.returncode} (allowed: 0, 2, 3)")
    if run.returncode in (2, 3):
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        if len(lines) != 1:
            problems.append(f"stderr has {len(lines)} lines, not one")
        elif not lines[0].startswith("kvplan: error: "):
            problems.append(f"stderr line does not start with 'kvplan: error: ': {lines[0][:120]!r}")
    if run.returncode == 0 and wants_json(run.args):
        try:
            strict_json(run.stdout)
        except ValueError as exc:
            problems.append(f"--json output is not strict JSON: {exc}")
    return problems


def assert_promise(run: Run) -> None:
    problems = broken_promises(run)
    assert not problems, "; ".join(problems) + "\n" + run.describe()


def error_line(run: Run) -> str:
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 else ""
