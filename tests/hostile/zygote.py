"""A fresh `kvplan` process for each bounded run without an interpreter start each (test_hostile_bounds.py).

`python tests/hostile/zygote.py` starts once, imports what every `kvplan` run imports first (planner.cli, as
the console script does), prints its own CPU seconds so far (the start-up every fresh run pays) and then, for
each JSON line on stdin ({"args": [...], "cwd": ..., "cpu_limit_s": ..., "memory_limit_bytes": ...}), forks a
child that sets RLIMIT_CPU and RLIMIT_AS on itself and runs `kvplan <args>` as the console script would. The
child starts from the state a fresh process has after that import (no test process, no warm caches: the
zygote ran nothing else); its CPU time and peak RSS come from os.wait4 (a forked child's CPU counters start at
zero, so the caller adds the start-up seconds). One JSON line per run comes back on stdout:
{"returncode", "cpu_s", "max_rss_bytes", "stderr"}; returncode < 0 is a signal (SIGXCPU: past the CPU limit).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import tempfile
import time

WALL_LIMIT_S = 600.0  # only a backstop: the CPU limit is the bound


def _child(case: dict[str, object], err_fd: int) -> None:
    code = 1
    try:
        cpu_limit = int(case["cpu_limit_s"])  # type: ignore[call-overload]
        memory = int(case["memory_limit_bytes"])  # type: ignore[call-overload]
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_limit + 5))
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        os.chdir(str(case["cwd"]))
        null_in = os.open(os.devnull, os.O_RDONLY)
        null_out = os.open(os.devnull, os.O_WRONLY)
        for fd, target in ((null_in, 0), (null_out, 1), (err_fd, 2)):
            os.dup2(fd, target)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 (lives until os._exit)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
        if case.get("spin"):  # the harness check: a runaway must be stopped by the CPU limit
            while True:
                pass
        from planner.cli import app

        sys.argv = ["kvplan", *case["args"]]  # type: ignore[misc]
        try:
            app()
            code = 0
        except SystemExit as exc:
            code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):  # the exit code says what happened
                stream.flush()
        os._exit(code)


def run(case: dict[str, object]) -> dict[str, object]:
    with tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            _child(case, err.fileno())
        start = time.monotonic()
        while (done := os.wait4(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() - start > WALL_LIMIT_S:
                os.kill(pid, 9)
            time.sleep(0.02)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    usage = done[2]
    return {
        "returncode": os.waitstatus_to_exitcode(done[1]),
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "max_rss_bytes": usage.ru_maxrss * 1024,
        "stderr": stderr[-2000:],
    }


def main() -> None:
    import planner.cli  # noqa: F401  (what the console script imports before anything runs)

    ready = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"startup_cpu_s": ready.ru_utime + ready.ru_stime}), flush=True)
    for line in sys.stdin:
        print(json.dumps(run(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
