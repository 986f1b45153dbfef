"""The one reader of a user's file: stat first (a regular file, at most a size cap), then a capped read.

A FIFO, a device such as /dev/zero or a directory is refused before it is opened, and a file that grows
while read is cut at the cap, so no file makes kvplan hang or exhaust memory. Every failure is one
DataFileError line naming the file (and the flag when given).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from planner import units
from planner.errors import DataFileError

DEFAULT_LIMIT_BYTES = (
    16 * units.MIB_BYTES
)  # larger than any card, profile, config.json, log or bench kvplan reads


def _label(path: Path | str, flag: str | None) -> str:
    return f"{flag} {path}" if flag else str(path)


def read_bytes_capped(
    path: Path | str, *, flag: str | None = None, limit_bytes: int = DEFAULT_LIMIT_BYTES
) -> bytes:
    """The bytes of a regular file of at most `limit_bytes`; DataFileError naming the file otherwise."""
    where = _label(path, flag)
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise DataFileError(f"{where}: not a regular file (got a device, FIFO or directory)")
        if info.st_size > limit_bytes:
            raise DataFileError(
                f"{where}: file too large (got {info.st_size} bytes, expected at most "
                f"{limit_bytes // units.MIB_BYTES} MiB)"
            )
        with open(path, "rb") as handle:
            data = handle.read(limit_bytes + 1)
    except OSError as exc:
        raise DataFileError(f"{where}: cannot read file ({exc.strerror or exc})") from exc
    if len(data) > limit_bytes:
        raise DataFileError(
            f"{where}: file too large (expected at most {limit_bytes // units.MIB_BYTES} MiB)"
        )
    return data


def read_text_capped(
    path: Path | str, *, flag: str | None = None, limit_bytes: int = DEFAULT_LIMIT_BYTES
) -> str:
    """The UTF-8 text of a regular file of at most `limit_bytes`; DataFileError naming the file otherwise."""
    data = read_bytes_capped(path, flag=flag, limit_bytes=limit_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{_label(path, flag)}: not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
