"""One option given twice with different values: `--tp 2 --tensor-parallel-size 4` (two spellings of one
flag), `--tp 2 --tp 4` (one spelling repeated), `--open-browser --no-browser` (an on/off pair both ways).
The CLI library keeps the last value and says nothing; every kvplan command refuses it in one line instead
(options.TypelessFlags.parse_args, after the library has parsed the arguments). The same value twice is
accepted. A leaf of planner/cli (the standard library only): it reads a command's parameters through their
public attributes (opts, secondary_opts, is_flag, nargs, multiple, count), nothing of the library's parser.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

SHOWN_VALUE_CHARS = 40  # a longer value is cut in the error line (a 300-character path stays readable)


@dataclass(frozen=True)
class Occurrence:
    """One use of an option on the command line: its spelling and value as typed (an on/off flag's value
    is which side was typed, shown by its spelling alone)."""

    spelling: str
    value: str
    takes_value: bool

    def shown(self) -> str:
        """'--tp 2', '--model ...long-path...', '--no-browser'."""
        if not self.takes_value:
            return self.spelling
        text = self.value
        if len(text) > SHOWN_VALUE_CHARS:
            text = text[: SHOWN_VALUE_CHARS - 3] + "..."
        return f"{self.spelling} {shlex.quote(text)}"


def single_valued(param: Any) -> bool:
    """An option that holds one value: not an argument, not `multiple=` or `count=` (repeats add up)."""
    return (
        bool(getattr(param, "opts", None))
        and param.opts[0].startswith("-")
        and not (getattr(param, "multiple", False) or getattr(param, "count", False))
    )


def spellings_of(params: Iterable[Any]) -> dict[str, Any]:
    """Each spelling of the single-valued options (`--tp`, `--tensor-parallel-size`, `--no-browser`) ->
    its parameter."""
    return {
        spelling: param
        for param in params
        if single_valued(param)
        for spelling in (*param.opts, *getattr(param, "secondary_opts", ()))
    }


def split_token(token: str, spellings: dict[str, Any]) -> tuple[str, str | None]:
    """(spelling, attached value or None) of an option token: `--tp=4` -> ('--tp', '4'), `-mqwen3` ->
    ('-m', 'qwen3') for a short option that takes a value, as the library reads them."""
    if token.startswith("--"):
        name, equals, attached = token.partition("=")
        return name, attached if equals else None
    name = token[:2]
    param = spellings.get(name)
    takes = param is not None and not getattr(param, "is_flag", False)
    return name, token[2:] if takes and len(token) > 2 else None


def occurrences(
    params: Iterable[Any], args: Sequence[str], *, interspersed: bool
) -> dict[str, list[Occurrence]]:
    """Every use of each single-valued option in `args`, by parameter name, in order; the walk stops at
    `--`, and, for a command group (`interspersed` False), at its first positional (the sub-command)."""
    spellings = spellings_of(params)
    found: dict[str, list[Occurrence]] = {}
    at = 0
    while at < len(args):
        token = args[at]
        at += 1
        if token == "--" or (not token.startswith("-") and not interspersed):
            break
        name, attached = split_token(token, spellings) if token.startswith("-") else (token, None)
        param = spellings.get(name)
        if param is None:
            continue  # a positional, or what the library already refused
        if getattr(param, "is_flag", False):
            found.setdefault(param.name, []).append(Occurrence(name, str(name in param.opts), False))
            continue
        count = max(param.nargs, 1)
        values = [attached] if attached is not None else []
        values += args[at : at + count - len(values)]
        at += count - (attached is not None)
        found.setdefault(param.name, []).append(Occurrence(name, " ".join(values), True))
    return found


def conflict(params: Iterable[Any], args: Sequence[str], *, interspersed: bool) -> str | None:
    """The one-line complaint about the first option given twice with different values ('--tp 2 and
    --tensor-parallel-size 4 set the same option; give one'), None when every option has one value."""
    return first_conflict(occurrences(params, args, interspersed=interspersed))


def first_conflict(found: dict[str, list[Occurrence]]) -> str | None:
    """conflict over the occurrences already walked (occurrences)."""
    for uses in found.values():
        first = uses[0]
        other = next((use for use in uses[1:] if use.value != first.value), None)
        if other is not None:
            return f"{first.shown()} and {other.shown()} set the same option; give one"
    return None
