"""One-line error text: the arguments as typed, control characters escaped, and the message of a usage
error of the CLI library (bad type, out-of-range value, unknown option, extra argument) in the house style
where kvplan can tell what went wrong: `FLAG: out of range (got X, expected LOW..HIGH)` for a flag declared
with min= / max=, `FLAG: a switch, takes no value (...)` for a value typed after an on/off flag. A leaf of
planner/cli (the standard library only): planner/cli/options.py imports it for every command.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Protocol, runtime_checkable

LAST_TYPED_ARGS: list[str] = []  # the arguments the last parsed command was given, as typed


def printable(text: str) -> str:
    """`text` on one line: line breaks become spaces, other control characters their escapes (\\x1d)."""
    chars = (
        " " if c in "\n\r" else c if c.isprintable() else c.encode("unicode_escape").decode() for c in text
    )
    return "".join(chars)


def one_line(text: str) -> str:
    """`text` with its whitespace runs (newlines included) collapsed to single spaces, control escaped."""
    return printable(re.sub(r"[ \t]*[\r\n]+[ \t]*", " ", text)).strip()


@runtime_checkable
class UsageError(Protocol):
    """A usage error of the CLI library (bad type, unknown option, missing value): what the one-line
    handler reads of it, so kvplan imports none of the library's private modules."""

    exit_code: int

    def format_message(self) -> str:
        """The library's message."""


# pydantic's error types for a value outside a flag's min= / max= (typer 0.29 validates through pydantic)
RANGE_ERRORS = frozenset({"greater_than_equal", "less_than_equal", "greater_than", "less_than"})


def usage_line(exc: UsageError) -> str:
    """A click usage error as one line, with the rejected value when click's message lacks it."""
    house = range_line(exc) or switch_line(exc)
    if house is not None:
        return house
    text = one_line(exc.format_message())
    errors = getattr(getattr(exc, "__cause__", None), "errors", None)
    if callable(errors):
        found = [e.get("input") for e in errors() if isinstance(e, dict)]
        if found and f"{found[0]!r}" not in text:
            text += f" (got {found[0]!r})"
    name = getattr(getattr(exc, "param", None), "name", None)
    if isinstance(name, str) and not text.count("-"):
        text = text.replace(name, name.upper())  # an argument: its usage spelling, POINTS_CSV
    return text


def typed_spelling(opts: list[str]) -> str:
    """The spelling of a flag the command line used (its last use), else its first."""
    typed = [arg.split("=", 1)[0] for arg in LAST_TYPED_ARGS if arg.split("=", 1)[0] in opts]
    return typed[-1] if typed else opts[0]


def bound_text(value: Any) -> str:
    """A range bound as the house messages write it: 1, 0.01, 1000000."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def range_line(exc: UsageError) -> str | None:
    """`FLAG: out of range (got X, expected LOW..HIGH)` (`>= LOW`, `<= HIGH` with one bound) for a value
    outside a flag's declared min= / max=; None for any other error."""
    param = getattr(exc, "param", None)
    errors = getattr(getattr(exc, "__cause__", None), "errors", None)
    opts = getattr(param, "opts", None)
    if not callable(errors) or not opts or not opts[0].startswith("-"):
        return None
    first = next((e for e in errors() if isinstance(e, dict)), {})
    if first.get("type") not in RANGE_ERRORS:
        return None
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None and high is not None:
        expected = f"{bound_text(low)}..{bound_text(high)}"
    else:
        expected = f">= {bound_text(low)}" if low is not None else f"<= {bound_text(high)}"
    return f"{typed_spelling(opts)}: out of range (got {first.get('input')}, expected {expected})"


def switch_line(exc: UsageError) -> str | None:
    """`FLAG: a switch, takes no value (got FLAG VALUE, ...)` when the extra argument the library refused
    was typed right after an on/off flag of the command (`--select-batch maybe`); None otherwise."""
    message = exc.format_message()
    command = getattr(getattr(exc, "ctx", None), "command", None)
    if "unexpected extra argument" not in message or command is None:
        return None
    switches = {opt for p in command.params if getattr(p, "is_flag", False) for opt in p.opts}
    for flag, value in itertools.pairwise(LAST_TYPED_ARGS):
        if flag in switches and not value.startswith("-") and value in message:
            return (
                f"{flag}: a switch, takes no value (got {flag} {value}, expected {flag} alone to turn it on, "
                "left out for off)"
            )
    return None
