"""Cold-start time of the mission command against a bare import of its own dependencies (typer, rich,
pydantic, numpy, yaml): issue 24's goal is a ratio <= 1.8x. Prints numbers; asserts nothing. Runs this
checkout's planner (`python -m planner.cli` from the repository root), not an installed `kvplan`.

Run: python3 benchmarks/bench_startup.py [--runs N] [--compile]

Python caches compiled modules in __pycache__/ (pip does it at install); with PYTHONDONTWRITEBYTECODE set
and no cache, every run compiles planner/ from source again (~50 ms). The first line says which case ran;
--compile writes the cache first, as an install would.
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import time
from pathlib import Path

MISSION = ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8"]
ROOT = Path(__file__).resolve().parents[1]
BARE_IMPORT = "import typer, rich, pydantic, numpy, yaml"
RATIO_GOAL = 1.8


def time_command(command: list[str], runs: int) -> list[float]:
    """Wall-clock seconds of each run of a command (output discarded)."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=ROOT)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--compile", action="store_true", help="write planner/'s bytecode cache first")
    args = parser.parse_args()
    package = ROOT / "planner"
    if args.compile:
        compileall.compile_dir(package, quiet=1, force=False)
    cached = (package / "__pycache__").is_dir()
    print(f"planner bytecode: {'cached' if cached else 'compiled from source on every run (try --compile)'}")
    kvplan = [sys.executable, "-m", "planner.cli"]
    commands = {
        "python -c pass (interpreter floor)": [sys.executable, "-c", "pass"],
        "bare import of the dependencies": [sys.executable, "-c", BARE_IMPORT],
        "kvplan --help": [*kvplan, "--help"],
        "mission command": [*kvplan, *MISSION],
        "mission command --json": [*kvplan, *MISSION, "--json"],
    }
    print(f"{'command':40s} {'median ms':>10s} {'min ms':>8s} {'max ms':>8s}  (runs={args.runs})")
    medians = {}
    for name, command in commands.items():
        samples = time_command(command, args.runs)
        medians[name] = statistics.median(samples)
        print(
            f"{name:40s} {medians[name] * 1000:10.1f} {min(samples) * 1000:8.1f} {max(samples) * 1000:8.1f}"
        )
    ratio = medians["mission command"] / medians["bare import of the dependencies"]
    print(f"mission command / bare import: {ratio:.2f}x (goal <= {RATIO_GOAL}x)")


if __name__ == "__main__":
    main()
