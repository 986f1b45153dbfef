"""The one CSV reader of a user's file (bench rows, AISBench and genai-perf exports, request traces), over
the text planner/readers.py reads (bounded, a leading byte-order mark dropped).

A table with a header (csv_dict_reader, csv_reader(header=True)) is refused when the header names a column
twice (which cell counts would be a guess; JSON and YAML keys are refused the same way) or when a row has
more non-empty fields than the header has columns (a shifted row: every cell would land in the wrong
column) or fewer than half the fields the header names (a cut-off line); a row short of some trailing
columns reads them as empty (optional trailing cells left off).
Empty fields past the header (a spreadsheet's trailing commas) are dropped. A field over the csv module's
size limit, or a NUL byte, is one line. Every failure is one DataFileError line naming the file
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
        self.named: int | None = None  # the header's columns up to its last non-empty name

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
        if any("\0" in cell for cell in row):  # Python >= 3.11's csv reads NULs as text
            raise DataFileError(
                f"{self._where}: NUL byte at line {self.line_num} (expected CSV text; a file padded with NUL "
                "bytes, or not text?)"
            )
        width = self.width
        if width is None or len(row) == width:
            return row
        if len(row) < width:
            return self._short(row, width=width)
        if any(cell.strip() for cell in row[width:]):
            raise DataFileError(
                f"{self._where}:{self.line_num}: row too long (got {len(row)} fields, expected {width}, "
                "the header's columns)"
            )
        return row[:width]

    def _short(self, row: list[str], *, width: int) -> list[str]:
        """A row with fewer than half the header's named columns is refused (a cut-off line: its missing
        cells would read as empty); a shorter row that keeps at least half reads its missing trailing cells
        as empty (optional trailing columns, such as notes, left off without commas); a blank row passes."""
        named = self.named if self.named is not None else width
        if 2 * len(row) < named and any(cell.strip() for cell in row):
            raise DataFileError(
                f"{self._where}:{self.line_num}: row has {len(row)} of {named} fields (expected {named}, one "
                "per header column; a cut-off line?)"
            )
        return row


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


def named_columns(header: list[str]) -> int:
    """Columns up to the header's last non-empty name (trailing commas name no column)."""
    return max((i + 1 for i, cell in enumerate(header) if cell.strip()), default=0)


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
    rows.width, rows.named = len(first), named_columns(first)
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
        guarded.width, guarded.named = len(names), named_columns(list(names))
    return reader
