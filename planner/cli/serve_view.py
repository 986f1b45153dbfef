"""What `kvplan serve` prints: the simulated closed loop (planner/sim/bench.py) with its tails, the analytic
steady state (planner/serving/closed_loop.py) beside it, the SLO search and the speed range.

--json keeps every key it had (`slo`, `estimate` = the analytic steady state, `speed_range`) and adds
`simulated`: the `kvplan simulate --json` summary of the run (throughput, ttft_s / tpot_s / e2e_s with
mean, p50, p90, p95, p99, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from planner import units

if TYPE_CHECKING:
    from planner.capacity import Admission
    from planner.perf.ranges import SpeedBand
    from planner.serving.estimate import ServingEstimate
    from planner.sim.metrics import SimSummary
    from planner.sim.search import SearchResult


@dataclass(frozen=True)
class ServeView:
    """Everything `kvplan serve` prints: the SLO search (None without SLOs or with --concurrency), the
    analytic estimate and its admission, the simulated run, the speed band, engine and memory fraction."""

    found: SearchResult | None
    estimate: ServingEstimate
    admitted: Admission
    sim: SimSummary
    band: SpeedBand
    engine: str
    memory_fraction: float
    dp: int = 1
    busy_groups: float = 1.0  # DP groups' worth of throughput the users drive (layout.busy_dp_groups)
    cached_prompt_tokens: int = 0  # of each prompt, found in the prefix cache (--prefix-cached-fraction)
    notes: tuple[str, ...] = ()  # what the engine changed of the flags (a raised --max-prefill-tokens)


def slo_lines(found: SearchResult | None, estimate: ServingEstimate) -> list[str]:
    """The SLO search's answer: the most closed-loop users whose simulated tails meet the targets (the run
    below is at that answer, so the two never disagree)."""
    from planner.sim import search as sim_search

    if found is None:
        return []
    where = (
        f"simulated closed loop, {estimate.input_tokens}-token prompts / {estimate.output_tokens} out, "
        f"{estimate.run.arrivals}"
    )
    if found.best is None:
        first = found.points[0]
        return [
            f"SLO search ({where}): no number of users meets {sim_search.slo_text(found)}; at 1 user "
            f"{found.quantile} TTFT {units.fmt_duration(first.ttft_s)}, TPOT {units.fmt_tpot(first.tpot_s)}"
        ]
    # no simulated load missed: the answer is the search's top, what the engine runs at once
    capped = (
        "; more would only queue: the engine runs this many at once"
        if all(p.meets_slo for p in found.points)
        else ""
    )
    return [
        f"SLO search ({where}): {found.best:.0f} users meet {sim_search.slo_text(found)} "
        f"({len(found.points)} simulations; the run below is at {found.best:.0f}{capped})"
    ]


def admission_notes(view: ServeView) -> list[str]:
    """Notes on what the engine does with more users than the pool holds at full length, and the queue."""
    admitted, sim = view.admitted, view.sim
    lines = []
    if admitted.clients > admitted.full_length_batch:
        rate = sim.preemptions / max(sim.requests, 1)
        from planner.engines import registry
        from planner.kinds import parse_engine

        what = registry.beyond_pool_words(
            parse_engine(view.engine), max_batch=sim.scheduler.max_batch, clients=admitted.clients
        )
        holds = (
            "the engine's own batch limit allows"
            if admitted.full_length_bound == "engine limit"
            else f"the KV pool holds (memory fraction {view.memory_fraction:g})"
        )
        lines.append(
            f"at full length ({admitted.full_length_tokens} tokens) {holds} "
            f"{admitted.full_length_batch} sequences and {admitted.clients} users were sent: "
            f"{what}; simulated: batch reached {sim.max_batch_reached}, {sim.preemptions} preemptions "
            f"({rate:.3g} per request), KV peak {units.fmt_fraction(sim.kv_peak_fraction)}"
        )
    if admitted.queued:
        lines.append(
            f"queue: {admitted.queued} of {admitted.clients} users wait for a running slot in the "
            f"analytic steady state (running {admitted.running}); simulated mean in system "
            f"{sim.mean_in_system:.3g}"
        )
    return lines


def tail_lines(sim: SimSummary) -> list[str]:
    """Mean and P50 / P90 / P95 / P99 of TTFT, TPOT and end-to-end latency, one row each; TPOT says so
    when no request generated a second token (it has no sample then, not a TPOT of 0)."""
    lines = []
    for name, p in (("TTFT", sim.ttft_s), ("TPOT", sim.tpot_s), ("E2E", sim.e2e_s)):
        show = partial(units.fmt_duration, unit_of=max(p.mean, p.p50, p.p90, p.p95, p.p99))  # the line's unit
        lines.append(
            f"  {name:4} mean {show(p.mean)}  P50 {show(p.p50)}  P90 {show(p.p90)}  "
            f"P95 {show(p.p95)}  P99 {show(p.p99)}"
        )
    if sim.tpot_requests == 0:
        lines[1] = "  TPOT undefined: every request generated one token (TPOT needs a second one)"
    return lines


def simulated_lines(sim: SimSummary, band: SpeedBand) -> list[str]:
    """The simulated run: throughput with its likely range, per-user speed, tails, goodput."""
    out = sim.throughput.output_tokens_per_s
    lines = [
        f"  simulated ({sim.requests} requests, {sim.scheduler.scheduler} scheduler): output "
        f"{units.fmt_tokens_per_s(out)} (likely {units.fmt_tokens_per_s(band.low_factor * out)} to "
        f"{units.fmt_tokens_per_s(band.high_factor * out)}), "
        f"{per_user_text(None if sim.tpot_requests == 0 else sim.tpot_s.mean)}, "
        f"batch reached {sim.max_batch_reached}, {sim.preemptions} preemptions",
        *tail_lines(sim),
        range_line(sim, band),
    ]
    if sim.goodput_requests_per_s is not None:
        lines.append(
            f"  goodput {sim.goodput_requests_per_s:.3g} requests/s meeting the SLOs "
            f"(of {sim.throughput.requests_per_s:.3g})"
        )
    return lines


def per_user_text(tpot_s: float | None) -> str:
    """'8.6 tok/s per user (1 / TPOT)', or that it is undefined with TPOT (one-token outputs)."""
    if tpot_s is None or tpot_s <= 0:
        return "per-user tok/s undefined (1 / TPOT; one-token outputs)"
    return f"{units.fmt_tokens_per_s(1.0 / tpot_s)} per user (1 / TPOT)"


def range_line(sim: SimSummary, band: SpeedBand) -> str:
    """The simulated output tok/s, mean TTFT and mean TPOT at the ends of the band (perf.ranges)."""
    out = sim.throughput.output_tokens_per_s
    ttft = (sim.ttft_s.mean / band.ttft_high_factor, sim.ttft_s.mean / band.ttft_low_factor)
    tpot = (sim.tpot_s.mean / band.high_factor, sim.tpot_s.mean / band.low_factor)
    return (
        f"  range ({band.label}{', extrapolated' if band.extrapolated else ''}): output "
        f"{units.fmt_span(band.low_factor * out, band.high_factor * out)} tok/s, mean TTFT "
        f"{units.fmt_duration_span(*ttft)} ({band.ttft_source})"
        + ("" if sim.tpot_requests == 0 else f", mean TPOT {units.fmt_duration_span(*tpot)}")
    )


def factor_text(band: SpeedBand) -> str:
    """'TPOT x 0.92-3, TTFT x 0.92-12 (datasheet prefill), tok/s x 0.33-1.1': by what factors each kind of
    figure may be off (times scale by 1 / the band's throughput factors)."""
    tpot = f"{1 / band.high_factor:.2g}-{1 / band.low_factor:.2g}"
    ttft = f"{1 / band.ttft_high_factor:.2g}-{1 / band.ttft_low_factor:.2g}"
    rate = f"{band.low_factor:.2g}-{band.high_factor:.2g}"
    return f"TPOT x {tpot}, TTFT x {ttft} ({band.ttft_source}), tok/s x {rate}"


def estimate_lines(estimate: ServingEstimate, sim: SimSummary) -> list[str]:
    """The analytic steady state (closed_loop.py) and how far the simulation is from it."""
    queued = estimate.concurrency - estimate.running_batch
    gap = sim.throughput.output_tokens_per_s / estimate.output_tokens_per_s - 1.0
    return [
        f"  analytic steady state: output {units.fmt_tokens_per_s(estimate.output_tokens_per_s)} "
        f"(simulated {gap * units.PERCENT:+.1f} %), {per_user_text(estimate.tpot_s)}, "
        f"TTFT {units.fmt_duration(estimate.ttft_s)}, TPOT {units.fmt_tpot(estimate.tpot_s)} "
        f"(means, prefills included), request latency {units.fmt_duration(estimate.request_latency_s)}",
        f"  engine: {estimate.running_batch} running"
        + (f" ({queued} queued)" if queued else "")
        + f", decode step {units.fmt_duration(estimate.decode_step_s)}, prefill passes of "
        f"{estimate.prefill_batch} prompt(s) {units.fmt_duration(estimate.prefill_pass_s)} each "
        f"({units.fmt_fraction(estimate.prefill_time_fraction)} of engine time)",
    ]


def serve_lines(view: ServeView) -> list[str]:
    """Human summary: SLO search, workload, simulated tails, the analytic estimate, notes."""
    estimate, band = view.estimate, view.band
    return [
        *slo_lines(view.found, estimate),
        f"Workload: {estimate.input_tokens} in / {estimate.output_tokens} out, "
        f"concurrency {estimate.concurrency}{group_words(view.dp)} (closed loop, {estimate.run.arrivals}; "
        f"TTFT of a {estimate.input_tokens}-token prompt{cached_words(view.cached_prompt_tokens)}; "
        f"{band.source})",
        *simulated_lines(view.sim, band),
        *estimate_lines(estimate, view.sim),
        *(f"note: {note}" for note in printed_notes(view)),
    ]


def printed_notes(view: ServeView) -> list[str]:
    """The notes under the figures, the text's `note:` lines and the --json `notes`, in this order: what the
    engine does with the users (admission_notes), one DP group's figures (dp_notes), what the engine changed
    of the flags (view.notes) and the speed band's own."""
    return [*admission_notes(view), *dp_notes(view), *view.notes, *view.band.notes]


def group_words(dp: int) -> str:
    """' per DP group (of N)' when the figures below are one of dp groups', else nothing."""
    return f" per DP group (of {dp})" if dp > 1 else ""


def cached_words(cached_tokens: int) -> str:
    """', N of its tokens prefix-cached' when the prefix cache holds part of each prompt, else nothing."""
    return f", {cached_tokens} of its tokens prefix-cached" if cached_tokens else ""


def dp_notes(view: ServeView) -> list[str]:
    """With dp > 1: the figures above are one DP group's (its share of the users); the instance's."""
    if view.dp == 1:
        return []
    est, sim, groups = view.estimate, view.sim, view.busy_groups
    simulated = units.fmt_tokens_per_s(groups * sim.throughput.output_tokens_per_s)
    idle_groups = view.dp - round(groups) if est.concurrency == 1 else 0
    idle = f"; {idle_groups} of the {view.dp} groups without a client" if idle_groups > 0 else ""
    return [
        f"dp={view.dp}: the figures above are one DP group's {est.concurrency} users (identical "
        f"closed loops step together{idle}); instance output {simulated} "
        f"simulated, {units.fmt_tokens_per_s(groups * est.output_tokens_per_s)} analytic"
    ]


def serve_payload(view: ServeView) -> dict[str, Any]:
    """The --json object: `slo` (the search: kind, quantile, slo, best, points; null without one),
    `estimate`, `admission`, `speed_range`, `simulated`, `memory_fraction`, and with a prefix cache
    `prefix_cached_prompt_tokens`."""
    estimate, band = view.estimate, view.band
    return {
        "slo": view.found.model_dump(mode="json") if view.found else None,
        "estimate": estimate.model_dump(mode="json"),
        "admission": view.admitted.model_dump(mode="json"),  # queued, beyond_full_length computed
        "memory_fraction": view.memory_fraction,
        "dp": view.dp,
        "instance_output_tokens_per_s": view.busy_groups * view.estimate.output_tokens_per_s,
        "ttft_prompt_tokens": estimate.input_tokens,
        # only with --prefix-cached-fraction: each prompt's tokens found in the prefix cache
        **({"prefix_cached_prompt_tokens": view.cached_prompt_tokens} if view.cached_prompt_tokens else {}),
        "arrivals": estimate.run.arrivals,
        "speed_range": {
            "source": band.source,
            "output_tokens_per_s_low": band.low_factor * estimate.output_tokens_per_s,
            "output_tokens_per_s_high": band.high_factor * estimate.output_tokens_per_s,
            "label": band.label,
            "ttft_s_low": estimate.ttft_s / band.ttft_high_factor,
            "ttft_s_high": estimate.ttft_s / band.ttft_low_factor,
            # null with one-token outputs (TPOT undefined)
            "tpot_s_low": None if estimate.tpot_s is None else estimate.tpot_s / band.high_factor,
            "tpot_s_high": None if estimate.tpot_s is None else estimate.tpot_s / band.low_factor,
            "ttft_source": band.ttft_source,
            "extrapolated": band.extrapolated,
            "notes": band.notes,
        },
        "simulated": view.sim.model_dump(mode="json"),
        "notes": printed_notes(view),  # the text's `note:` lines, without the word
    }
