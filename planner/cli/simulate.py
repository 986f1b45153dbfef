"""`kvplan simulate`: request-level simulation of one serving instance (planner/sim/), parse -> run -> print.

kvplan simulate --model M --card C --dtype D [--tp N] [--engine E] (--rate R | --concurrency K | --trace F)
  --input-tokens I --output-tokens O [--requests N] [--seed S] [--ttft-ms X --tpot-ms Y] [--json]
  [--out records.csv [--force]]

This module holds the flags, their checks and the printed / written outputs; what runs from the typed
request (workload, deployment, scheduler knobs, the simulation) is planner/cli/simrun.py.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from planner import atomic, kinds, units
from planner.cli import options, simrun
from planner.cli.options import (
    BATCH_FLAGS,
    DEFAULT_CARD,
    DEFAULT_DTYPE,
    DEFAULT_ENGINE,
    DEFAULT_MTP_ACCEPTANCE_FRACTION,
    PROMPT_FLAGS,
    REQUESTS_FLAGS,
    AcceptanceOpt,
    CardOpt,
    DpOpt,
    EngineOpt,
    EpOpt,
    FlagCommand,
    JsonOpt,
    KvDtypeOpt,
    MemoryOpt,
    ModelOpt,
    MtpOpt,
    NodeSizeOpt,
    NodesOpt,
    PpOpt,
    RedundantOpt,
    TpOpt,
    UncalibratedOpt,
)
from planner.cli.simrequest import SchedulerFlags, SimulateRequest
from planner.errors import KvplanError, PlanInputError

if TYPE_CHECKING:
    from planner.perf.ranges import SpeedBand
    from planner.sim.instance import SimResult
    from planner.sim.metrics import SimSummary

DEFAULT_REQUESTS = 1000
CSV_COLUMNS = (
    "request",
    "arrival_s",
    "input_tokens",
    "output_tokens",
    "first_token_s",
    "finish_s",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "preemptions",
)
MAX_BATCH = 5000  # MindIE maxBatchSize range [1, 5000] (facts 1.2); also bounds the step grid
MAX_PASS_TOKENS = 4_194_304  # MindIE maxPrefillTokens range [1, 4194304] (facts 1.2)

LengthOpt = Annotated[
    str, typer.Option(help="Tokens: 1k | uniform:LO:HI | lognormal:MEDIAN:SIGMA | empirical:FILE.")
]


def knob(help_text: str, most: int, *names: str) -> Any:
    """The typer option of an integer scheduler knob: 1..most (the engine's documented range); `names`: its
    flag and aliases (default: from the parameter name)."""
    return typer.Option(*names, min=1, max=most, help=help_text)


def records_csv(result: SimResult) -> str:
    """One row per request, SI units."""
    rec = result.records
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    columns = (
        rec.arrival_s, rec.input_tokens, rec.output_tokens, rec.first_token_s, rec.finish_s,
        rec.ttft_s, rec.tpot_s, rec.e2e_s, rec.preemptions,
    )  # fmt: skip
    for index, row in enumerate(zip(*(c.tolist() for c in columns), strict=True)):
        writer.writerow((index, *(f"{v:.6g}" if isinstance(v, float) else v for v in row)))
    return buffer.getvalue()


TIMELINE_COLUMNS = ("time_s", "in_system", "waiting", "batch", "kv_used_fraction")


def timeline_csv(result: SimResult) -> str:
    """The engine's state over time (downsampled to at most 2000 events; decode instance 0 under --pd)."""
    from planner.sim import metrics

    line = metrics.downsampled(result.timeline)
    kv = line.used_blocks / result.summary.scheduler.total_blocks
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(TIMELINE_COLUMNS)
    rows = zip(line.time_s.tolist(), line.in_system.tolist(), line.waiting.tolist(), line.batch.tolist(),
               kv.tolist(), strict=True)  # fmt: skip
    writer.writerows((f"{t:.6g}", n, w, b, f"{k:.4g}") for t, n, w, b, k in rows)
    return buffer.getvalue()


def write_outputs(result: SimResult, *, records: Path | None, timeline: Path | None, force: bool) -> None:
    """--out and --timeline-out, each atomic and never over an existing file without --force."""
    if records is not None:
        atomic.write_atomic(records, records_csv(result), force=force)
    if timeline is not None:
        atomic.write_atomic(timeline, timeline_csv(result), force=force)


def summary_lines(result: SimResult, *, label: str, band: SpeedBand) -> list[str]:
    """Human summary: throughput, latency percentiles, their range, batch, preemptions, goodput, notes."""
    from planner.cli.serve_view import range_line, tail_lines

    s = result.summary
    lines = [
        f"{label}: {s.requests} requests in {s.duration_s:.1f} s ({s.scheduler.scheduler} scheduler, "
        f"{band.source})",
        f"  throughput {units.fmt_tokens_per_s(s.throughput.output_tokens_per_s)} output, "
        f"{s.throughput.requests_per_s:.3g} requests/s; mean in system {s.mean_in_system:.3g}",
    ]
    lines.extend(tail_lines(s))
    lines.append(
        f"  batch reached {s.max_batch_reached} (cap {s.scheduler.max_batch}), KV peak "
        f"{units.fmt_fraction(s.kv_peak_fraction)} of {s.scheduler.total_blocks} blocks, "
        f"{s.preemptions} preemptions"
    )
    lines.append(range_line(s, band))
    lines.append(verdict_line(s))
    if s.goodput_requests_per_s is not None:
        lines.append(f"  goodput {s.goodput_requests_per_s:.3g} requests/s meeting the SLOs")
    return lines + [f"note: {note}" for note in band.notes]


def verdict_line(s: SimSummary) -> str:
    """'verdict: overloaded ...' when the queue grows without bound (metrics.overload), else 'stable'."""
    if s.overloaded:
        return (
            f"  verdict: OVERLOADED: the queue grows without bound ({s.backlog_at_last_arrival} of "
            f"{s.requests} requests still in the system at the last arrival, TTFT growing with arrival "
            "time); the tails above grow with --requests: lower --rate or add capacity"
        )
    return f"  verdict: stable ({s.backlog_at_last_arrival} requests in the system at the last arrival)"


def simulate_command(
    context: typer.Context,
    model: ModelOpt,
    dtype: Annotated[str, typer.Option(help="Weight dtype.")] = DEFAULT_DTYPE,
    rate: Annotated[float | None, typer.Option(help="Poisson arrivals per second.")] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Closed loop: users, each sends on completion.")
    ] = None,
    trace: Annotated[Path | None, typer.Option(help="CSV arrival_s,input_tokens,output_tokens.")] = None,
    input_tokens: Annotated[
        str,
        typer.Option(
            *PROMPT_FLAGS, help="Prompt tokens: 1k | uniform:LO:HI | lognormal:MEDIAN:SIGMA | empirical:FILE."
        ),
    ] = str(kinds.DEFAULT_INPUT_TOKENS),
    output_tokens: LengthOpt = str(kinds.DEFAULT_OUTPUT_TOKENS),
    requests: Annotated[int, typer.Option(*REQUESTS_FLAGS, help="Requests to simulate.")] = DEFAULT_REQUESTS,
    seed: Annotated[int, typer.Option(min=0, max=2**63 - 1, help="Random seed (arrivals, lengths).")] = 0,
    ttft_ms: Annotated[float | None, typer.Option(help="SLO: time to first token (ms).")] = None,
    tpot_ms: Annotated[float | None, typer.Option(help="SLO: time per output token (ms).")] = None,
    max_batch: Annotated[
        int | None, knob("maxBatchSize / max_num_seqs (default: plan).", MAX_BATCH, *BATCH_FLAGS)
    ] = None,
    max_batched_tokens: Annotated[
        int | None,
        knob(
            "vLLM max_num_batched_tokens.",
            MAX_PASS_TOKENS,
            "--max-batched-tokens",
            "--max-num-batched-tokens",
        ),
    ] = None,
    max_prefill_batch: Annotated[int | None, knob("MindIE maxPrefillBatchSize.", MAX_BATCH)] = None,
    max_prefill_tokens: Annotated[int | None, knob("MindIE maxPrefillTokens.", MAX_PASS_TOKENS)] = None,
    select_batch: Annotated[bool, typer.Option("--select-batch", help="MindIE supportSelectBatch.")] = False,
    prefill_time_ms_per_req: Annotated[float | None, typer.Option(min=0, max=1000)] = None,
    decode_time_ms_per_req: Annotated[float | None, typer.Option(min=0, max=1000)] = None,
    queue_delay_us: Annotated[
        float | None, typer.Option(min=0, max=1_000_000, help="maxQueueDelayMicroseconds.")
    ] = None,
    pd: Annotated[str | None, typer.Option(help="P:D prefill and decode instances (disaggregated).")] = None,
    prefill_tp: Annotated[
        int | None, typer.Option(help="--pd: tp of each prefill instance (default --tp).")
    ] = None,
    kv_link_gbps: Annotated[
        float | None, typer.Option(help="--pd: KV link GB/s per device (default: card).")
    ] = None,
    search: Annotated[str | None, typer.Option(help="max-rate, max-concurrency or knee.")] = None,
    quantile: Annotated[str, typer.Option(help="Tail the SLOs apply to in --search: p99 or p95.")] = "p99",
    out: Annotated[Path | None, typer.Option(help="Write per-request records (CSV) here.")] = None,
    timeline_out: Annotated[
        Path | None, typer.Option(help="Write queue length, batch and KV use over time (CSV) here.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists (keeps .bak).")] = False,
    card: CardOpt = DEFAULT_CARD,
    kv_dtype: KvDtypeOpt = None,
    tp: TpOpt = 1,
    mtp: MtpOpt = 0,
    mtp_acceptance: AcceptanceOpt = DEFAULT_MTP_ACCEPTANCE_FRACTION,
    memory_gib: MemoryOpt = None,
    uncalibrated: UncalibratedOpt = False,
    engine: EngineOpt = DEFAULT_ENGINE,
    as_json: JsonOpt = False,
    memory_fraction: options.EngineFractionOpt = None,
    dp: DpOpt = 1,
    ep: EpOpt = 1,
    pp: PpOpt = 1,
    nodes: NodesOpt = None,
    devices_per_node: NodeSizeOpt = None,
    redundant_experts: RedundantOpt = 0,
) -> None:
    """Simulate serving under load: `kvplan simulate -m qwen3-27b --dtype fp8 --rate 4 --ttft-ms 1000`."""
    flags = SimulateRequest(
        # the scheduler's --max-prefill-tokens sizes the deployment later, with the workload (simrun.prepared)
        request=options.plan_request(context, max_prefill_tokens=None),
        rate=rate, concurrency=concurrency, trace=trace, lengths=(input_tokens, output_tokens),
        requests=requests, seed=seed, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
        knobs=SchedulerFlags(
            max_batch=max_batch, max_batched_tokens=max_batched_tokens, max_prefill_batch=max_prefill_batch,
            max_prefill_tokens=max_prefill_tokens, select_batch=select_batch,
            prefill_time_ms_per_req=prefill_time_ms_per_req, decode_time_ms_per_req=decode_time_ms_per_req,
            queue_delay_us=queue_delay_us,
        ),
        pd=pd, prefill_tp=prefill_tp, kv_link_gbps=kv_link_gbps, search=search, quantile=quantile,
    )  # fmt: skip
    try:
        check_flag_combinations(flags, out=out, timeline_out=timeline_out)
        atomic.check_new(
            {"--out": out, "--timeline-out": timeline_out}, force=force, inputs=input_files(flags)
        )
    except KvplanError as exc:
        options.fail(exc)
    head = {"model": model, "card": card, "engine": engine, "pd": pd}
    if search is not None:
        search_and_report(flags, head=head, as_json=as_json)
        return
    try:
        result = simrun.run_simulation(flags)
        write_outputs(result, records=out, timeline=timeline_out, force=force)
        band = simrun.speed_band_of(flags, batch=result.summary.max_batch_reached)
    except KvplanError as exc:
        options.fail(exc)
    if as_json:
        options.print_json(
            {**head, **result.summary.model_dump(mode="json"), "speed_range": band.model_dump(mode="json")}
        )
        return
    label = simulation_label(model, card=card, pd=pd, degrees=(tp, dp, ep, pp))
    for line in summary_lines(result, label=label, band=band):
        typer.echo(line)


def search_and_report(flags: SimulateRequest, *, head: dict[str, Any], as_json: bool) -> None:
    """--search: the loads simulated and the answer, printed as JSON (after `head`) or a table; exit 3 when
    no load meets the SLOs (simsearch.require_met)."""
    from planner.cli import simsearch

    try:
        found = simsearch.run_search(
            flags,
            summary_at=simrun.summary_at,
            tpot_floor_s=simrun.tpot_floor_s,
            limits=(simrun.RATE_RANGE_PER_S, float(simrun.MAX_CONCURRENCY)),
        )
        band = simrun.speed_band_of(flags, batch=None)
    except KvplanError as exc:
        options.fail(exc)
    if as_json:
        options.print_json(
            {**head, **found.model_dump(mode="json"), "speed_range": band.model_dump(mode="json")}
        )
    else:
        simsearch.print_search(found, band)
    try:
        simsearch.require_met(found)
    except KvplanError as exc:
        options.fail(exc)


def simulation_label(model: str, *, card: str, pd: str | None, degrees: tuple[int, int, int, int]) -> str:
    """'MODEL on CARD, <layout.describe>[, P:D p:d]': the summary's heading (degrees: tp, dp, ep, pp)."""
    from planner import layout
    from planner.degrees import Degrees

    tp, dp, ep, pp = degrees
    parallel = layout.describe(Degrees(tp=tp, dp=dp, ep=ep, pp=pp))
    return f"{model} on {card}, {parallel}" + (f", P:D {pd}" if pd else "")


def check_flag_combinations(flags: SimulateRequest, *, out: Path | None, timeline_out: Path | None) -> None:
    """A flag that this run would not use is an error, never silently ignored."""
    if flags.search is not None:
        for flag, path in (("--out", out), ("--timeline-out", timeline_out)):
            if path is not None:
                raise PlanInputError(
                    f"{flag}: not written with --search (got {flag} {path}, expected no {flag}); "
                    f"simulate the rate --search finds to get its records"
                )
    if flags.pd is None:
        for flag, value in (("--prefill-tp", flags.prefill_tp), ("--kv-link-gbps", flags.kv_link_gbps)):
            if value is not None:
                raise PlanInputError(
                    f"{flag}: only used with --pd (got {flag} {value} without --pd, expected --pd P:D too)"
                )


def input_files(flags: SimulateRequest) -> dict[str, Path | None]:
    """The files this run reads (flag -> path): no output may replace one of them."""
    files: dict[str, Path | None] = {"--trace": flags.trace}
    for flag, value in zip(("--input-tokens", "--output-tokens"), flags.lengths, strict=True):
        if value.startswith("empirical:"):
            files[flag] = Path(value.removeprefix("empirical:"))
    return files


def register(app: typer.Typer) -> None:
    """Add `simulate` to the `kvplan` app."""
    app.command("simulate", cls=FlagCommand)(simulate_command)
