"""Issue 24's repeated-code count: pairs of places in the product that share 5 or more lines of the same
shape, as the `duplicates` command lists them. Prints numbers; asserts nothing (goal: <= 15).

The count, exactly: `duplicates --min-lines 5 --most 200 --seconds 120` run at the repository root, then
the rows (`D<n> a ~ b`) where neither side is under tests/ or lab/ (not product); data files (YAML, JSON,
CSV, Markdown) are never read by the command. Also printed: the rows under planner/ alone
(`duplicates --repo planner --min-lines 5 --most 200 --seconds 60`), and how many rows of each count the
command marks `boilerplate` or `shape` (alike but for names and values).

Run: python3 benchmarks/count_duplicates.py [--list]   (needs the `duplicates` command on PATH)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_PRODUCT = ("tests/", "lab/")
GOAL_PAIRS = 15
ROW = re.compile(r"^D\d+ (\S+):\d+-\d+ ~ (\S+):\d+-\d+(.*)$")


def rows(*args: str) -> list[str]:
    """The pair rows of one `duplicates` run from the repository root (`incomplete:` lines fail loudly)."""
    command = ["duplicates", "--min-lines", "5", "--most", "200", *args]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    incomplete = [line for line in out.splitlines() if line.startswith("incomplete:")]
    if incomplete:
        raise SystemExit(f"{' '.join(command)}: {incomplete[0]}")
    if any(line.startswith("(+") and "more pairs" in line for line in out.splitlines()):
        raise SystemExit(f"{' '.join(command)}: more than 200 pairs; the count would be cut")
    return [line for line in out.splitlines() if ROW.match(line)]


def is_product(row: str) -> bool:
    """True when neither side of the row is under tests/ or lab/."""
    match = ROW.match(row)
    return match is not None and not any(side.startswith(NOT_PRODUCT) for side in match.groups()[:2])


def summary(name: str, found: list[str]) -> str:
    """'name: N pairs (S by shape alone, B of those boilerplate)'."""
    shape = sum(" shape" in row for row in found)
    boilerplate = sum("boilerplate" in row for row in found)
    return f"{name}: {len(found)} pairs ({shape} by shape alone, {boilerplate} of those boilerplate)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every counted row")
    args = parser.parse_args()
    if shutil.which("duplicates") is None:
        print("the `duplicates` command is not on PATH; nothing counted", file=sys.stderr)
        return 1
    product = [row for row in rows("--seconds", "120") if is_product(row)]
    planner_only = rows("--repo", "planner", "--seconds", "60")
    print(summary("product (root, tests/ and lab/ excluded)", product) + f"; goal <= {GOAL_PAIRS}")
    print(summary("planner/ alone", planner_only))
    if args.list:
        print("\n".join(product))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
