"""`kvplan simulate --search`: loads (or P:D splits) searched with full simulations (planner/sim/search.py).

Parse -> call planner.sim.search with a function that simulates one load -> print. Imported by the command
only when --search is given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import typer

from planner import units
from planner.cli import simrequest
from planner.errors import DoesNotFitError, PlanInputError

if TYPE_CHECKING:
    from planner.cli.simrequest import SimulateRequest
    from planner.perf.ranges import SpeedBand
    from planner.sim.metrics import SimSummary
    from planner.sim.search import Load, PdSearchResult, Quantile, SearchKind, SearchResult

MAX_SEARCH_REQUESTS = 20_000  # per simulated point: a search runs ~20 of them
# [measured: 28 P:D splits x 2 000 requests (56 000 simulated) took ~6 s of CPU on the 2-core dev box,
# 2026-12-04]: --search pd simulates every split up to MAX_PD_INSTANCES when none meets the SLOs, so its
# --requests is bounded by that whole search's work, not per point
MAX_PD_SEARCH_WORK_REQUESTS = 40_000
# One simulation: (the command's flags, the load that replaces theirs: rate= / concurrency=) -> its summary.
SummaryAt = Callable[["SimulateRequest", dict[str, Any]], "SimSummary"]
# The TPOT no load can beat, and the context it is at (simulate.tpot_floor_s).
TpotFloor = Callable[["SimulateRequest"], tuple[float, int]]


SEARCHES = simrequest.SEARCHES


def check_requests(requests: int, *, most: int, search: str, per: str) -> None:
    """PlanInputError when --requests is more than `most` per simulated `per` (point, or P:D split)."""
    if requests > most:
        raise PlanInputError(
            f"--requests: too many for {search} (got {requests}, expected <= {most} per {per})"
        )


def run_pd_search(
    flags: SimulateRequest, *, summary_at: SummaryAt, tpot_floor_s: TpotFloor
) -> PdSearchResult:
    """--search pd: the fewest cards (P:D split) meeting the SLOs at --rate (the target)."""
    from planner.sim import search

    splits = search.MAX_PD_INSTANCES * (search.MAX_PD_INSTANCES - 1) // 2
    most = MAX_PD_SEARCH_WORK_REQUESTS // splits
    if flags.rate is None:
        raise PlanInputError(f"--search pd: needs --rate (the target) (got {flags.rate})")
    search_name = f"--search pd, which may simulate all {splits} P:D splits"
    check_requests(flags.requests, most=most, search=search_name, per="split")
    slo = flags.slo_s()
    floor_s, ctx_tokens = tpot_floor_s(flags)
    if slo[1] is not None and slo[1] < floor_s:
        raise DoesNotFitError(
            f"--tpot-ms: no P:D split can meet it (got {flags.tpot_ms:g} ms, expected >= "
            f"{units.fmt_duration(floor_s)}): one request alone on a decode instance (tp={flags.request.tp}) "
            "already "
            f"takes {units.fmt_duration(floor_s)} per output token at its shortest context "
            f"({ctx_tokens} tokens), "
            "and more instances share the load without making a step faster; try a larger --tp, a smaller "
            "--dtype, --mtp or a looser --tpot-ms"
        )
    req = flags.request  # cards of one instance: tp x dp x pp (its DP groups are one instance)
    per_instance = (
        (flags.prefill_tp or req.tp) * (flags.prefill_dp or req.dp) * req.pp,
        req.tp * req.dp * req.pp,
    )

    def run_pd(p: int, d: int) -> SimSummary:
        return summary_at(dataclasses.replace(flags, pd=f"{p}:{d}"), {})

    return search.search_pd(
        run_pd,
        devices_of=lambda p, d: p * per_instance[0] + d * per_instance[1],
        slo=slo,
        quantile=cast("Quantile", flags.quantile),  # checked by run_search
    )


def check_tpot_defined(flags: SimulateRequest) -> None:
    """sim.slo.check_tpot_defined for --output-tokens: --tpot-ms over one-token outputs is an input error."""
    from planner.sim import slo as sim_slo
    from planner.sim import workload as wl

    dist = wl.parse_length(flags.lengths[1], flag="--output-tokens")
    longest = max(dist.values) if dist.values else dist.high
    workload = f"--output-tokens {flags.lengths[1]}"
    sim_slo.check_tpot_defined(flags.slo_s()[1], longest_output_tokens=int(longest), workload=workload)


def run_search(
    flags: SimulateRequest,
    *,
    summary_at: SummaryAt,
    tpot_floor_s: TpotFloor,
    limits: tuple[tuple[float, float], float],
    running_cap: Callable[[], int] | None = None,
) -> SearchResult | PdSearchResult:
    """--search: the largest --rate / --concurrency meeting the SLOs at --quantile, or the knee; the flag's
    own value is the first guess of the top of the range. max-concurrency stops at running_cap() (the
    engine's running limit, as `kvplan serve`'s search: more users only queue)."""
    from planner.sim import search

    kind, quantile = flags.search, flags.quantile
    if kind not in SEARCHES:
        raise PlanInputError(f"--search: unknown (got {kind!r}, expected one of {', '.join(SEARCHES)})")
    if quantile not in ("p95", "p99"):
        raise PlanInputError(f"--quantile: unknown (got {quantile!r}, expected p95 or p99)")
    check_tpot_defined(flags)
    if kind == "pd":
        return run_pd_search(flags, summary_at=summary_at, tpot_floor_s=tpot_floor_s)
    by_rate = kind == "max-rate" or (kind == "knee" and flags.rate is not None)
    top = flags.rate if by_rate else flags.concurrency
    if top is None or flags.trace is not None:
        need = "--rate" if by_rate else "--concurrency"
        raise PlanInputError(
            f"--search {kind}: needs {need} (the first guess of the range's top; the search doubles past it "
            "while the targets hold) and no --trace"
        )
    search_name = "--search, which runs ~20 simulations"
    check_requests(flags.requests, most=MAX_SEARCH_REQUESTS, search=search_name, per="point")
    slo = flags.slo_s()

    def run_at(x: float) -> SimSummary:
        given = {"rate": x, "concurrency": None} if by_rate else {"rate": None, "concurrency": int(x)}
        return summary_at(flags, given)

    # the search stays inside the loads the flag accepts (limits: the --rate range, the most --concurrency),
    # so an error never names a value the user did not type
    floor, ceiling = limits[0] if by_rate else (1.0, limits[1])
    if kind == "max-concurrency" and running_cap is not None:
        ceiling = min(ceiling, float(running_cap()))
    low = max(top / search.RATE_RANGE_FRACTION, floor) if by_rate else 1.0
    load: Load = "rate" if by_rate else "concurrency"
    checked = (cast("SearchKind", kind), cast("Quantile", quantile))  # both checked above
    return search.search(
        run_at, kind=checked[0], slo=slo, quantile=checked[1], span=(load, low, float(top)), ceiling=ceiling
    )


def require_met(found: SearchResult | PdSearchResult) -> None:
    """SloNotMetError (exit 3, as plan, serve and layout) when a max-rate / max-concurrency / pd search
    found nothing meeting the SLOs; a knee always has an answer."""
    from planner.errors import SloNotMetError
    from planner.sim import slo as sim_slo
    from planner.sim.search import PdSearchResult

    if isinstance(found, PdSearchResult):
        if found.best is None:
            raise SloNotMetError(
                f"SLO: no P:D split of up to 8 instances meets the SLOs at {found.quantile} (got "
                f"{len(found.points)} splits simulated, expected one within the targets)"
            )
        return
    if found.kind != "knee":
        sim_slo.require_met(found, what="rate" if found.load == "rate" else "number of users")


def print_pd_search(found: PdSearchResult) -> None:
    """Human table of a P:D search."""
    for p in found.points:
        typer.echo(
            f"  P:D {p.pd:5} ({p.devices} cards): TTFT {found.quantile} {units.fmt_duration(p.ttft_s)}, "
            f"TPOT {units.fmt_tpot(p.tpot_s)} ({'meets' if p.meets_slo else 'misses'} the SLOs)"
        )
    answer = "none up to 8 instances" if found.best is None else f"{found.best} on {found.devices} cards"
    typer.echo(f"pd ({found.quantile}): {answer}")


def print_search(found: SearchResult | PdSearchResult, band: SpeedBand) -> None:
    """Human table of a search: every load (or P:D split) simulated, the answer, the figures' range."""
    from planner.sim.search import PdSearchResult

    if isinstance(found, PdSearchResult):
        print_pd_search(found)
        typer.echo(band_line(band))
        return
    unit = "users" if found.load == "concurrency" else "req/s"
    for p in found.points:
        mark = "meets" if p.meets_slo else "misses"
        typer.echo(
            f"  {p.x:10.4g} {unit}: TTFT {found.quantile} {units.fmt_duration(p.ttft_s)}, "
            f"TPOT {units.fmt_tpot(p.tpot_s)}, "
            f"E2E {units.fmt_duration(p.e2e_s)}, {units.fmt_tokens_per_s(p.output_tokens_per_s)}"
            + (f" ({mark} the SLOs)" if found.slo else "")
        )
    answer = "none meets the SLOs" if found.best is None else f"{found.best:.4g}"
    typer.echo(f"{found.kind} ({found.quantile}): {answer}")
    typer.echo(band_line(band))


def band_line(band: SpeedBand) -> str:
    """Where the searched figures come from and how far each may be off (perf.ranges): times x
    1/high..1/low."""
    from planner.cli.serve_view import factor_text

    extrapolated = ", extrapolated" if band.extrapolated else ""
    return (
        f"speed range ({band.label}{extrapolated}): each figure above may be off by {factor_text(band)}; "
        f"the SLO answer moves with them. Source: {band.source}"
        + "".join(f"\nnote: {n}" for n in search_notes(band))
    )


def search_notes(band: SpeedBand) -> list[str]:
    """The notes under a search's table, the text's `note:` lines and the --json `notes`: the speed band's."""
    return list(band.notes)
