"""Which bench rows (planner/importers/benchpoints.py) a command reads for a card and an engine: the one
check `kvplan calibrate --from-bench` and `kvplan validate` share.

A row is read when its card column names a catalogued card (or a variant of one) and, with --card, the same
chip as --card (a profile YAML, e.g. one `calibrate` wrote, stands for the chip it was written for); with
--engine, a row whose engine cell is empty runs on it and a row naming another engine is refused. A fit
(`calibrate --from-bench`) is one card's and one engine's: every row must also name the engine of the
first row (or --engine). Refused, not dropped: the first offending row is one DataFileError line (exit 2)
naming the file and line, the column, its value and what was expected, since a fit or a MAPE over rows of
another set-up would be silently wrong.
"""

from __future__ import annotations

from dataclasses import replace

from planner import catalog
from planner.errors import DataFileError, KvplanError
from planner.importers.benchpoints import BenchPoint, ServingPoint
from planner.kinds import parse_engine
from planner.schema import HardwareProfile


def _chip(row: BenchPoint | ServingPoint) -> str:
    """The catalogued chip (profile id) the row's card column names; DataFileError naming the row."""
    try:
        return catalog.resolve_card(row.card).id
    except KvplanError as exc:
        raise DataFileError(f"{row.where}: column card: {exc}") from exc


def _refusal(
    row: BenchPoint | ServingPoint, chip: str, *, hardware: HardwareProfile | None, engine: tuple[str, str]
) -> str | None:
    """Why `row` (on `chip`) is not read with --card `hardware` and `engine` = (the engine expected, why
    that one; "" for any), or None."""
    if hardware is not None and chip != hardware.id:
        return (
            f"column card: another card than --card (got {row.card!r}, expected {hardware.id}; drop the row, "
            "or give that card's rows a command of their own)"
        )
    expected, why = engine
    filled = why.startswith("--engine") and not getattr(row, "engine_given", True)  # an empty cell
    if expected and row.engine != expected and not filled:
        return f"column engine: another engine (got {row.engine!r}, expected {expected}: {why})"
    return None


def rows_for(
    points: list[BenchPoint],
    serving: list[ServingPoint],
    *,
    hardware: HardwareProfile | None,
    engine: str | None,
    one_engine: bool,
) -> tuple[list[BenchPoint], list[ServingPoint]]:
    """The rows a command reads for --card `hardware` and --engine `engine` (module docstring), an empty
    engine cell set to --engine; with `one_engine` (a fit), every row's engine that of the first row (in
    file order); DataFileError on the first row refused."""
    name = None if engine is None else parse_engine(engine)
    rows: list[BenchPoint | ServingPoint] = [*points, *serving]
    ordered = sorted(rows, key=lambda row: _line(row.where))
    expected = ("", "")
    if name is not None:
        expected = (name, "--engine's; --engine fills empty engine cells only")
    elif one_engine and ordered:
        expected = (ordered[0].engine, f"the fit's, from {ordered[0].where}; a fit is one engine's")
    chips: dict[str, str] = {}
    for row in ordered:
        if row.card not in chips:
            chips[row.card] = _chip(row)
        reason = _refusal(row, chips[row.card], hardware=hardware, engine=expected)
        if reason is not None:
            raise DataFileError(f"{row.where}: {reason}")
    if name is None:
        return points, serving
    return [replace(p, engine=name) for p in points], [replace(r, engine=name) for r in serving]


def _line(where: str) -> int:
    """The line number of a row's "file:line"."""
    tail = where.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0
