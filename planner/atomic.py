"""Atomic, no-clobber file writes shared by every command that writes a user's file (mindie, calibrate).

A write goes to a temporary file in the target's directory, is flushed and fsync'ed, and only then takes
the target's name, so a reader never sees half a file and a crash leaves the old file intact:
- without force, the temporary file is hard-linked to the target name, which fails if the name exists
  (no check-then-write race); the refusal is an OutputExistsError;
- with force, the file being replaced is first hard-linked to a backup name (`<name>.bak`, then
  `<name>.bak.1`, `.bak.2`, ...: an older backup is never overwritten), then os.replace() swaps the new
  file in.
New files get mode 0o640 (MindIE refuses config files that group or others may write); a replaced file
keeps its mode.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path

from planner.errors import OutputExistsError, PlanInputError

NEW_FILE_MODE = 0o640  # [assumed: MindIE checks config.json permissions; 640 is what its docs use]
MAX_BACKUPS = 1000


def backup_path(path: Path) -> Path:
    """First free backup name for `path`: `<name>.bak`, else `<name>.bak.1`, `<name>.bak.2`, ..."""
    candidate = path.with_name(path.name + ".bak")
    for index in range(1, MAX_BACKUPS + 1):
        if not candidate.exists() and not candidate.is_symlink():
            return candidate
        candidate = path.with_name(f"{path.name}.bak.{index}")
    raise PlanInputError(f"{path}: too many backups (got {MAX_BACKUPS}, expected fewer); remove old .bak.N")


def _write_temp(directory: Path, name: str, data: bytes, *, mode: int) -> Path:
    """Write `data` to a fresh temporary file in `directory`, fsync it, and return its path."""
    fd, temp_name = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX); a no-op where directories cannot be opened."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _exists_error(path: Path) -> OutputExistsError:
    return OutputExistsError(
        f"{path}: already exists (got an existing file, expected a new path); pass --force to replace it "
        f"(the old file is then kept as {backup_path(path).name})"
    )


def check_new(targets: dict[str, Path | None], *, force: bool) -> None:
    """Before slow work: the output files (flag -> path) are distinct and, force off, none exists yet
    (write_atomic checks again; this only spares a long run and a half-written set of outputs)."""
    given = {flag: path for flag, path in targets.items() if path is not None}
    seen: dict[Path, str] = {}
    for flag, path in given.items():
        if (first := seen.setdefault(path.resolve(), flag)) != flag:
            raise PlanInputError(f"{flag}: same file as {first} (got {path}, expected another path)")
        if not force and os.path.lexists(path):
            raise _exists_error(path)


def _link_new(temp: Path, path: Path) -> None:
    """Give `temp` the name `path` only if that name is free (hard link: atomic no-clobber)."""
    try:
        os.link(temp, path)
    except FileExistsError:
        raise _exists_error(path) from None
    except OSError:  # file systems without hard links: O_EXCL create, then replace
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, NEW_FILE_MODE)
        os.close(fd)
        os.replace(temp, path)


def _keep_backup(path: Path) -> Path | None:
    """Keep the file about to be replaced under a free backup name; returns it (None if the file vanished)."""
    backup = backup_path(path)
    try:
        os.link(path, backup)
    except FileNotFoundError:
        return None
    except OSError:
        shutil.copy2(path, backup)
    return backup


def write_atomic(path: Path, data: str | bytes, *, force: bool = False) -> Path | None:
    """Write `data` to `path` atomically; refuse an existing path unless `force`.

    Returns the backup path when an existing file was replaced (force), else None.
    Raises OutputExistsError (path exists, no force) or PlanInputError (directory missing, not writable,
    a name the file system refuses: too long, a NUL byte); other OSErrors propagate.
    """
    try:
        return _write_atomic(path, data, force=force)
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        raise PlanInputError(f"{str(path)[:120]}...: cannot write ({exc.strerror})") from exc
    except ValueError as exc:  # a NUL byte in the name
        raise PlanInputError(f"{str(path)[:120]!r}: cannot write ({exc})") from exc


def _write_atomic(path: Path, data: str | bytes, *, force: bool) -> Path | None:
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise PlanInputError(f"{path}: is a directory (got a directory, expected a file path)")
    if not directory.is_dir():
        raise PlanInputError(
            f"{path}: directory {directory} does not exist (got a missing directory, "
            f"expected an existing one)"
        )
    exists = path.exists()
    if exists and not force:
        raise _exists_error(path)
    mode = (path.stat().st_mode & 0o777) if exists else NEW_FILE_MODE
    try:
        temp = _write_temp(directory, path.name, payload, mode=mode)
    except OSError as exc:
        raise PlanInputError(f"{path}: cannot write ({exc.strerror})") from exc
    try:
        backup = None
        if exists:
            backup = _keep_backup(path)
            os.replace(temp, path)
        else:
            _link_new(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    _fsync_directory(directory)
    return backup
