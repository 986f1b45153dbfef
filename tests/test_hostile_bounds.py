"""Issue 26 "Done when": no command on an input under 1 MB takes more than 10 s of CPU or 2 GiB.

Each case runs `kvplan` in a process of its own under RLIMIT_CPU and RLIMIT_AS = 2 GiB (the kernel stops a
run past either: SIGXCPU / MemoryError) and reads the child's own rusage with os.wait4, so the check is CPU
time, not wall time, and holds on a loaded machine. A run must end in exit 0, 2 or 3 within the bounds.
The processes are forked from one zygote (tests/hostile/zygote.py) that has imported planner.cli as the
console script does, instead of an interpreter start per case (~1 s of CPU each, half of this file's cost):
the start-up CPU the zygote measured is added to every run's own, and its RLIMIT_CPU is 10 s less that, so
the bound is still a fresh process's from exec to exit.
The inputs are the issue's slow and large reproducers at their worst size under 1 MB, plus the committed
hostile corpus (tests/hostile/). Slow tier.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hostile import corpus
from tests.test_hostile_round3 import alias_bomb_card, safetensors

pytestmark = pytest.mark.slow

CPU_LIMIT_S = 10
MEMORY_LIMIT_BYTES = 2 * 2**30
ZYGOTE = Path(__file__).resolve().parent / "hostile" / "zygote.py"  # the wall backstop (600 s) lives there
INPUT_LIMIT_BYTES = 1_000_000
QWEN = ["-m", "qwen3-8b"]


@dataclass(frozen=True)
class Bounded:
    args: tuple[str, ...]
    returncode: int
    cpu_s: float  # the run's own CPU seconds plus the start-up every fresh process pays
    max_rss_bytes: int
    stderr: str


class Zygote:
    """tests/hostile/zygote.py: one interpreter start, then a forked child per run (module docstring there).
    A run may spend CPU_LIMIT_S less the measured start-up; its CPU time is reported with the start-up added,
    so the bound is what a fresh `kvplan` process spends from exec to exit."""

    def __init__(self, cwd: Path) -> None:
        env = dict(os.environ, COLUMNS="100", NO_COLOR="1", TERM="dumb", PYTHONPATH=str(corpus.REPO))
        self.cwd = cwd
        self.process = subprocess.Popen(
            [sys.executable, str(ZYGOTE)],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.startup_cpu_s = float(self._read()["startup_cpu_s"])
        assert 0 < self.startup_cpu_s < CPU_LIMIT_S / 2, self.startup_cpu_s

    def _read(self) -> dict[str, object]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the zygote exited ({self.process.poll()})"
        return json.loads(line)

    def cpu_limit_s(self) -> int:
        """The RLIMIT_CPU of a run: CPU_LIMIT_S less the start-up, whole seconds (what the kernel takes)."""
        return max(1, math.floor(CPU_LIMIT_S - self.startup_cpu_s))

    def run(self, args: list[str], *, spin: bool = False, cpu_limit_s: int | None = None) -> Bounded:
        """Run kvplan under the limits; CPU seconds and peak RSS from the child's rusage. spin: the child
        spins instead (the harness check), under cpu_limit_s when given."""
        case = {
            "args": args,
            "cwd": str(self.cwd),
            "cpu_limit_s": self.cpu_limit_s() if cpu_limit_s is None else cpu_limit_s,
            "memory_limit_bytes": MEMORY_LIMIT_BYTES,
            "spin": spin,
        }
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(case) + "\n")
        self.process.stdin.flush()
        found = self._read()
        return Bounded(
            tuple(args),
            int(found["returncode"]),  # type: ignore[call-overload]
            self.startup_cpu_s + float(found["cpu_s"]),  # type: ignore[arg-type]
            int(found["max_rss_bytes"]),  # type: ignore[call-overload]
            str(found["stderr"]),
        )

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    started = Zygote(tmp_path)
    try:
        yield started
    finally:
        started.close()


def _inputs(directory: Path) -> dict[str, list[str]]:
    """name -> argv, every input file written into `directory` (each under 1 MB)."""
    (directory / "card").mkdir()
    alias_bomb_card(directory / "card" / "qwen3-8b.yaml")
    (directory / "same.csv").write_text(corpus.SERVING_HEADER + corpus.serving_row() * 5000)
    rows = [corpus.bench_row(f"{0.01 + 1e-6 * i:.6f}", batch=str(1 + i % 256)) for i in range(5000)]
    (directory / "steps.csv").write_text(corpus.BENCH_HEADER + "".join(rows[:1000]))  # at the row cap
    (directory / "steps-5000.csv").write_text(corpus.BENCH_HEADER + "".join(rows))  # past it: refused
    (directory / "long.csv").write_text(
        corpus.BENCH_HEADER + corpus.bench_row("0.01").replace("qwen3-8b", "x" * 900_000)
    )
    deep = "[" * 400_000 + "]" * 400_000
    safetensors(directory / "deep", deep)
    safetensors(
        directory / "big",
        '{"a": {"dtype": "BF16", "shape": [' + "9" * 900_000 + '], "data_offsets": [0, 0]}}',
    )
    (directory / "hf-deep.json").write_text('{"a": ' + deep + "}")
    trace = "".join(f"{i * 0.01:.2f},2048,512\n" for i in range(40_000))
    (directory / "trace.csv").write_text(corpus.TRACE_HEADER + trace)
    contexts = ",".join(str(16 * i) for i in range(1, 65))
    return {
        "S2 alias-bomb card": ["--model", "card/qwen3-8b.yaml"],
        "H2 5000 identical serving rows": [
            "calibrate",
            "--card",
            "ascend-950pr",
            "--from-bench",
            "same.csv",
            "--out",
            "a.yaml",
        ],
        "H2 validate 5000 identical rows": ["validate", "same.csv"],
        "1000 step rows (validate)": ["validate", "steps.csv"],
        "1000 step rows (calibrate)": [
            "calibrate",
            "--card",
            "ascend-950pr",
            "--from-bench",
            "steps.csv",
            "--out",
            "s.yaml",
            "--accept-poor-fit",  # synthetic rows fit badly; the write is bounded too
        ],
        "5000 step rows (validate, refused)": ["validate", "steps-5000.csv"],
        "T8 900 KB CSV field": ["validate", "long.csv"],
        "T2 400k-deep safetensors header": ["models", "import", "deep/config.json"],
        "T1 900k-digit shape": ["models", "import", "big/config.json"],
        "T2 400k-deep config.json": ["models", "import", "hf-deep.json"],
        "H2 pd search at its request cap": [
            "simulate",
            *QWEN,
            "--search",
            "pd",
            "--rate",
            "200",
            "--ttft-ms",
            "1",
            "--requests",
            "1428",
        ],
        "max-rate search": [
            "simulate",
            *QWEN,
            "--search",
            "max-rate",
            "--rate",
            "1e6",
            "--ttft-ms",
            "1e9",
            "--requests",
            "2000",
        ],
        "40 000-request trace": ["simulate", *QWEN, "--trace", "trace.csv"],
        "T10 sweep at the grid cap (csv)": [
            "sweep",
            *QWEN,
            "--batch",
            "1-1024",
            "--ctx",
            contexts,
            "--format",
            "csv",
        ],
        "T10 sweep grid past the cap": ["sweep", *QWEN, "--batch", "1-4096", "--ctx", contexts],
    }


def _corpus_cases() -> dict[str, list[str]]:
    """The committed hostile corpus, each file through the command that reads its kind."""
    readers = {
        "modelcards": lambda p: ["--model", p, "--json"],
        "profiles": lambda p: ["--model", "qwen3-8b", "--card", p, "--json"],
        "bench": lambda p: (
            ["validate", p] if p.endswith(".csv") else ["bench", "import", p, *QWEN, "--card", "ascend-910b3"]
        ),
        "hfconfigs": lambda p: ["models", "import", p],
        "mindie-base": lambda p: ["mindie", *QWEN, "--weights-path", "/w", "--base", p],
        "mindie-logs": lambda p: ["mindie", *QWEN, "--weights-path", "/w", "--from-log", p],
        "traces": lambda p: (
            ["simulate", *QWEN, "--trace", p]
            if "trace" in p
            else ["simulate", *QWEN, "--rate", "2", "--input-tokens", f"empirical:{p}"]
        ),
    }
    return {
        f"corpus {p.parent.name}/{p.name}": readers[kind](str(p))
        for kind in corpus.KINDS
        for p in corpus.corpus_files(kind)
    }


def _over(found: Bounded) -> bool:
    return (
        found.returncode not in (0, 2, 3)
        or found.cpu_s > CPU_LIMIT_S
        or found.max_rss_bytes > MEMORY_LIMIT_BYTES
    )


@pytest.mark.parametrize("cases", ["inputs", "corpus"])
def test_bounded_hostile_run(cases: str, tmp_path: Path, zygote: Zygote) -> None:
    """Every case within the bounds: the issue's reproducers at their worst size under 1 MB, and the
    committed corpus (two tests, so that two workers can share them)."""
    if cases == "inputs":
        named = _inputs(tmp_path)
        sizes = {p.name: p.stat().st_size for p in tmp_path.rglob("*") if p.is_file()}
        assert max(sizes.values()) < INPUT_LIMIT_BYTES, sizes
    else:
        named = _corpus_cases()
    over = []
    for name, args in named.items():
        found = zygote.run(args)
        if _over(found):
            over.append(
                f"{name}: exit {found.returncode}, {found.cpu_s:.1f} s CPU, "
                f"{found.max_rss_bytes / 2**30:.2f} GiB; {found.stderr[-300:]!r}"
            )
    assert not over, "\n".join(over)


def test_the_bound_itself_stops_a_runaway(zygote: Zygote) -> None:
    """The harness catches what it claims to: a child spinning past its RLIMIT_CPU is stopped by SIGXCPU
    (at 2 s here: the kernel's mechanism does not depend on the number) and reported over the bound; a real
    run gets CPU_LIMIT_S less the start-up and comes back within the bound, the start-up counted."""
    runaway = zygote.run([], spin=True, cpu_limit_s=2)
    assert runaway.returncode < 0  # killed by SIGXCPU
    assert runaway.cpu_s == pytest.approx(zygote.startup_cpu_s + 2, abs=1.0)
    assert zygote.cpu_limit_s() + zygote.startup_cpu_s == pytest.approx(CPU_LIMIT_S, abs=1.0)
    assert _over(Bounded((), runaway.returncode, 0.0, 0, ""))
    assert _over(Bounded((), 0, CPU_LIMIT_S + 0.1, 0, ""))
    plain = zygote.run(["--model", "qwen3-8b", "--json"])
    assert plain.returncode == 0 and not _over(plain), plain
    assert zygote.startup_cpu_s < plain.cpu_s < CPU_LIMIT_S
