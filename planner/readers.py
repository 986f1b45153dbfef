"""The one reader of a user's file, and the bounded parsers every reader of JSON, YAML and CSV goes through.

Files: stat first, opened with O_NONBLOCK and checked again on the open descriptor (a regular file, at
most a size cap), then a capped read. A FIFO, a device such as /dev/zero or a directory is refused before
anything is read, so no file makes kvplan hang or exhaust memory.
Parsers: JSON and YAML are refused past MAX_DEPTH levels of nesting and past MAX_INT_DIGITS digits in one
integer; YAML aliases (`*name`) are refused before validation, since a few KB of aliases validate as
gigabytes; JSON's non-standard NaN / Infinity constants are refused. A UTF-8 byte-order mark at the start
of a text file (Excel's "CSV UTF-8", Windows editors) is dropped. Every failure is one DataFileError line
naming the file (and the flag when given). CSV: planner/csvfiles.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from planner import units
from planner.errors import DataFileError, PlanInputError

# json is imported where it is used: the mission command reads none (~0.007e9 instructions of its start-up;
# benchmarks/bench_startup.py). CSV files: planner/csvfiles.py, over read_text_capped.
DEFAULT_LIMIT_BYTES = (
    16 * units.MIB_BYTES
)  # larger than any card, profile, config.json, log or bench kvplan reads
MAX_DEPTH = 64  # [assumed: the deepest file kvplan reads (a MindIE config.json) nests 6 levels]
MAX_INT_DIGITS = 1000  # [assumed: far past any real count; below Python's 4300-digit int() limit]
_YamlLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _label(path: Path | str, flag: str | None) -> str:
    return f"{flag} {path}" if flag else str(path)


def _not_regular(where: str, mode: int) -> DataFileError:
    kind = "directory" if stat.S_ISDIR(mode) else "FIFO" if stat.S_ISFIFO(mode) else "device or socket"
    return DataFileError(f"{where}: not a regular file (got a {kind}, expected a regular file)")


def read_bytes_capped(
    path: Path | str, *, flag: str | None = None, limit_bytes: int = DEFAULT_LIMIT_BYTES
) -> bytes:
    """The bytes of a regular file of at most `limit_bytes`; DataFileError naming the file otherwise."""
    where = _label(path, flag)
    try:
        with open_regular(path, where=where) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limit_bytes:
                raise DataFileError(
                    f"{where}: file too large (got {size} bytes, expected at most "
                    f"{limit_bytes // units.MIB_BYTES} MiB)"
                )
            data: bytes = handle.read(limit_bytes + 1)
    except OSError as exc:
        raise DataFileError(f"{_short(where)}: cannot read file ({exc.strerror or exc})") from exc
    if len(data) > limit_bytes:
        raise DataFileError(
            f"{where}: file too large (expected at most {limit_bytes // units.MIB_BYTES} MiB)"
        )
    return data


def _short(where: str) -> str:
    """A path shortened for a message (an over-long name is the error itself)."""
    return where if len(where) <= 200 else where[:200] + "..."


@contextlib.contextmanager
def open_regular(path: Path | str, *, where: str | None = None) -> Iterator[Any]:
    """A binary handle on `path` if it is a regular file; DataFileError otherwise. Checked with os.stat
    before opening and with fstat on the descriptor (O_NONBLOCK: a FIFO can never block the open)."""
    where = _short(where or str(path))
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(where, info.st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        raise DataFileError(f"{where}: cannot read file ({getattr(exc, 'strerror', None) or exc})") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(where, mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        yield handle


def read_text_capped(
    path: Path | str, *, flag: str | None = None, limit_bytes: int = DEFAULT_LIMIT_BYTES
) -> str:
    """The UTF-8 text of a regular file of at most `limit_bytes`, a leading byte-order mark dropped
    (utf-8-sig); DataFileError naming the file otherwise."""
    data = read_bytes_capped(path, flag=flag, limit_bytes=limit_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{_label(path, flag)}: not UTF-8 text (byte {exc.start}: {exc.reason})") from exc


# --- bounded JSON ---------------------------------------------------------------------------------------


def _json_int(where: str) -> Any:
    def parse(text: str) -> int:
        digits = len(text.lstrip("-"))
        if digits > MAX_INT_DIGITS:
            raise DataFileError(
                f"{where}: integer too long (got {digits} digits, expected at most {MAX_INT_DIGITS})"
            )
        return int(text)

    return parse


def _json_float(where: str) -> Any:
    def parse(text: str) -> float:
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise DataFileError(f"{where}: number out of range (got {text[:40]}, expected a finite number)")
        return value

    return parse


def _json_constant(where: str) -> Any:
    def parse(name: str) -> float:
        raise DataFileError(f"{where}: not standard JSON (got {name}, expected a finite number)")

    return parse


def _json_unique_keys(where: str, text: str | bytes) -> Any:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise DataFileError(
                    f"{where}: key {key[:80]!r} given twice in one object{key_lines(text, key)} (expected "
                    f"each key once: which one counts would be a guess)"
                )
            out[key] = value
        return out

    return build


def key_lines(text: str | bytes, key: str, *, most: int = 5) -> str:
    """' (the key is on lines 3, 9)': the lines of `text` where `key` is written as an object key, to find
    the repeat by (json's pairs hook knows no positions; another object may hold the key too). Empty when
    the key is written with escapes or not found."""
    import json
    import re

    source = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    pattern = re.compile(re.escape(json.dumps(key)) + r"\s*:")
    lines = [source.count("\n", 0, match.start()) + 1 for match in pattern.finditer(source)]
    if not lines:
        return ""
    shown = ", ".join(map(str, lines[:most])) + (", ..." if len(lines) > most else "")
    return f" (the key is on line{'s' if len(lines) > 1 else ''} {shown})"


def check_depth(data: Any, *, where: str, limit: int = MAX_DEPTH) -> None:
    """DataFileError when lists/dicts in `data` nest deeper than `limit` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    raise DataFileError(
                        f"{where}: nested too deeply (got more than {limit} levels, expected at most {limit})"
                    )
                stack.append((child, depth + 1))


def parse_json(text: str | bytes, *, where: str) -> Any:
    """`text` as JSON, bounded: at most MAX_DEPTH levels, MAX_INT_DIGITS digits per integer, no
    NaN / Infinity / overflowing floats; DataFileError naming `where` otherwise."""
    import json

    if isinstance(text, str):
        text = text.removeprefix("\ufeff")  # a byte-order mark (json.loads drops it only from bytes)
    try:
        data = json.loads(
            text,
            parse_int=_json_int(where),
            parse_float=_json_float(where),
            parse_constant=_json_constant(where),
            object_pairs_hook=_json_unique_keys(where, text),
        )
    except RecursionError as exc:
        raise DataFileError(f"{where}: nested too deeply (expected at most {MAX_DEPTH} levels)") from exc
    except json.JSONDecodeError as exc:
        raise DataFileError(
            f"{where}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from exc
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{where}: not valid JSON ({exc})") from exc
    check_depth(data, where=where)
    return data


def json_object(text: str | bytes, *, where: str) -> dict[str, Any]:
    """parse_json for a file that must hold one JSON object."""
    data = parse_json(text, where=where)
    if not isinstance(data, dict):
        raise DataFileError(f"{where}: expected a JSON object at the top level (got {type(data).__name__})")
    return data


# --- bounded YAML ---------------------------------------------------------------------------------------


def _check_yaml_nodes(root: yaml.Node, *, where: str) -> None:
    """Refuse aliases (a node reached twice), nesting past MAX_DEPTH and over-long integers."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            raise DataFileError(
                f"{where}: line {node.start_mark.line + 1}: YAML aliases are not supported (got an alias "
                f"'*...', expected each value "
                f"written out); kvplan's data files never need them"
            )
        seen.add(id(node))
        if depth > MAX_DEPTH:
            raise DataFileError(f"{where}: nested too deeply (got more than {MAX_DEPTH} levels)")
        if isinstance(node, yaml.ScalarNode):
            digits = len(node.value.lstrip("+-"))
            if node.tag.endswith(":int") and digits > MAX_INT_DIGITS:
                raise DataFileError(
                    f"{where}: integer too long (got {digits} digits, expected at most {MAX_INT_DIGITS})"
                )
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            _check_unique_keys(node, where=where)
            for key, value in node.value:
                stack.extend(((key, depth + 1), (value, depth + 1)))


def _check_unique_keys(node: yaml.MappingNode, *, where: str) -> None:
    """Refuse a key given twice in one mapping (YAML's loader would keep the last one silently)."""
    keys: set[str] = set()
    for key, _ in node.value:
        name = key.value if isinstance(key, yaml.ScalarNode) else None
        if name is None:
            continue
        if name in keys:
            raise DataFileError(
                f"{where}: line {key.start_mark.line + 1}: key {str(name)[:80]!r} given twice in one mapping "
                f"(expected each key once: which one counts would be a guess)"
            )
        keys.add(name)


def parse_yaml(text: str, *, where: str) -> Any:
    """`text` as YAML (safe tags only), bounded like parse_json and with no aliases; DataFileError naming
    `where` otherwise."""
    loader = _YamlLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml_nodes(node, where=where)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise DataFileError(f"{where}: not valid YAML ({str(exc).splitlines()[0]})") from exc
    except (RecursionError, MemoryError) as exc:
        raise DataFileError(f"{where}: YAML nested too deeply to read ({type(exc).__name__})") from exc
    except ValueError as exc:  # an int the constructor refuses (e.g. past Python's digit limit)
        raise DataFileError(f"{where}: not valid YAML ({exc})") from exc
    finally:
        loader.dispose()


# Figures read from an engine's start-up log (planner/engines/<engine>/log.py): bounded like the integers
# of a data file, so a garbled or hostile log is one line, never a huge number in a plan.
MAX_LOG_GIB = 2.0**20  # a logged memory figure above 1 PiB is not a device's
MAX_LOG_COUNT = 1_000_000_000_000  # a logged token or block count above this is not a device's
LOG_NUMBER = r"\d+(?:\.\d+)?"  # a logged decimal figure ("12.57", "816"), for the engines' line patterns


def _cut(text: str) -> str:
    """A logged figure quoted for a message: its first 20 characters, and its length when longer."""
    return repr(text) if len(text) <= 20 else f"{text[:20]!r}... ({len(text)} characters)"


def log_gib_bytes(text: str) -> int:
    """A logged GiB figure ("12.57") in bytes; PlanInputError beyond MAX_LOG_GIB."""
    value = float(text)
    if not 0 <= value <= MAX_LOG_GIB:
        raise PlanInputError(f"log figure out of range (got {_cut(text)} GiB, expected <= {MAX_LOG_GIB:g})")
    return units.gib_to_bytes(value)


def log_count(text: str) -> int:
    """A logged whole number, thousands separators allowed ("236,416"); PlanInputError beyond
    MAX_LOG_COUNT."""
    digits = text.replace(",", "")
    if len(digits) > len(str(MAX_LOG_COUNT)) or int(digits) > MAX_LOG_COUNT:
        raise PlanInputError(f"log figure out of range (got {_cut(text)}, expected <= {MAX_LOG_COUNT})")
    return int(digits)


def log_fraction(text: str, *, setting: str) -> float:
    """A logged memory share ("0.9") of the engine setting named `setting`; PlanInputError outside (0, 1],
    the range every engine accepts for it."""
    value = float(text)
    if not 0 < value <= 1:
        raise PlanInputError(f"log {setting} out of range (got {text[:20]!r}, expected (0, 1])")
    return value


def log_gib_figures(pattern: re.Pattern[str], text: str) -> list[int]:
    """Bytes of the GiB figure (the first group) of every line `pattern` finds in `text`, in log order."""
    return [log_gib_bytes(found.group(1)) for found in pattern.finditer(text)]


def log_counts(pattern: re.Pattern[str], text: str) -> list[int]:
    """The whole number (the first group) of every line `pattern` finds in `text`, in log order."""
    return [log_count(found.group(1)) for found in pattern.finditer(text)]


def smallest_over_ranks(figures: list[int]) -> int | None:
    """The instance's figure from one logged per rank (or per start-up): the smallest, since every rank is
    sized alike from the one with the least (MindIE's tuning guide: the smallest npuBlockNum; vLLM: the
    minimum KV memory over workers); None when the log holds none."""
    return min(figures) if figures else None
