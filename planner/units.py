"""Unit constants, parsing of user-typed sizes, and display formatting.

This is the only module in planner/ that may contain conversion literals (2**30, 1e9, 1e-3, ...);
tests/test_units.py greps the rest of planner/ for them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

BITS_PER_BYTE = 8
KIB_BYTES = 2**10
MIB_BYTES = 2**20
GIB_BYTES = 2**30
GB_BYTES = 10**9
TB_BYTES = 10**12
TFLOP = 10**12
US_S = 1e-6
NS_S = 1e-9
MS_S = 1e-3
PERCENT = 100
# Context lengths follow LLM-serving usage: "32k" is 32 768 tokens (k = 1024), never 32 000.
TOKENS_PER_K = 1024
TOKENS_PER_M = 1024 * 1024

MAX_TOKENS = 1024 * TOKENS_PER_M  # bound on any typed token count: beyond every model's context window

_TOKEN_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmM]?)\s*$")  # ASCII digits only


def parse_tokens(text: str) -> int:
    """Parse a token count typed by a user: "32768", "32k", "128K", "1m", "0.5k" -> tokens.

    Formula: tokens = value * (1024 for k/K, 1024**2 for m/M, 1 otherwise); the result must be
    a whole positive number of at most MAX_TOKENS. Raises ValueError with the accepted form otherwise.
    """
    match = _TOKEN_RE.match(text)
    if match is None:
        raise ValueError("expected a whole number of tokens such as 32768, 32k or 128K")
    value = float(match.group(1))
    suffix = match.group(2).lower()
    multiplier = {"": 1, "k": TOKENS_PER_K, "m": TOKENS_PER_M}[suffix]
    tokens = value * multiplier
    if not tokens <= MAX_TOKENS:
        raise ValueError(f"expected at most {MAX_TOKENS // TOKENS_PER_M}m ({MAX_TOKENS}) tokens")
    if tokens <= 0 or not math.isclose(tokens, round(tokens)):
        raise ValueError("expected a whole number of tokens > 0 such as 32768, 32k or 128K")
    return round(tokens)


def gib_to_bytes(gib: float) -> int:
    """GiB (2**30 B) -> bytes, rounded down to a whole byte."""
    return math.floor(gib * GIB_BYTES)


def gb_per_s_to_bytes_per_s(gb_per_s: float) -> float:
    """GB/s (1e9 B/s, as datasheets quote bandwidth) -> bytes/s."""
    return gb_per_s * GB_BYTES


def tflop_per_s_to_flop_per_s(tflop_per_s: float) -> float:
    """TFLOP/s (1e12 FLOP/s) -> FLOP/s."""
    return tflop_per_s * TFLOP


def ns_to_s(ns: float) -> float:
    """Nanoseconds -> seconds."""
    return ns * NS_S


def us_to_s(us: float) -> float:
    """Microseconds -> seconds."""
    return us * US_S


def s_to_ms(seconds: float) -> float:
    """Seconds -> milliseconds."""
    return seconds / MS_S


def bytes_to_gib(n_bytes: float) -> float:
    """Bytes -> GiB (2**30 B)."""
    return n_bytes / GIB_BYTES


def fmt_gib(n_bytes: float) -> str:
    """Display bytes as GiB with two decimals ("12.34 GiB")."""
    return f"{n_bytes / GIB_BYTES:.2f} GiB"


def fmt_bytes(n_bytes: float) -> str:
    """Display a byte count with the largest binary unit that keeps it >= 1 (B, KiB, MiB, GiB)."""
    for unit, size in (("GiB", GIB_BYTES), ("MiB", MIB_BYTES), ("KiB", KIB_BYTES)):
        if abs(n_bytes) >= size:
            return f"{n_bytes / size:.2f} {unit}"
    return f"{n_bytes:.0f} B"


# From here a time prints in seconds: 6,195.1 s reads at a glance, 6195137.9 ms does not (a long queue).
SECONDS_FROM_S = 10.0


def duration_unit(seconds: float) -> tuple[str, float]:
    """(unit, seconds per unit) a time prints in: ("ms", 0.001) below SECONDS_FROM_S, ("s", 1.0) from it."""
    return ("s", 1.0) if abs(seconds) >= SECONDS_FROM_S else ("ms", MS_S)


def fmt_duration(seconds: float, *, unit_of: float | None = None) -> str:
    """Display a time: milliseconds below SECONDS_FROM_S ("63.2 ms", "9876.5 ms"), seconds from there on
    ("12.3 s", "6,195.1 s"). unit_of: the time whose unit to use instead (the largest of a line's times, so
    that one line reads in one unit: "7.6 s ... 13.4 s", not "7557.9 ms ... 13.4 s")."""
    unit, scale = duration_unit(seconds if unit_of is None else unit_of)
    return f"{seconds / scale:,.1f} s" if unit == "s" else f"{seconds / scale:.1f} ms"


def fmt_duration_span(
    low_s: float, high_s: float, *, point_s: float | None = None, point_decimals: int | None = 1
) -> str:
    """A range of times in one unit, the unit fmt_duration gives its high end: '99-231 ms', '4,425-10,326 s'
    (fmt_span's rounding). point_s: the time the range is of; where it prints in that unit too, the range
    holds it as printed with point_decimals decimals (fmt_span's point; 1: as fmt_duration prints it, None:
    as fmt_figures does)."""
    unit, scale = duration_unit(high_s)
    point = point_s / scale if point_s is not None and duration_unit(point_s)[0] == unit else None
    return f"{fmt_span(low_s / scale, high_s / scale, point=point, point_decimals=point_decimals)} {unit}"


def fmt_tpot(seconds: float | None) -> str:
    """A TPOT as fmt_duration does, or 'undefined (one-token outputs)' for None: with one output token
    there is no time between tokens."""
    return "undefined (one-token outputs)" if seconds is None else fmt_duration(seconds)


def _span_decimals(value: float) -> int:
    """Decimals that show `value` to about 3 significant figures: 0 from 100 up (and for 0 or less, NaN and
    infinities, which print as themselves)."""
    if not math.isfinite(value) or value >= 100 or value <= 0:
        return 0
    return max(0, 2 - math.floor(math.log10(value)))


def fmt_span(
    low: float, high: float, *, point: float | None = None, point_decimals: int | None = None
) -> str:
    """A range of two values in one unit, to about 3 significant figures (a range is not known better),
    rounded outward (low down, high up) so that the printed range still holds every value the real one
    holds: '99-231', '26.5-33.7', '1,204-15,446'.

    point: the figure the range is of, printed by the caller with point_decimals decimals (None: as
    fmt_figures prints it). The printed range then holds the printed point: an end that is the point (a
    range factor of 1) prints as the point does, and an end the rounded point falls outside moves to it
    ('47.8 ms (range 47.8-177)', not '47.7-177'; '0.0 (0.0-0.05)', not '0.0117-0.05')."""
    ends = [_outward(low, math.floor, 1e-9), _outward(high, math.ceil, -1e-9)]
    if point is not None:
        decimals = _span_decimals(point) if point_decimals is None else point_decimals
        shown = round(point, decimals)
        for at, (value, printed) in enumerate(zip((low, high), ends, strict=True)):
            is_point = math.isclose(value, point, rel_tol=1e-9)
            outside = shown < printed[0] if at == 0 else shown > printed[0]
            if is_point or outside:
                ends[at] = (shown, f"{shown:,.{decimals}f}")
    return "-".join(text for _, text in ends)


def _outward(value: float, outward: Callable[[float], int], slack: float) -> tuple[float, str]:
    """(value rounded outward to about 3 significant figures, its text): floor for a range's low end, ceil
    for its high end; the slack keeps a value already at the printed precision (15.3 x 10 =
    153.00000000000003) where it is."""
    decimals = _span_decimals(value)
    scale = 10.0**decimals
    rounded = outward(value * scale + slack) / scale
    return rounded, f"{rounded:,.{decimals}f}"


def round_figures(value: float) -> float:
    """`value` rounded to about 3 significant figures (the number fmt_figures prints), for tables and charts
    that show a small rate (0.0432 tok/s) without rounding it to 0."""
    return round(value, _span_decimals(value))


def fmt_figures(value: float) -> str:
    """A value to about 3 significant figures, thousands separated: '1,204', '26.5', '0.0123' (a slow card's
    0.04 tok/s is not shown as 0)."""
    return f"{value:,.{_span_decimals(value)}f}"


def fmt_tokens_per_s(tokens_per_s: float) -> str:
    """Display a throughput in tokens/s."""
    return f"{tokens_per_s:,.1f} tok/s"


def fmt_tokens(tokens: int) -> str:
    """Display a token count, with the k (=1024) form when exact ("32k (32768)")."""
    if tokens % TOKENS_PER_K == 0:
        return f"{tokens // TOKENS_PER_K}k ({tokens})"
    return str(tokens)


def fmt_fraction(fraction: float) -> str:
    """Display a [0, 1] fraction as a percentage ("37.5 %")."""
    return f"{fraction * PERCENT:.1f} %"


def fmt_billions(count: float) -> str:
    """Display a count (parameters) in billions ("32.76 B")."""
    return f"{count / 10**9:.2f} B"
