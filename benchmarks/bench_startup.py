"""Cold-start time of the mission command (goal: well under 0.5 s). Prints numbers; asserts nothing.

Run: python3 benchmarks/bench_startup.py [--runs N] [--compile]

Python caches compiled modules in __pycache__/ (pip does it at install); with PYTHONDONTWRITEBYTECODE set
and no cache, every run compiles planner/ from source again (~50 ms). The first line says which case ran;
--compile writes the cache first, as an install would.
"""

from __future__ import annotations

import argparse
import compileall
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

MISSION = ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8"]


def time_command(command: list[str], runs: int) -> list[float]:
    """Wall-clock seconds of each run of a command (output discarded)."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--compile", action="store_true", help="write planner/'s bytecode cache first")
    args = parser.parse_args()
    package = Path(__file__).resolve().parents[1] / "planner"
    if args.compile:
        compileall.compile_dir(package, quiet=1, force=False)
    cached = (package / "__pycache__").is_dir()
    print(f"planner bytecode: {'cached' if cached else 'compiled from source on every run (try --compile)'}")
    kvplan = shutil.which("kvplan")
    commands = {
        "python -c pass (interpreter floor)": [sys.executable, "-c", "pass"],
        "kvplan --help": [kvplan, "--help"] if kvplan else [sys.executable, "-m", "planner.cli", "--help"],
        "mission command": ([kvplan] if kvplan else [sys.executable, "-m", "planner.cli"]) + MISSION,
        "mission command --json": ([kvplan] if kvplan else [sys.executable, "-m", "planner.cli"])
        + MISSION
        + ["--json"],
    }
    print(f"{'command':40s} {'median ms':>10s} {'min ms':>8s} {'max ms':>8s}  (runs={args.runs})")
    for name, command in commands.items():
        samples = time_command(command, args.runs)
        print(
            f"{name:40s} {statistics.median(samples) * 1000:10.1f} {min(samples) * 1000:8.1f} "
            f"{max(samples) * 1000:8.1f}"
        )


if __name__ == "__main__":
    main()
