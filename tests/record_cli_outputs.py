"""Record (or check) the outputs of a fixed set of `kvplan` invocations: tests/golden/cli/.

Each line of tests/golden/cli/commands.txt runs as `kvplan ARGS` in a fresh temporary directory; stdout,
stderr, the exit code and every file the command wrote there are kept in tests/golden/cli/cases/NN.txt.
tests/test_cli_golden.py fails when any of them changes; refresh deliberately with `--write`.

    python3 tests/record_cli_outputs.py           # compare, print the cases that differ
    python3 tests/record_cli_outputs.py --write   # record anew
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "cli"
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")  # calibrate stamps its profiles
# The fit's iteration count depends on the CPU's floating-point path (25 on one machine, 31 on another, the
# fitted values equal to the 5 digits written): recorded as <n>.
ITERATIONS = re.compile(r"\b\d+ iterations\b")
# JSON prints floats with all 17 digits; the last one or two depend on numpy's build and the CPU's SIMD path
# (summation order), not on kvplan (numpy 2.4.6 on an AMD EPYC moved case 04's 1711.4280586877003 to ...005).
# Compared at 12 significant digits: far finer than any figure kvplan prints or any change a test should see.
LONG_FLOAT = re.compile(r"-?\d+\.\d{9,}(?:e[-+]?\d+)?")
COMPARED_DIGITS = 12
RUNNER = "import sys; from planner.cli import app; sys.argv[0] = 'kvplan'; app()"


def commands() -> list[str]:
    """The recorded invocations, in file order."""
    lines = (GOLDEN / "commands.txt").read_text().splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def comparable(text: str) -> str:
    """The transcript with every long float rounded to COMPARED_DIGITS significant digits."""
    return LONG_FLOAT.sub(lambda match: f"{float(match.group()):.{COMPARED_DIGITS}g}", text)


def same_transcript(new: str, recorded: str) -> bool:
    """Whether two transcripts agree (long floats to COMPARED_DIGITS digits, everything else exactly)."""
    return new == recorded or comparable(new) == comparable(recorded)


Runner = Callable[[list[str], Path, dict[str, str]], tuple[int, str, str]]


def run_fresh(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """kvplan ARGS in a new interpreter: (exit code, stdout, stderr)."""
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, *args], capture_output=True, text=True, cwd=cwd, env=env, check=False
    )
    return done.returncode, done.stdout, done.stderr


def run_case(line: str, run: Runner = run_fresh) -> str:
    """One invocation's transcript: command, exit code, stdout, stderr, files written. `run` runs kvplan
    (tests/test_cli_golden.py passes a child forked from the warm test process)."""
    args = shlex.split(line.replace("{examples}", str(ROOT / "docs" / "examples")))
    env = {**os.environ, "COLUMNS": "140", "NO_COLOR": "1", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        returncode, stdout, stderr = run(args, Path(tmp), env)
        written = [
            f"--- file {path.name}\n{path.read_text()}"
            for path in sorted(Path(tmp).iterdir())
            if path.is_file()
        ]
    text = f"$ kvplan {line}\n--- exit {returncode}\n--- stdout\n{stdout}--- stderr\n{stderr}"
    text = TIMESTAMP.sub("<timestamp>", (text + "".join(written)).replace(str(ROOT), "<repo>"))
    return ITERATIONS.sub("<n> iterations", text)


def case_path(number: int) -> Path:
    """Where case `number` (0-based) is recorded."""
    return GOLDEN / "cases" / f"{number:02d}.txt"


def transcripts(run: Runner = run_fresh) -> list[str]:
    """Every case's transcript, run four at a time."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda line: run_case(line, run), commands()))


def main() -> int:
    """Compare with (or with --write, replace) the recorded cases; exit 1 when any differ."""
    outputs = transcripts()
    if "--write" in sys.argv[1:]:
        (GOLDEN / "cases").mkdir(parents=True, exist_ok=True)
        for old in (GOLDEN / "cases").glob("*.txt"):
            old.unlink()
        for number, text in enumerate(outputs):
            case_path(number).write_text(text)
        print(f"recorded {len(outputs)} cases in {GOLDEN / 'cases'}")
        return 0
    differ = [
        n
        for n, text in enumerate(outputs)
        if not case_path(n).exists() or not same_transcript(text, case_path(n).read_text())
    ]
    for number in differ:
        print(f"differs: {case_path(number).name}: kvplan {commands()[number]}")
    print(f"{len(outputs) - len(differ)} of {len(outputs)} cases identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
