"""The one CSV reader of a user's file (bench rows, AISBench and genai-perf exports, request traces), over
the text planner/readers.py reads (bounded, a leading byte-order mark dropped).

A table with a header (csv_dict_reader, csv_reader(header=True)) is refused when the header names a column
twice (which cell counts would be a guess; JSON and YAML keys are refused the same way) or when a row has
more non-empty fields than the header has columns (a shifted row: every cell would land in the wrong
column). Empty fields past the header (a spreadsheet's trailing commas) are dropped. A field over the csv
module's size limit, or a NUL byte, is one line. Every failure is one DataFileError line naming the file
and the line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from planner.errors import DataFileError

# csv is imported where it is used: the mission command reads no CSV (benchmarks/bench_startup.py).
if TYPE_CHECKING:
    import csv


class _GuardedRows:
    """A csv.reader whose csv.Error is one DataFileError line naming the file and line, and which refuses a
    row longer than `width` fields (once set, the header's) with a non-empty field past it; keeps
    `line_num`, so csv.DictReader can use it."""

    def __init__(self, rows: Any, *, where: str) -> None:
        self._rows = rows
        self._where = where
        self.width: int | None = None

    @property
    def line_num(self) -> int:
        return int(self._rows.line_num)

    def __iter__(self) -> _GuardedRows:
        return self

    def __next__(self) -> list[str]:
        import csv

        try:
            row = list(next(self._rows))
        except csv.Error as exc:
            raise DataFileError(
                f"{self._where}:{self._rows.line_num}: not readable as CSV ({exc}; expected fields of at "
                f"most {csv.field_size_limit()} characters, no NUL bytes)"
            ) from exc
        width = self.width
        if width is None or len(row) <= width:
            return row
        if any(cell.strip() for cell in row[width:]):
            raise DataFileError(
                f"{self._where}:{self.line_num}: row too long (got {len(row)} fields, expected {width}, "
                "the header's columns)"
            )
        return row[:width]


def check_header(header: list[str], *, where: str) -> None:
    """DataFileError when `header` (a CSV's first row, `where` = file:line) names a column twice, spaces
    around a name not counted; empty names (trailing commas) are not columns."""
    seen: set[str] = set()
    for name in (cell.strip() for cell in header):
        if name in seen:
            raise DataFileError(
                f"{where}: header: column {name[:80]} given twice (expected each column once: which cell "
                "counts would be a guess)"
            )
        if name:
            seen.add(name)


def csv_reader(lines: Iterable[str], *, where: str, header: bool = False) -> Iterator[list[str]]:
    """csv.reader over `lines` whose errors are one DataFileError line naming `where`; with `header`, the
    first row is checked (check_header) and bounds the width of every later row."""
    import csv

    rows = _GuardedRows(csv.reader(lines), where=where)
    if not header:
        return rows
    first = next(rows, None)
    if first is None:
        return iter(())
    check_header(first, where=f"{where}:{rows.line_num}")
    rows.width = len(first)
    return _with_first(first, rows)


def _with_first(first: list[str], rows: Iterator[list[str]]) -> Iterator[list[str]]:
    yield first
    yield from rows


def csv_dict_reader(lines: Iterable[str], *, where: str) -> csv.DictReader[str]:
    """csv.DictReader over `lines` whose errors (header included) are one DataFileError line; the header
    checked (check_header) and every row bounded by its width."""
    import csv

    reader = csv.DictReader(lines)
    guarded = _GuardedRows(reader.reader, where=where)
    reader.reader = guarded  # type: ignore[assignment]
    names = reader.fieldnames
    if names is not None:
        check_header(list(names), where=f"{where}:{guarded.line_num}")
        guarded.width = len(names)
    return reader
