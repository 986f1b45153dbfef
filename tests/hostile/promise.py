"""Run `kvplan` as a process of its own, under a time and memory bound, and check the README's error promise.

Each run is a forked child of the test process (planner.cli already imported: ~0.05 s instead of a 1-3 s
interpreter start), with its own stdin/stdout/stderr, working directory, environment, rlimits and exit
code, killed at the timeout. KVPLAN_HOSTILE_SUBPROCESS=1 runs the installed `kvplan` script instead
(exec, as before); tests/test_hostile_runner.py checks that both give the same run.

The promise (README "Errors", issue 14): exit 0, 2 or 3; for 2 and 3 stderr is exactly one line
(`kvplan: error: ...`) naming the flag or file and the value; never a traceback; never a hang; with
`--json` (or `--format json`) stdout is strict JSON: no NaN, Infinity or -Infinity.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import types
import warnings
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


def kvplan_env() -> dict[str, str]:
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1", TERM="dumb", PYTHONHASHSEED="0")
    # the checkout under test, not whichever tree the console script's editable install points at
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.pop("FORCE_COLOR", None)
    return env


FORKED = os.environ.get("KVPLAN_HOSTILE_SUBPROCESS", "") in ("", "0") and hasattr(os, "fork")
# What an interpreter started without -W has (the test process has pytest's filters and recorder).
DEFAULT_WARNING_FILTERS = [
    ("default", None, DeprecationWarning, "__main__", 0),
    ("ignore", None, DeprecationWarning, None, 0),
    ("ignore", None, PendingDeprecationWarning, None, 0),
    ("ignore", None, ImportWarning, None, 0),
    ("ignore", None, ResourceWarning, None, 0),
]


def _vm_size_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _child(args: list[str], cwd: Path, env: dict[str, str], out_fd: int, err_fd: int) -> None:
    """The forked child: a fresh process as far as kvplan can tell, then os._exit with its exit code."""
    code = 1
    try:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        null = os.open(os.devnull, os.O_RDONLY)
        for fd, target in ((null, 0), (out_fd, 1), (err_fd, 2)):
            os.dup2(fd, target)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 (lives until os._exit)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
        # The memory bound counts from what the warm parent already maps (a fresh interpreter: ~30 MiB).
        limit = _vm_size_bytes() + MEMORY_LIMIT_BYTES
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT_BYTES, FILE_LIMIT_BYTES))
        logging.root.handlers = []  # pytest's capture handlers: a real process logs to stderr
        logging.root.setLevel(logging.WARNING)
        warnings.filters[:] = DEFAULT_WARNING_FILTERS
        warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
        warnings._filters_mutated()  # type: ignore[attr-defined]
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from planner.cli import app

        sys.argv = ["kvplan", *args]
        sys.modules["__main__"] = types.ModuleType("__main__")  # click names the program from it
        try:
            app()
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            sys.excepthook(*sys.exc_info())  # what the interpreter does with an uncaught exception
            code = 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


def _run_forked(args: list[str], cwd: Path, timeout_s: float, env: dict[str, str]) -> Run:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            _child(args, cwd, env, out.fileno(), err.fileno())
        deadline = time.monotonic() + timeout_s
        delay = 0.002
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                status = None
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    code = None if status is None else os.waitstatus_to_exitcode(status)
    return Run(tuple(args), code, stdout, stderr)


def run_kvplan(
    args: list[str],
    *,
    cwd: Path,
    timeout_s: float = TIMEOUT_S,
    forked: bool = FORKED,
    env: dict[str, str] | None = None,
) -> Run:
    """Run kvplan with `args` in `cwd`; a run past `timeout_s` is killed and reported as returncode None.
    forked: a child forked from this process (default) or, False, the installed script started afresh.
    env: the whole environment (default: this one with a 100-column, colourless terminal)."""
    env = kvplan_env() if env is None else env
    if forked:
        return _run_forked(args, cwd, timeout_s, env)
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
