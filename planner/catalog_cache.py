"""A cache of catalogue look-ups by id (`kvplan --model qwen3-27b`, `--card ascend-950pr`): the validated
model card or hardware profile an id resolves to, pickled, so that a later run reads one small file instead
of parsing the YAML files (every card's aliases, the profile, its fitted profile) and building and running
the validators of ModelCard and HardwareProfile (~0.09e9 of the mission command's 1.30e9 instructions;
benchmarks/bench_startup.py).

The shipped YAML stays the source of truth. An entry is used only while its fingerprint is unchanged, and
the fingerprint holds:
- the (inode, size, mtime_ns, ctime_ns) of every file the look-up may read, found by listing its folders
  (every model card for a model id, since any card's `aliases` can claim it; every profile and fitted
  profile for a card id), so editing, adding, removing or replacing a file misses the cache; ctime changes
  on any write, even one that keeps size and mtime;
- the same for every module in planner/'s top level, where all the validating code lives (schema*,
  catalog, readers, units, kinds, dtypes, errors, records; tests/test_catalog_cache.py checks that the
  catalogue imports no deeper planner module);
- the Python and pydantic versions and FORMAT.
A look-up that fails is never stored, so a bad data file gives its one error line on every run, and a name
that is a path (a user's YAML) never reaches this module.

Entries live in the package's bytecode folder (__pycache__) beside Python's bytecode and are written as it
writes it: atomically (a temporary file, then os.replace) and never when Python writes no bytecode
(PYTHONDONTWRITEBYTECODE, -B). Where that folder cannot be written (a read-only or root-owned install),
they go to a per-user folder instead: $XDG_CACHE_HOME/kvplan, else ~/.cache/kvplan, in a subfolder named
for the kvplan version and the install's path (two installs never overwrite each other's entries; the
fingerprint still decides), used only when the current user owns it. Reads try the package folder first,
then the user's. A failure to write is silent: planning never fails because an entry could not be stored.
A cold run (first after an install or an edit) validates as before and writes the entry.
"""

import os
import pickle
import re
import sys
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic.version import VERSION as PYDANTIC_VERSION

from planner import __version__

T = TypeVar("T")

FORMAT = 1  # bump when what an entry holds changes shape
CODE_DIR = Path(__file__).parent
CACHE_DIR = CODE_DIR / "__pycache__"
USER_CACHE_NAME = "kvplan"  # the folder under $XDG_CACHE_HOME (or ~/.cache)
# A key goes into a file name: catalogue ids and engine names only (anything else is looked up uncached).
KEY = re.compile(r"[a-z0-9][a-z0-9._-]{0,120}")
# What a damaged or foreign entry may raise while it is read back: it is then a miss, rebuilt and replaced.
UNREADABLE = (
    OSError,
    EOFError,
    pickle.UnpicklingError,
    AttributeError,
    ImportError,
    IndexError,
    TypeError,
    ValueError,
)


def file_stamps(paths: Iterable[Path | str]) -> tuple[tuple[str, int, int, int, int], ...]:
    """(path, inode, size, mtime_ns, ctime_ns) of each file; OSError when one is gone."""
    stamps = []
    for path in paths:
        info = os.stat(path)
        stamps.append((str(path), info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
    return tuple(stamps)


def fingerprint(data_files: Iterable[Path]) -> tuple[object, ...]:
    """What an entry is valid for: versions, planner/'s top-level modules and the data files, stamped."""
    modules = sorted(entry.path for entry in os.scandir(CODE_DIR) if entry.name.endswith(".py"))
    return (FORMAT, __version__, sys.version, PYDANTIC_VERSION, file_stamps(modules), file_stamps(data_files))


def user_cache_dir() -> Path | None:
    """The per-user folder of this install's entries: $XDG_CACHE_HOME/kvplan/<version>-<crc32 of the
    install's path> (~/.cache when XDG_CACHE_HOME is unset or relative, as the XDG spec says); None when
    there is no home to put it in."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    install = zlib.crc32(str(CODE_DIR).encode("utf-8", "surrogateescape"))
    return Path(base, USER_CACHE_NAME, f"{__version__}-{install:08x}")


def is_own_folder(folder: Path) -> bool:
    """True when `folder` exists and belongs to the user running kvplan (entries are unpickled: one
    another user can write into is never read)."""
    try:
        owner = folder.stat().st_uid
    except OSError:
        return False
    getuid = getattr(os, "getuid", None)  # absent on Windows, where folder ownership is not checked
    return getuid is None or owner == getuid()


def _read(path: Path, stamp: tuple[object, ...]) -> tuple[bool, Any]:
    """(True, value) when the entry at `path` exists and was written under `stamp`; (False, None)
    otherwise. The stamp is read and compared first: a stale entry's objects are never unpickled."""
    try:
        with open(path, "rb") as handle:
            if pickle.load(handle) != stamp:
                return False, None
            return True, pickle.load(handle)
    except UNREADABLE:
        return False, None


def _write(path: Path, stamp: tuple[object, ...], value: object) -> bool:
    """Store an entry atomically (a temporary file in the same folder, then os.replace); False, and nothing
    left behind, when the folder cannot be made or written."""
    import tempfile  # here: only a cold run writes, and tempfile's imports (shutil) cost every run otherwise

    try:
        path.parent.mkdir(exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as out:
                pickle.dump(stamp, out, protocol=pickle.HIGHEST_PROTOCOL)
                pickle.dump(value, out, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except (OSError, pickle.PicklingError):
        return False
    return True


def _read_any(name: str, stamp: tuple[object, ...]) -> tuple[bool, Any]:
    """The entry `name` from the package's folder, else from the user's (when it is the user's own)."""
    found, value = _read(CACHE_DIR / name, stamp)
    user = None if found else user_cache_dir()
    if user is not None and is_own_folder(user):
        found, value = _read(user / name, stamp)
    return found, value


def _store(name: str, stamp: tuple[object, ...], value: object) -> None:
    """Write the entry `name` to the package's folder, else to the user's; nothing under -B."""
    if sys.dont_write_bytecode or _write(CACHE_DIR / name, stamp, value):
        return
    user = user_cache_dir()
    if user is None:
        return
    try:
        user.mkdir(mode=0o700, parents=True, exist_ok=True)  # private: entries are unpickled
    except OSError:
        return
    if is_own_folder(user):  # another user's folder is never read, so never written
        _write(user / name, stamp, value)


def remembered(key: str, *, data_files: Callable[[], Iterable[Path]], look_up: Callable[[], T]) -> T:
    """`look_up()`, read from the cache entry `key` while its fingerprint holds, else computed and stored.
    `data_files` lists every file the look-up may read; errors of `look_up` pass through, uncached."""
    if not KEY.fullmatch(key):
        return look_up()
    name = f"catalog-{key}.pickle"
    try:
        stamp = fingerprint(data_files())
    except OSError:
        return look_up()
    found, value = _read_any(name, stamp)
    if found:
        return value  # type: ignore[no-any-return]
    value = look_up()
    _store(name, stamp, value)
    return value
