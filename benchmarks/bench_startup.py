"""Cold-start time of the mission command against a bare import of its own dependencies (typer, rich,
pydantic, numpy, yaml): issue 24's goal is a ratio <= 1.8x. Prints numbers; asserts nothing. Runs this
checkout's planner (`python -m planner.cli` from the repository root), not an installed `kvplan`.

Run: python3 benchmarks/bench_startup.py [--runs N] [--compile] [--callgrind]
(--callgrind: also the instruction counts of the bare import and the mission command, one valgrind run each,
PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1; load-independent; needs valgrind on PATH)

Python caches compiled modules in __pycache__/ (pip does it at install); with PYTHONDONTWRITEBYTECODE set
and no cache, every run compiles planner/ from source again (~50 ms). The first line says which case ran;
--compile writes the cache first, as an install would.

The commands run interleaved (one run of each per round), so load from other processes on a shared machine
falls on all of them alike; besides wall-clock time each row gives the CPU time (user + system) of the
child process, which such load disturbs less. The ratio is printed for both.

Measured 6 Dec 2026, 02:08 UTC, after the per-user fallback of the catalogue cache (branch dups), load
0.9-1.8, 15 runs, medians. Warm (`--compile --runs 15 --baseline /work/main`): bare 205 ms wall / 210 ms CPU,
mission 293 / 298 (1.43x, 1.42x), main's 295 / 302 (1.44x). Read-only install (planner/ bind-mounted
read-only in a mount namespace, XDG_CACHE_HOME a fresh folder, one run first; `--runs 15 --baseline` a
read-only copy of main): bare 203 / 203, this branch 292 / 288 (1.44x, 1.42x: entries read from the user's
folder), main 310 / 309 (1.53x, 1.52x: validates the YAML on every run). Instructions (as below): bare
0.714e9; warm 1.197e9 (1.68x) on both; read-only install 1.302e9 (1.82x) on main on every run, on this
branch 1.303e9 on the first run (it writes the user's entries) and 1.198e9 (1.68x) after.
Measured 5 Dec 2026, 22:00 UTC, after the catalogue cache (planner/catalog_cache.py), deferred data-model
validators, per-command flag tables and lazy json/csv (branch mission on main f33d33a), `--compile --runs 30
--baseline /work/main`, load 4.8-5.8: bare 253 ms wall / 233 ms CPU, mission 326 / 313 (1.29x, 1.34x), main's
379 / 344 (1.50x, 1.48x). Instructions (same settings as below): bare 0.718e9, mission 1.203e9 (1.675x) warm,
1.302e9 (1.81x) with no catalogue cache entry, main 1.343e9 (1.870x).
Earlier, 5 Dec 2026 on the 2-core machine, `--compile --runs 30 --baseline /work/main` (main at
cec9c76, this branch merged on top of it), load average 2.2-2.3 (other jobs running), medians:
    bare import 157 ms wall / 213 ms CPU; mission command 287 / 360 (1.83x wall, 1.69x CPU); main's mission
        command in the same rounds 316 / 389 (2.02x, 1.82x). At load 0.6-0.9 (15 runs, main at 3c5c690):
        1.77x wall, 1.69x CPU against main's 2.01x, 1.87x; a rerun at load 1.7-2.3 (30 runs, main at c8a83da):
        1.78x wall, 1.67x CPU against 1.98x, 1.80x. The bare import's CPU time exceeds its wall time:
        OpenBLAS's threads spin while numpy loads.
Instructions (valgrind --tool=callgrind, load-independent; CPU time is not proportional to them), run with
PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 (the spinning BLAS threads otherwise move the count ~3 % run to run):
    bare import 0.714e9; mission command 1.295e9 (1.815x); main's 1.463e9 (2.05x).
What the mission command adds to the bare import (~0.58e9): pydantic's BaseModel machinery (pydantic.main,
fields, types; ~0.19e9, paid by any pydantic model), rich's console and table (~0.09e9), building the
validators of the models in planner/schema_card.py and schema_hardware.py (~0.13e9: ModelCard,
HardwareProfile and what they hold), the other planner modules, typer's parameter adapters, loading the card
and profile, the plan, and rendering.
Earlier: 4 Dec 2026, load 10-15, 1.68-1.96x wall, 1.79-1.89x CPU, 2.03x instructions (main then 2.23-2.48x,
2.35-2.38x, 2.52x); an idle machine gave 538 ms / 1309 ms (2.43x wall) for the issue's starting point.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

MISSION = ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8"]
ROOT = Path(__file__).resolve().parents[1]
BARE_IMPORT = "import typer, rich, pydantic, numpy, yaml"
RATIO_GOAL = 1.8


def run_once(command: list[str], *, cwd: Path = ROOT) -> tuple[float, float]:
    """(wall-clock seconds, CPU seconds: user + system) of one run of a command (output discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=cwd)
    wall_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall_s, cpu_s


def warm_catalogue_cache(checkouts: list[Path]) -> None:
    """Run the mission command once in each checkout with bytecode writing on, so that it writes its
    catalogue cache entries (planner/catalog_cache.py) as a first run after an install does."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    for checkout in checkouts:
        command = [sys.executable, "-m", "planner.cli", *MISSION]
        subprocess.run(command, stdout=subprocess.DEVNULL, check=True, cwd=checkout, env=env)


def instructions(command: list[str]) -> int:
    """Instructions one run of `command` executes (valgrind --tool=callgrind's total), from the checkout."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    grind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command]
    done = subprocess.run(grind, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no instruction count: {done.stderr[-300:]}")
    return int(found.group(1))


def print_instructions(kvplan: list[str]) -> None:
    """The bare import's and the mission command's instructions, and their ratio."""
    if shutil.which("valgrind") is None:
        print("instructions: valgrind is not on PATH; not counted")
        return
    bare = instructions([sys.executable, "-c", BARE_IMPORT])
    mission = instructions([*kvplan, *MISSION])
    ratio = mission / bare
    print(
        f"instructions: bare import {bare / 1e9:.3f}e9, mission command {mission / 1e9:.3f}e9 ({ratio:.3f}x)"
    )


def user_cache_dir() -> Path | None:
    """The per-user folder this checkout's catalogue cache falls back to (planner/catalog_cache.py)."""
    code = "from planner import catalog_cache; print(catalog_cache.user_cache_dir() or '')"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return Path(found.stdout.strip()) if found.stdout.strip() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--compile", action="store_true", help="write planner/'s bytecode cache first")
    parser.add_argument("--callgrind", action="store_true", help="also count instructions with valgrind")
    parser.add_argument(
        "--baseline", type=Path, help="another checkout whose mission command runs in the same rounds"
    )
    args = parser.parse_args()
    package = ROOT / "planner"
    if args.compile:
        compileall.compile_dir(package, quiet=1, force=False)
        if args.baseline is not None:
            compileall.compile_dir(args.baseline / "planner", quiet=1, force=False)
        warm_catalogue_cache([ROOT, *([] if args.baseline is None else [args.baseline.resolve()])])
    cached = (package / "__pycache__").is_dir()
    print(f"planner bytecode: {'cached' if cached else 'compiled from source on every run (try --compile)'}")
    entries = len(list((package / "__pycache__").glob("catalog-*.pickle")))
    user = user_cache_dir()
    in_user = len(list(user.glob("catalog-*.pickle"))) if user is not None else 0
    print(
        f"catalogue cache entries: {entries} in the package, {in_user} in {user} (a read-only install's; "
        "none in either: every run validates the YAML again; try --compile)"
    )
    kvplan = [sys.executable, "-m", "planner.cli"]
    commands = {
        "python -c pass (interpreter floor)": [sys.executable, "-c", "pass"],
        "bare import of the dependencies": [sys.executable, "-c", BARE_IMPORT],
        "kvplan --help": [*kvplan, "--help"],
        "mission command": [*kvplan, *MISSION],
        "mission command --json": [*kvplan, *MISSION, "--json"],
    }
    where = {name: ROOT for name in commands}
    if args.baseline is not None:
        name = f"mission command in {args.baseline}"
        commands[name], where[name] = [*kvplan, *MISSION], args.baseline.resolve()
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, command in commands.items():
            wall_s, cpu_s = run_once(command, cwd=where[name])
            walls[name].append(wall_s)
            cpus[name].append(cpu_s)
    width = max(len(name) for name in commands)
    header = f"{'median ms':>10s} {'min ms':>8s} {'max ms':>8s} {'cpu ms':>8s}"
    print(f"{'command':{width}s} {header}  (runs={args.runs})")
    for name in commands:
        print(
            f"{name:{width}s} {statistics.median(walls[name]) * 1000:10.1f} {min(walls[name]) * 1000:8.1f} "
            f"{max(walls[name]) * 1000:8.1f} {statistics.median(cpus[name]) * 1000:8.1f}"
        )
    if args.callgrind:
        print_instructions(kvplan)
    bare, mission = "bare import of the dependencies", "mission command"
    ratio = statistics.median(walls[mission]) / statistics.median(walls[bare])
    cpu_ratio = statistics.median(cpus[mission]) / statistics.median(cpus[bare])
    print(f"mission command / bare import: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU (goal <= {RATIO_GOAL}x)")
    if args.baseline is not None:
        base = f"mission command in {args.baseline}"
        ratio = statistics.median(walls[base]) / statistics.median(walls[bare])
        cpu_ratio = statistics.median(cpus[base]) / statistics.median(cpus[bare])
        print(f"{base} / bare import: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU (the same rounds)")


if __name__ == "__main__":
    main()
