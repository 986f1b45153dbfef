"""Searches over load: the largest rate (or concurrency) whose tail latencies meet the SLOs, and the knee.

Every point is a full simulation (`run_at(x)` -> SimSummary), so a search costs ~15-25 simulations.
- max-rate / max-concurrency: the largest x whose P99 (or P95) TTFT and TPOT meet the SLOs; the upper
  bound doubles while it still meets them, then bisection (rate: 12 halvings; concurrency: integers).
- pd: the P:D split with the fewest cards whose tails meet the SLOs at a target rate (fleets of up to
  MAX_PD_INSTANCES instances, smallest first; among equal card counts the largest goodput).
- knee: the load of largest *power* = output tokens/s / percentile end-to-end latency (Kleinrock's power:
  past it, latency grows faster than throughput) over a geometric sweep.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np

from planner import units
from planner.errors import PlanInputError
from planner.schema import Frozen
from planner.sim.metrics import SimSummary

SearchKind = Literal["max-rate", "max-concurrency", "knee", "pd"]
Quantile = Literal["p95", "p99"]
RATE_HALVINGS = 12  # bisection steps: the answer within 2^-12 of the bracket
MAX_DOUBLINGS = 8
KNEE_POINTS = 12
MAX_PD_INSTANCES = 8  # P + D at most, in the P:D search
RATE_RANGE_FRACTION = 64  # rate searches start at top / 64
Load = Literal["rate", "concurrency"]


class SearchPoint(Frozen):
    """One simulated load: x (requests/s or users) and what it gave."""

    x: float
    ttft_s: float
    tpot_s: float | None  # None: every request generated one token (TPOT is undefined, never meets a target)
    e2e_s: float
    output_tokens_per_s: float
    meets_slo: bool


class SearchResult(Frozen):
    """The answer (best x meeting the SLOs, or the knee) and every point simulated, sorted by x."""

    kind: SearchKind
    load: Load  # x is requests/s (rate) or users (concurrency)
    quantile: Quantile
    slo: dict[str, float] | None
    best: float | None
    points: list[SearchPoint]
    # the --min-user-tps the TPOT target stands for (its 1 / rate was the tighter limit), for the messages
    min_user_tokens_per_s: float | None = None


def meets(summary: SimSummary, *, slo: tuple[float | None, float | None], quantile: Quantile) -> bool:
    """Formula: ttft_q <= ttft_slo and tpot_q <= tpot_slo (an absent SLO always holds; an undefined TPOT,
    every request one token long, never meets a TPOT target)."""
    ttft, tpot = slo
    ok_ttft = ttft is None or getattr(summary.ttft_s, quantile) <= ttft
    tpot_q = quantile_tpot_s(summary, quantile=quantile)
    ok_tpot = tpot is None or (tpot_q is not None and tpot_q <= tpot)
    return bool(ok_ttft and ok_tpot)


def quantile_tpot_s(summary: SimSummary, *, quantile: Quantile) -> float | None:
    """The run's TPOT at `quantile`, None when no request generated a second token (TPOT undefined)."""
    return None if summary.tpot_requests == 0 else float(getattr(summary.tpot_s, quantile))


def point_of(
    x: float, summary: SimSummary, *, slo: tuple[float | None, float | None], quantile: Quantile
) -> SearchPoint:
    """A SearchPoint from a simulation summary at load x."""
    return SearchPoint(
        x=x,
        ttft_s=getattr(summary.ttft_s, quantile),
        tpot_s=quantile_tpot_s(summary, quantile=quantile),
        e2e_s=getattr(summary.e2e_s, quantile),
        output_tokens_per_s=summary.throughput.output_tokens_per_s,
        meets_slo=meets(summary, slo=slo, quantile=quantile),
    )


def largest_meeting(
    run_at: Callable[[float], SimSummary],
    *,
    slo: tuple[float | None, float | None],
    quantile: Quantile,
    bracket: tuple[float, float],
    integer: bool,
    ceiling: float = math.inf,
) -> tuple[float | None, list[SearchPoint]]:
    """Largest x in the (growing) bracket meeting the SLOs, by doubling (never past `ceiling`, the largest
    load the flag accepts) then bisection; None if the low end misses them."""
    if all(limit is None for limit in slo):
        raise PlanInputError("--search: needs an SLO (got none, expected --ttft-ms and/or --tpot-ms)")
    points: list[SearchPoint] = []

    def probe(x: float) -> bool:
        points.append(point_of(x, run_at(x), slo=slo, quantile=quantile))
        return points[-1].meets_slo

    low, high = bracket
    if not probe(low):
        return None, points
    for _ in range(MAX_DOUBLINGS):
        if not probe(high):
            break
        if high >= ceiling:
            return high, points
        low, high = high, min(high * 2, ceiling)
    for _ in range(RATE_HALVINGS):
        if (integer and high - low <= 1) or high == low:
            break
        middle = float((low + high) // 2) if integer else (low + high) / 2
        low, high = (middle, high) if probe(middle) else (low, middle)
    return low, points


def knee(
    run_at: Callable[[float], SimSummary], *, quantile: Quantile, bracket: tuple[float, float], integer: bool
) -> tuple[float, list[SearchPoint]]:
    """The load of largest power = output tok/s / end-to-end latency quantile over a geometric sweep, then
    a second geometric sweep of KNEE_POINTS between the best point's neighbours (rounded to integers for
    users), so the answer is not a coarse grid's point (12 -> 21 -> 34 users)."""

    def sweep(low: float, high: float) -> list[float]:
        grid = np.geomspace(low, high, KNEE_POINTS)
        return sorted({float(round(x)) for x in grid} if integer else {float(x) for x in grid})

    points = {x: point_of(x, run_at(x), slo=(None, None), quantile=quantile) for x in sweep(*bracket)}

    def best() -> float:
        return max(points, key=lambda x: points[x].output_tokens_per_s / points[x].e2e_s)

    xs = sorted(points)
    at = xs.index(best())
    for x in sweep(xs[max(at - 1, 0)], xs[min(at + 1, len(xs) - 1)]):
        if x not in points:
            points[x] = point_of(x, run_at(x), slo=(None, None), quantile=quantile)
    return best(), [points[x] for x in sorted(points)]


def search(
    run_at: Callable[[float], SimSummary],
    *,
    kind: SearchKind,
    slo: tuple[float | None, float | None],
    quantile: Quantile,
    span: tuple[Load, float, float],
    ceiling: float = math.inf,
) -> SearchResult:
    """Run the search `kind` over span = (load, low, first guess of the top): rate or concurrency from low,
    never past `ceiling`."""
    load, bracket = span[0], (span[1], span[2])
    integer = load == "concurrency"
    best: float | None
    if kind == "knee":
        best, points = knee(run_at, quantile=quantile, bracket=bracket, integer=integer)
    else:
        best, points = largest_meeting(
            run_at, slo=slo, quantile=quantile, bracket=bracket, integer=integer, ceiling=ceiling
        )
    limits = {k: v for k, v in zip(("ttft_s", "tpot_s"), slo, strict=True) if v is not None}
    return SearchResult(
        kind=kind,
        load=load,
        quantile=quantile,
        slo=limits or None,
        best=best,
        points=sorted(points, key=lambda p: p.x),
    )


class PdPoint(Frozen):
    """One P:D split at the target rate."""

    pd: str
    devices: int
    ttft_s: float
    tpot_s: float | None  # None: no request generated a second token
    goodput_requests_per_s: float
    meets_slo: bool


class PdSearchResult(Frozen):
    """The split with the fewest cards meeting the SLOs (None if no fleet up to the cap does)."""

    kind: Literal["pd"]
    quantile: Quantile
    slo: dict[str, float]
    best: str | None
    devices: int | None
    points: list[PdPoint]


def search_pd(
    run_pd: Callable[[int, int], SimSummary],
    *,
    devices_of: Callable[[int, int], int],
    slo: tuple[float | None, float | None],
    quantile: Quantile,
) -> PdSearchResult:
    """Splits P:D (P + D <= MAX_PD_INSTANCES) in order of cards; stop after the first card count that has a
    split meeting the SLOs; best = its split of largest goodput."""
    if all(limit is None for limit in slo):
        raise PlanInputError("--search pd: needs an SLO (got none, expected --ttft-ms and/or --tpot-ms)")
    splits = [(p, d) for p in range(1, MAX_PD_INSTANCES) for d in range(1, MAX_PD_INSTANCES + 1 - p)]
    splits.sort(key=lambda pair: (devices_of(*pair), pair))
    points: list[PdPoint] = []
    for p, d in splits:
        if any(q.meets_slo for q in points) and devices_of(p, d) > min(
            q.devices for q in points if q.meets_slo
        ):
            break
        summary = run_pd(p, d)
        points.append(
            PdPoint(
                pd=f"{p}:{d}",
                devices=devices_of(p, d),
                ttft_s=getattr(summary.ttft_s, quantile),
                tpot_s=quantile_tpot_s(summary, quantile=quantile),
                goodput_requests_per_s=summary.goodput_requests_per_s or 0.0,
                meets_slo=meets(summary, slo=slo, quantile=quantile),
            )
        )
    good = [q for q in points if q.meets_slo]
    best = max(good, key=lambda q: q.goodput_requests_per_s) if good else None
    limits = {k: v for k, v in zip(("ttft_s", "tpot_s"), slo, strict=True) if v is not None}
    return PdSearchResult(
        kind="pd",
        quantile=quantile,
        slo=limits,
        best=best.pd if best else None,
        devices=best.devices if best else None,
        points=points,
    )


def slo_text(found: SearchResult) -> str:
    """'p99 TTFT <= 1000 ms, p99 TPOT <= 150 ms'; a TPOT from --min-user-tps says so: 'p99 TPOT <= 50 ms
    (--min-user-tps 20: 1 / that per-user rate)'."""
    names = {"ttft_s": "TTFT", "tpot_s": "TPOT"}
    rate = found.min_user_tokens_per_s
    origin = {"tpot_s": f" (--min-user-tps {rate:g}: 1 / that per-user rate)" if rate is not None else ""}
    return ", ".join(
        f"{found.quantile} {names[k]} <= {_target_ms(v)} ms{origin.get(k, '')}"
        for k, v in (found.slo or {}).items()
    )


def _target_ms(seconds: float) -> str:
    """An SLO target in ms, the unit its flag takes, to 0.01 ms without exponent: '1000', '33.33', '60000'
    (':.4g' printed --ttft-ms 60000 as '6e+04')."""
    return f"{units.s_to_ms(seconds):.2f}".rstrip("0").rstrip(".")
