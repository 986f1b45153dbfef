"""The one SLO answer for a closed loop of users: the most users whose simulated tails meet the targets.

`kvplan serve` (SLOs without --concurrency) and `kvplan simulate --search max-concurrency` both call
`max_users`, which runs planner/sim/search.largest_meeting over K with one full simulation of the
benchmark's closed loop per K (planner/sim/bench.py: prompt I, output O, the engine's own scheduler, its
batch cap and on-demand KV blocks). The targets apply to the `quantile` (p99 default) of TTFT and TPOT as the
simulator measures them; a per-user tokens/s floor is a TPOT ceiling (per-user tok/s = 1 / TPOT).

No K meeting the targets is SloNotMetError (exit 3 everywhere: plan, serve, simulate --search, layout).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from planner import units
from planner.errors import PlanInputError, SloNotMetError
from planner.sim.metrics import SimSummary
from planner.sim.search import Quantile, SearchResult, search, slo_text

DEFAULT_QUANTILE: Quantile = "p99"


def tpot_ceiling_s(tpot_s: float | None, min_user_tokens_per_s: float | None) -> float | None:
    """The TPOT limit both targets impose: min(tpot_s, 1 / min_user_tokens_per_s) (None: no limit)."""
    limits = [t for t in (tpot_s, None if min_user_tokens_per_s is None else 1.0 / min_user_tokens_per_s)]
    given = [t for t in limits if t is not None]
    return min(given) if given else None


def naming_user_rate(
    found: SearchResult, *, tpot_s: float | None, min_user_tokens_per_s: float | None
) -> SearchResult:
    """The search, marked as holding a TPOT target that --min-user-tps set (when 1 / it is at most --tpot-ms:
    tpot_ceiling_s took it), so that its messages name the flag the user typed."""
    if min_user_tokens_per_s is None:
        return found
    if tpot_s is not None and tpot_s < 1.0 / min_user_tokens_per_s:
        return found
    return found.model_copy(update={"min_user_tokens_per_s": min_user_tokens_per_s})


def max_users(
    run_at: Callable[[int], SimSummary],
    *,
    slo: tuple[float | None, float | None],
    top_guess: int,
    quantile: Quantile = DEFAULT_QUANTILE,
    ceiling: int | None = None,
) -> SearchResult:
    """The largest number of closed-loop users whose `quantile` TTFT and TPOT meet slo = (ttft_s, tpot_s).

    run_at(K) simulates K users. Search: K = 1, then top_guess doubling while it meets (never past
    `ceiling`), then bisection on integers (search.largest_meeting). `best` is None when one user already
    misses (see `require_met`).
    """
    top = max(1, top_guess if ceiling is None else min(top_guess, ceiling))
    return search(
        lambda x: run_at(int(x)),
        kind="max-concurrency",
        slo=slo,
        quantile=quantile,
        span=("concurrency", 1.0, float(top)),
        ceiling=math.inf if ceiling is None else float(max(1, ceiling)),
    )


def binding_target(found: SearchResult) -> str:
    """Which target the first load above the answer misses ("ttft", "tpot" or both "ttft+tpot"); "" when
    no simulated load missed (the answer is the search's ceiling)."""
    above = [p for p in found.points if not p.meets_slo and (found.best is None or p.x > found.best)]
    if not above or found.slo is None:
        return ""
    first = min(above, key=lambda p: p.x)
    tails = (("ttft", "ttft_s", first.ttft_s), ("tpot", "tpot_s", first.tpot_s))
    # an undefined TPOT (one-token outputs) misses a TPOT target
    missed = [
        name for name, key, value in tails if key in found.slo and (value is None or value > found.slo[key])
    ]
    return "+".join(missed)


def check_tpot_defined(tpot_s: float | None, *, longest_output_tokens: int, workload: str) -> None:
    """PlanInputError (exit 2) for a TPOT target over requests of one output token: TPOT (the time between
    output tokens) is undefined for them, so no load, and no number of devices, could meet it."""
    if tpot_s is not None and longest_output_tokens <= 1:
        raise PlanInputError(
            f"--tpot-ms / --min-user-tps: a TPOT target needs requests of 2 or more output tokens (got "
            f"{workload}: TPOT is undefined, so no load meets it; lengthen the outputs or drop the target)"
        )


def require_met(found: SearchResult, *, what: str) -> None:
    """SloNotMetError (exit 3) when the search found no load meeting the targets; `what` names the load."""
    if found.best is not None:
        return
    first = found.points[0]
    raise SloNotMetError(
        f"SLO: no {what} meets {slo_text(found)} (got at the lowest load, {first.x:g}: {found.quantile} "
        f"TTFT {units.fmt_duration(first.ttft_s)}, TPOT {units.fmt_tpot(first.tpot_s)}; expected "
        "within the targets); relax them or add devices"
    )
