"""Workloads: when requests arrive and how long their prompts and outputs are. Seeded, reproducible.

Arrivals: Poisson at a rate (exponential gaps), a closed loop of K users (a user sends its next request the
moment the previous one finishes, as benchmark clients with fixed concurrency do), or a trace file of
(arrival_s, input_tokens, output_tokens) rows. Lengths: `1k` (fixed), `uniform:LO:HI`,
`lognormal:MEDIAN:SIGMA` or `empirical:FILE` (one token count per line, sampled with replacement).
"""

from __future__ import annotations

import io
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from planner import csvfiles, readers, units
from planner.arrays import FloatArray, IntArray
from planner.errors import DataFileError, PlanInputError

MAX_REQUESTS = 200_000  # 100 000 take ~3-5 s of CPU; more is a typo (and would stall a script)
MAX_TRACE_BYTES = 64 * units.MIB_BYTES  # ~1e6 rows of three numbers
MAX_LOGNORMAL_SIGMA = 4.0  # beyond this the distribution is all outliers
# Past ~1e7 s a step of a millisecond no longer moves a float64 clock by its own size, and TTFT/TPOT
# collapse to 0; a serving trace spans hours or days.
MAX_ARRIVAL_S = 1e7  # [assumed: 116 days, longer than any serving trace]
TRACE_COLUMNS = ("arrival_s", "input_tokens", "output_tokens")


@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution: kind fixed/uniform/lognormal/empirical with its parameters."""

    kind: str
    low: float
    high: float
    values: tuple[int, ...] = ()


@dataclass(frozen=True)
class Workload:
    """The requests of one run. arrival_s is None for a closed loop of `concurrency` users. A trace's
    requests keep their file lines (`lines`, in the workload's order) and what reading it changed (`notes`:
    rows sorted by arrival)."""

    input_tokens: IntArray
    output_tokens: IntArray
    arrival_s: FloatArray | None
    concurrency: int | None
    lines: IntArray | None = None
    notes: tuple[str, ...] = ()

    @property
    def requests(self) -> int:
        """Number of requests."""
        return int(self.input_tokens.size)


def parse_length(text: str, *, flag: str) -> LengthDist:
    """`1k` | `fixed:1k` | `uniform:LO:HI` | `lognormal:MEDIAN:SIGMA` | `empirical:FILE`."""
    kind, colon, rest = str(text).partition(":")
    if not colon:
        return _fixed(kind, flag)
    kind = kind.strip().lower()
    if kind == "empirical" and not rest.strip():
        raise PlanInputError(
            f"{flag}: empirical names no file (got {text!r}, expected empirical:FILE, one token count a line)"
        )
    if kind == "fixed":
        return _fixed(rest, flag)
    if kind == "empirical":
        return LengthDist("empirical", 0, 0, read_lengths(Path(rest), flag=flag))
    parts = rest.split(":")
    if kind not in ("uniform", "lognormal") or len(parts) != 2:
        raise PlanInputError(
            f"{flag}: not a length distribution (got {text!r}, expected 1k, uniform:LO:HI, "
            "lognormal:MEDIAN:SIGMA or empirical:FILE)"
        )
    low = _tokens(parts[0], flag)
    if kind == "uniform":
        high = _tokens(parts[1], flag)
        if high < low:
            raise PlanInputError(f"{flag}: uniform HI below LO (got {text!r}, expected LO <= HI)")
        return LengthDist("uniform", low, high)
    return LengthDist("lognormal", low, _sigma(parts[1], flag))


def _fixed(text: str, flag: str) -> LengthDist:
    value = _tokens(text, flag)
    return LengthDist("fixed", value, value)


def _tokens(text: str, flag: str) -> int:
    try:
        value = units.parse_tokens(text)
    except ValueError as exc:
        raise PlanInputError(f"{flag}: not a token count (got {text!r}, {exc})") from None
    if value < 1:
        raise PlanInputError(f"{flag}: must be >= 1 token (got {text!r})")
    return value


def _sigma(text: str, flag: str) -> float:
    try:
        sigma = float(text)
    except ValueError:
        sigma = math.nan
    if not 0 <= sigma <= MAX_LOGNORMAL_SIGMA:
        raise PlanInputError(
            f"{flag}: lognormal SIGMA out of range (got {text!r}, expected 0..{MAX_LOGNORMAL_SIGMA:g})"
        )
    return sigma + 0.0  # -0 becomes 0 (numpy refuses a negative-signed scale)


def read_lengths(path: Path, *, flag: str) -> tuple[int, ...]:
    """Token counts, one per line as every token flag takes them (512, 1k, 32K: units.parse_tokens; blank
    lines and # comments skipped), from a capped read."""
    text = readers.read_text_capped(path, flag=flag, limit_bytes=MAX_TRACE_BYTES)
    values: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        item = line.split("#")[0].strip()
        if not item:
            continue
        try:
            values.append(units.parse_tokens(item))  # ASCII digits only
        except ValueError:
            raise DataFileError(
                f"{flag} {path}:{number}: not a token count (got {item[:40]!r}, expected "
                f"1..{units.MAX_TOKENS} as a token flag takes it: 512, 1k, 32K)"
            ) from None
    if not values:
        raise DataFileError(f"{flag} {path}: no token counts (got an empty file, expected one per line)")
    return tuple(values)


def sample_lengths(dist: LengthDist, *, count: int, rng: np.random.Generator) -> IntArray:
    """`count` token lengths >= 1 drawn from `dist` (lognormal: exp(N(ln median, sigma)), rounded)."""
    if dist.kind == "fixed":
        return np.full(count, int(dist.low), dtype=np.int64)
    if dist.kind == "uniform":
        return rng.integers(int(dist.low), int(dist.high) + 1, size=count, dtype=np.int64)
    if dist.kind == "empirical":
        return rng.choice(np.asarray(dist.values, dtype=np.int64), size=count)
    drawn = np.exp(rng.normal(math.log(dist.low), dist.high, size=count))
    return np.clip(np.rint(drawn), 1, units.MAX_TOKENS).astype(np.int64)


def poisson_arrivals_s(rate_per_s: float, *, count: int, rng: np.random.Generator) -> FloatArray:
    """Arrival times of a Poisson process: cumulative sums of exponential gaps of mean 1 / rate (s)."""
    return np.cumsum(rng.exponential(1.0 / rate_per_s, size=count))


def synthetic(
    *, lengths: tuple[LengthDist, LengthDist], count: int, rate_per_s: float | None, seed: int
) -> Workload:
    """Poisson (rate given) or closed-loop workload (rate None; concurrency set by the caller)."""
    rng = np.random.default_rng(seed)
    prompt = sample_lengths(lengths[0], count=count, rng=rng)
    output = sample_lengths(lengths[1], count=count, rng=rng)
    arrivals = None if rate_per_s is None else poisson_arrivals_s(rate_per_s, count=count, rng=rng)
    return Workload(input_tokens=prompt, output_tokens=output, arrival_s=arrivals, concurrency=None)


def read_trace(path: Path, *, flag: str = "--trace") -> Workload:
    """A trace CSV with header arrival_s,input_tokens,output_tokens; rows sorted by arrival on return (a
    note names the first row out of order), each request's file line kept, the arrivals counted from the
    first (a trace of absolute times, e.g. seconds since some epoch, would otherwise add its offset to the
    run's duration and divide the throughput by it)."""
    text = readers.read_text_capped(path, flag=flag, limit_bytes=MAX_TRACE_BYTES)
    rows = csvfiles.csv_reader(io.StringIO(text), where=f"{flag} {path}", header=True)
    header = [cell.strip() for cell in next(rows, [])]
    if tuple(header[:3]) != TRACE_COLUMNS:
        raise DataFileError(
            f"{flag} {path}: bad header (got {','.join(header)[:80]!r}, expected {','.join(TRACE_COLUMNS)})"
        )
    filled = (row for row in rows if any(cell.strip() for cell in row))
    body = list(itertools.islice(filled, MAX_REQUESTS + 1))  # parse no further than one row too many
    if not body or len(body) > MAX_REQUESTS:
        got = "more than " * (len(body) > MAX_REQUESTS) + str(min(len(body), MAX_REQUESTS))
        raise DataFileError(
            f"{flag} {path}: expected 1..{MAX_REQUESTS} requests (got {got} rows after the header)"
        )
    table = np.array([_trace_row(row, where=f"{flag} {path}:{i + 2}") for i, row in enumerate(body)])
    order = np.argsort(table[:, 0], kind="stable")
    return Workload(
        input_tokens=table[order, 1].astype(np.int64),
        output_tokens=table[order, 2].astype(np.int64),
        arrival_s=table[order, 0].astype(np.float64) - float(table[order[0], 0]),
        concurrency=None,
        lines=order + 2,  # the header is line 1
        notes=sorted_note(table[:, 0], where=f"{flag} {path}"),
    )


def sorted_note(arrival_s: FloatArray, *, where: str) -> tuple[str, ...]:
    """The note when the trace's rows are not in arrival order (read_trace sorts them): the first row that
    arrives before the one above it, by file line; empty for a sorted trace."""
    early = np.flatnonzero(np.diff(arrival_s) < 0)
    if not early.size:
        return ()
    line = int(early[0]) + 3  # the later row of the first pair out of order (header: line 1)
    return (
        f"{where}: rows sorted by arrival_s (line {line} arrives at {arrival_s[line - 2]:g} s, before line "
        f"{line - 1}'s {arrival_s[line - 3]:g} s); the records follow arrival order",
    )


def _trace_row(row: list[str], *, where: str) -> tuple[float, float, float]:
    """One validated trace row: arrival >= 0 finite, token counts whole numbers in 1..MAX_TOKENS."""
    try:
        arrival, prompt, output = (float(cell) for cell in row[:3])
    except ValueError:
        raise DataFileError(f"{where}: not three numbers (got {','.join(row)[:80]!r})") from None
    if not 0 <= arrival <= MAX_ARRIVAL_S:
        raise DataFileError(
            f"{where}: arrival_s out of range (got {row[0][:40]!r}, expected 0..{MAX_ARRIVAL_S:g} s)"
        )
    for name, value in (("input_tokens", prompt), ("output_tokens", output)):
        if not (1 <= value <= units.MAX_TOKENS and value == int(value)):
            raise DataFileError(
                f"{where}: {name} must be a whole number in 1..{units.MAX_TOKENS} (got {value:g})"
            )
    return arrival, prompt, output
