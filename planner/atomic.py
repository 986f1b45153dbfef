"""Atomic, no-clobber file writes shared by every command that writes a user's file (mindie, calibrate).

A write goes to a temporary file in the target's directory, is flushed and fsync'ed, and only then takes
the target's name, so a reader never sees half a file and a crash leaves the old file intact:
- without force, the temporary file is hard-linked to the target name, which fails if the name exists
  (no check-then-write race); the refusal is an OutputExistsError;
- with force, the file being replaced is first hard-linked to a backup name (`<name>.bak`, then
  `<name>.bak.1`, `.bak.2`, ...: an older backup is never overwritten), then os.replace() swaps the new
  file in.
Only a regular file is ever replaced (check_replaceable): a device, FIFO, socket or directory at the
target is refused, --force or not, and no writer creates a missing directory (check_directory).
New files get mode 0o640 (MindIE refuses config files that group or others may write); a replaced file
keeps its mode.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path

from planner.errors import OutputExistsError, PlanInputError

NEW_FILE_MODE = 0o640  # [assumed: MindIE checks config.json permissions; 640 is what its docs use]
MAX_BACKUPS = 1000


def new_file_mode() -> int:
    """NEW_FILE_MODE less the process umask (a user's umask 077 gives 0600, never more than 0640)."""
    current = os.umask(0)
    os.umask(current)
    return NEW_FILE_MODE & ~current


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


def file_kind(mode: int) -> str:
    """'regular file', 'directory', 'FIFO' or 'device or socket' for an st_mode."""
    if stat.S_ISREG(mode):
        return "regular file"
    if stat.S_ISDIR(mode):
        return "directory"
    return "FIFO" if stat.S_ISFIFO(mode) else "device or socket"


STDOUT_DASH = "-"  # what many tools read as stdout; refused as an output path


def check_replaceable(path: Path) -> bool:
    """Whether `path` names an existing file; PlanInputError when it names anything but a regular file.

    The one writer rule: kvplan replaces only a regular file, or creates a new one, whatever the flags. A
    device (/dev/null), a FIFO, a socket, a directory or a symlink (to anything: replacing it would turn
    the user's link into a file) is never replaced, even with --force.
    """
    if str(path) == STDOUT_DASH:  # the shell's stdout convention: writing would create a file named '-'
        raise PlanInputError(
            "'-' is not a file name kvplan writes (got '-', expected a path; a command that prints to stdout "
            "does so when its output flag is left out)"
        )
    if os.path.islink(path):
        if not os.path.exists(path):
            raise PlanInputError(
                f"{path}: a symlink to a missing file (got a dangling link, expected a regular file or a "
                f"new path); remove the link or choose another path"
            )
        kind = file_kind(os.stat(path).st_mode)
        raise PlanInputError(
            f"{path}: not a regular file (got a symlink to a {kind}, {os.readlink(path)[:200]}, expected a "
            "regular file or a new path); kvplan never replaces it, --force or not: name the target instead"
        )
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise PlanInputError(f"{str(path)[:200]}: cannot write ({exc.strerror})") from exc
    if not stat.S_ISREG(info.st_mode):
        raise PlanInputError(
            f"{path}: not a regular file (got a {file_kind(info.st_mode)}, expected a regular file or a new "
            f"path); kvplan never replaces it, --force or not"
        )
    return True


def check_directory(path: Path) -> None:
    """PlanInputError when the folder `path` would go in does not exist (no writer creates folders)."""
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise PlanInputError(
            f"{path}: directory {directory} does not exist (got a missing directory, "
            f"expected an existing one)"
        )


def _exists_error(path: Path) -> OutputExistsError:
    return OutputExistsError(
        f"{path}: already exists (got an existing file, expected a new path); pass --force to replace it "
        f"(the old file is then kept as {backup_path(path).name})"
    )


def check_new(
    targets: dict[str, Path | None], *, force: bool, inputs: dict[str, Path | None] | None = None
) -> None:
    """Before slow work: the output files (flag -> path) are distinct, none is one of the `inputs` the run
    reads (flag -> path), each is a regular file or a new name in an existing directory and, force off,
    none exists yet (write_atomic checks again; this only spares a long run and a half-written set of
    outputs)."""
    given = {flag: path for flag, path in targets.items() if path is not None}
    seen: dict[Path, str] = {}
    for flag, path in (inputs or {}).items():
        if path is not None:
            with contextlib.suppress(OSError, ValueError):
                seen.setdefault(path.resolve(), flag)
    for flag, path in given.items():
        if path == Path("."):  # '' reaches here as '.' (pathlib): a folder, never a file kvplan writes
            raise PlanInputError(
                f"{flag}: no file name (got an empty path or '.', expected a file such as out.yaml)"
            )
        if (first := seen.setdefault(path.resolve(), flag)) != flag:
            raise PlanInputError(f"{flag}: same file as {first} (got {path}, expected another path)")
        try:
            if check_replaceable(path) and not force:
                raise OutputExistsError(f"{flag}: {_exists_error(path)}")  # the flag that named it
            check_directory(path)
        except PlanInputError as exc:  # every refusal names the flag that gave the path
            message = str(exc)
            raise type(exc)(message if message.startswith(f"{flag}: ") else f"{flag}: {message}") from None


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
    exists = check_replaceable(path)
    check_directory(path)
    if exists and not force:
        raise _exists_error(path)
    mode = (path.stat().st_mode & 0o777) if exists else new_file_mode()
    try:
        temp = _write_temp(directory, path.name, payload, mode=mode)
    except OSError as exc:
        raise PlanInputError(f"{path}: cannot write ({exc.strerror})") from exc
    try:
        backup = None
        if exists:
            check_replaceable(path)  # again, just before the swap
            backup = _keep_backup(path)
            os.replace(temp, path)
        else:
            _link_new(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    _fsync_directory(directory)
    return backup
