"""`kvplan simulate`: request-level simulation of one serving instance (planner/sim/), parse -> run -> print.

kvplan simulate --model M --card C --dtype D [--tp N] [--engine E] (--rate R | --concurrency K | --trace F)
  --input-tokens I --output-tokens O [--requests N] [--seed S] [--ttft-ms X --tpot-ms Y] [--json]
  [--out records.csv [--force]]

This module holds the flags and what runs from the typed request (workload, deployment, scheduler knobs,
the simulation); the request and its flag checks are planner/cli/simrequest.py, the records, timeline
and printed summary planner/cli/simview.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from planner import atomic, kinds, records, units
from planner.cli import options, simrequest, simview
from planner.cli.flags import LOAD_FLAGS, DtypeOpt, EngineCtxOpt, ModelOpt, flag_command
from planner.cli.options import BATCH_FLAGS, PROMPT_FLAGS, REQUESTS_FLAGS, SIM_PREFILL_FLAGS
from planner.cli.simrequest import (
    SEARCHES,
    SchedulerFlags,
    SimulateRequest,
    check_flag_combinations,
    input_files,
)
from planner.errors import DoesNotFitError, KvplanError, PlanInputError
from planner.inputs import DEFAULT_CTX, DEFAULT_DTYPE

if TYPE_CHECKING:
    from planner.deployment import Deployment
    from planner.perf.ranges import SpeedBand
    from planner.sim.instance import SimResult
    from planner.sim.metrics import SimSummary
    from planner.sim.workload import Workload

DEFAULT_REQUESTS = 1000
RATE_RANGE_PER_S = (1e-6, 1e6)  # requests/s: one a fortnight .. far beyond any single instance
MAX_CONCURRENCY = 100_000

LengthOpt = Annotated[
    str, typer.Option(help="Tokens: 1k | uniform:LO:HI | lognormal:MEDIAN:SIGMA | empirical:FILE.")
]
# The scheduler knobs: integers and milliseconds checked in simrequest.check_knobs and scheduler_knobs
BatchKnob = Annotated[
    int | None,
    typer.Option(
        *BATCH_FLAGS,
        help="Running sequences per DP group: MindIE maxBatchSize, vLLM max_num_seqs (default: the engine's, "
        "at most --max-num-batched-tokens on vLLM).",
    ),
]
PrefillKnob = Annotated[
    int | None,
    typer.Option(
        *SIM_PREFILL_FLAGS,
        help="The engine's prefill budget, as the plan's: MindIE maxPrefillTokens (>= the longest prompt), "
        "vLLM --max-num-batched-tokens and SGLang --chunked-prefill-size (longer prompts are chunked); "
        "default: the engine's.",
    ),
]
SEARCH_HELP = f"Search: {', '.join(SEARCHES[:-1])} or {SEARCHES[-1]} (the P:D split, with SLOs)."
MsKnob = Annotated[float | None, typer.Option(help="MindIE's, with --select-batch: 0..1000 ms.")]


def prefill_degree(degree: str) -> Any:
    """The typer option of one parallel degree of each --pd prefill instance (pdspec.PrefillLayout), which
    defaults to the deployment's (--tp, --dp, --ep)."""
    return typer.Option(help=f"--pd: {degree} of each prefill instance (default --{degree}).")


def simulate_command(
    context: typer.Context,
    model: ModelOpt,
    dtype: DtypeOpt = DEFAULT_DTYPE,
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
    seed: Annotated[int, typer.Option(help="Random seed (arrivals, lengths).")] = 0,
    max_batch: BatchKnob = None,
    max_prefill_tokens: PrefillKnob = None,
    max_prefill_batch: Annotated[int | None, typer.Option(help="MindIE maxPrefillBatchSize.")] = None,
    select_batch: Annotated[bool, typer.Option("--select-batch", help="MindIE supportSelectBatch.")] = False,
    prefill_time_ms_per_req: MsKnob = None,
    decode_time_ms_per_req: MsKnob = None,
    queue_delay_us: Annotated[
        float | None, typer.Option(help="MindIE maxQueueDelayMicroseconds: 0..1000000.")
    ] = None,
    pd: Annotated[str | None, typer.Option(help="P:D prefill and decode instances (disaggregated).")] = None,
    prefill_tp: Annotated[int | None, prefill_degree("tp")] = None,
    prefill_dp: Annotated[int | None, prefill_degree("dp")] = None,
    prefill_ep: Annotated[int | None, prefill_degree("ep")] = None,
    kv_link_gbps: Annotated[
        float | None, typer.Option(help="--pd: KV link GB/s per device (default: card).")
    ] = None,
    search: Annotated[str | None, typer.Option(help=SEARCH_HELP)] = None,
    quantile: Annotated[str, typer.Option(help="Tail the SLOs apply to in --search: p99 or p95.")] = "p99",
    out: Annotated[Path | None, typer.Option(help="Write per-request records (CSV) here.")] = None,
    timeline_out: Annotated[
        Path | None, typer.Option(help="Write queue length, batch and KV use over time (CSV) here.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists (keeps .bak).")] = False,
    ctx_len: EngineCtxOpt = None,
) -> None:
    """Simulate serving under load: `kvplan simulate -m qwen3-27b --dtype fp8 --rate 4 --ttft-ms 1000`."""
    flags = SimulateRequest(
        # the scheduler's --max-prefill-tokens sizes the deployment later, with the workload (prepared())
        request=options.plan_request(context, max_prefill_tokens=None, ctx=DEFAULT_CTX),
        ctx=ctx_len,
        rate=rate, concurrency=concurrency, trace=trace, lengths=(input_tokens, output_tokens),
        requests=requests, seed=seed, ttft_ms=context.params["ttft_ms"], tpot_ms=context.params["tpot_ms"],
        knobs=SchedulerFlags(
            max_batch=max_batch, max_prefill_batch=max_prefill_batch, max_prefill_tokens=max_prefill_tokens,
            select_batch=select_batch,
            prefill_time_ms_per_req=prefill_time_ms_per_req, decode_time_ms_per_req=decode_time_ms_per_req,
            queue_delay_us=queue_delay_us,
        ),
        pd=pd, prefill_tp=prefill_tp, prefill_dp=prefill_dp, prefill_ep=prefill_ep, kv_link_gbps=kv_link_gbps,
        search=search, quantile=quantile, typed=typed_params(context),
    )  # fmt: skip
    try:
        check_flag_combinations(flags, out=out, timeline_out=timeline_out)
        atomic.check_new(
            {"--out": out, "--timeline-out": timeline_out}, force=force, inputs=input_files(flags)
        )
    except KvplanError as exc:
        options.fail(exc)
    request, as_json = flags.request, options.wants_json(context)
    head = {"model": model, "card": request.card, "engine": request.engine, "pd": pd}
    if search is not None:
        search_and_report(flags, head=head, as_json=as_json)
        return
    try:
        result, dep = run_simulation(flags)
        simview.write_outputs(result, records=out, timeline=timeline_out, force=force)
        band = speed_band_of(flags, dep, batch=result.summary.max_batch_reached)
    except KvplanError as exc:
        options.fail(exc)
    if as_json:
        summary = result.summary.model_dump(mode="json")
        notes = simview.printed_notes(result.summary, band)  # the text's note: lines
        options.print_json({**head, **summary, "speed_range": band.model_dump(mode="json"), "notes": notes})
        return
    for line in simview.summary_lines(result, label=run_label(flags, model=model), band=band):
        typer.echo(line)


def typed_params(context: typer.Context) -> frozenset[str]:
    """The parameters given on the command line (not defaults): simrequest.check_trace_flags reads them."""
    sources = ((name, context.get_parameter_source(name)) for name in context.params)
    return frozenset(name for name, source in sources if source is not None and source.name == "COMMANDLINE")


def run_label(flags: SimulateRequest, *, model: str) -> str:
    """The summary's first words: the model, card, layout and --pd split as the flags gave them."""
    request = flags.request
    degrees = (request.tp, request.dp, request.ep, request.pp)
    prefill = (flags.prefill_tp, flags.prefill_dp, flags.prefill_ep)
    return simview.simulation_label(model, card=request.card, pd=flags.pd, degrees=degrees, prefill=prefill)


def search_and_report(flags: SimulateRequest, *, head: dict[str, Any], as_json: bool) -> None:
    """--search: the loads simulated and the answer, printed as JSON (after `head`) or a table; exit 3 when
    no load meets the SLOs (simsearch.require_met)."""
    from planner.cli import simsearch

    try:
        found = simsearch.run_search(
            flags,
            summary_at=summary_at,
            tpot_floor_s=tpot_floor_s,
            limits=(RATE_RANGE_PER_S, float(MAX_CONCURRENCY)),
            running_cap=lambda: running_cap_of(flags),
        )
        band = speed_band_of(flags, prepared(flags, workload_of(flags))[0], batch=None)
    except KvplanError as exc:
        options.fail(exc)
    if as_json:
        notes = simsearch.search_notes(band)  # the text's note: lines
        options.print_json(
            {
                **head,
                **found.model_dump(mode="json"),
                "speed_range": band.model_dump(mode="json"),
                "notes": notes,
            }
        )
    else:
        simsearch.print_search(found, band)
    try:
        simsearch.require_met(found)
    except KvplanError as exc:
        options.fail(exc)


def build_workload(
    *,
    rate: float | None,
    concurrency: int | None,
    trace: Path | None,
    lengths: tuple[str, str],
    shape: tuple[int, int],
) -> Workload:
    """The workload from the flags (exactly one of --rate, --concurrency, --trace); shape: requests, seed."""
    from planner import inputs
    from planner.sim import workload as wl

    chosen = [
        flag
        for flag, v in (("--rate", rate), ("--concurrency", concurrency), ("--trace", trace))
        if v is not None
    ]
    if len(chosen) != 1:
        raise PlanInputError(
            f"--rate/--concurrency/--trace: give exactly one (got {', '.join(chosen) or 'none'})"
        )
    if trace is not None:
        return wl.read_trace(trace)
    requests, seed = shape
    if not 1 <= requests <= wl.MAX_REQUESTS:
        raise PlanInputError(f"--requests: out of range (got {requests}, expected 1..{wl.MAX_REQUESTS})")
    dists = (
        wl.parse_length(lengths[0], flag="--input-tokens"),
        wl.parse_length(lengths[1], flag="--output-tokens"),
    )
    if rate is not None:
        inputs.positive(rate, "--rate")
        checked = inputs.bounded(rate, "--rate", RATE_RANGE_PER_S)
        return wl.synthetic(lengths=dists, count=requests, rate_per_s=checked, seed=seed)
    if concurrency is None or not 1 <= concurrency <= MAX_CONCURRENCY:
        raise PlanInputError(
            f"--concurrency: out of range (got {concurrency}, expected 1..{MAX_CONCURRENCY})"
        )
    # a closed loop of K users sends at least K requests (each user one), else fewer users than asked run
    closed = wl.synthetic(lengths=dists, count=max(requests, concurrency), rate_per_s=None, seed=seed)
    return wl.Workload(closed.input_tokens, closed.output_tokens, arrival_s=None, concurrency=concurrency)


def tpot_floor_s(flags: SimulateRequest) -> tuple[float, int]:
    """(TPOT of one request alone on a decode instance at the workload's shortest prompt, that prompt + 1):
    no load or P:D split gives a lower TPOT, since more instances share requests without making a step
    faster.

    Formula: floor = mtp.tpot_s(decode_step_s(batch 1, ctx = shortest prompt + 1)) (MTP: > 1 token a step)
    """
    from planner.perf import mtp, roofline

    work = workload_of(flags)
    dep, _ = prepared(flags, work)
    ctx_tokens = int(work.input_tokens.min()) + 1
    step_s = roofline.decode_step_s(dep, batch=1, ctx_tokens=ctx_tokens)
    return mtp.tpot_s(step_s, tokens_per_step=mtp.tokens_per_step(dep)), ctx_tokens


def speed_band_of(flags: SimulateRequest, dep: Deployment, *, batch: int | None) -> SpeedBand:
    """Source and range of the simulated figures (ranges.speed_band) on the flags' deployment `dep` at
    `batch` and the longest request; batch None (a search): the largest batch it can run, the memory limit
    capped by --max-batch and by --concurrency."""
    from planner import capacity
    from planner.perf import ranges

    if batch is None:
        caps = [capacity.memory_plan(dep)[1].max_batch_size, flags.knobs.max_batch, flags.concurrency]
        batch = min(cap for cap in caps if cap is not None)
    return ranges.speed_band(dep, batch=max(1, batch), ctx_tokens=dep.ctx_tokens)


def prepared(flags: SimulateRequest, work: Workload) -> tuple[Deployment, dict[str, Any]]:
    """The deployment at ctx = --ctx (default: the longest request; never shorter), built once with its
    prefill budget for the workload's longest prompt (inputs.workload_deployment), and the scheduler knobs."""
    from planner import inputs
    from planner.engines import registry
    from planner.sim import config

    longest, source = longest_request(flags, work)
    if longest > units.MAX_TOKENS:
        raise PlanInputError(
            f"{source}: longest request too long (got {longest}, expected <= {units.MAX_TOKENS})"
        )
    ctx_tokens = longest if flags.ctx is None else inputs.parse_ctx(flags.ctx, flag="--ctx")
    if ctx_tokens < longest:
        raise PlanInputError(
            f"--ctx: shorter than the longest request (got {ctx_tokens}, expected >= {longest}, its input + "
            "output tokens)"
        )
    given = flags.knobs.max_prefill_tokens
    request = records.replace(flags.request, ctx=str(ctx_tokens), max_prefill_tokens=given)
    dep = inputs.workload_deployment(request, prompt_tokens=int(work.input_tokens.max()))
    registry.check_batch_cap(dep, batch=flags.knobs.max_batch, flag="--max-batch")
    chunks = config.chunks_prompts(registry.scheduler_for(dep))
    return dep, simrequest.scheduler_knobs(flags.knobs, budget=dep.max_prefill_tokens, chunks=chunks)


def longest_request(flags: SimulateRequest, work: Workload) -> tuple[int, str]:
    """(input + output tokens of the workload's longest request, what gave it: `--trace FILE:LINE`, its
    first such row, else `--input-tokens + --output-tokens`)."""
    total = work.input_tokens + work.output_tokens
    at = int(total.argmax())
    if work.lines is None:
        return int(total[at]), "--input-tokens + --output-tokens"
    return int(total[at]), f"--trace {flags.trace}:{int(work.lines[at])}"


def simulate_workload(flags: SimulateRequest, work: Workload) -> tuple[SimResult, Deployment]:
    """One simulation of `work` (aggregated, or disaggregated with --pd) and the deployment prepared for it,
    built once (a search: once per load), with the notes of what the run changed (simview.with_notes). A
    trace that does not fit names the file line of its longest request, which sizes the deployment."""
    try:
        dep, knobs = prepared(flags, work)
        result = simulate_prepared(flags, work, dep=dep, knobs=knobs)
    except DoesNotFitError as exc:
        if work.lines is None:
            raise
        longest, source = longest_request(flags, work)
        raise DoesNotFitError(f"{source}: its {longest}-token request sizes the deployment: {exc}") from None
    return simview.with_notes(result, flags, dep, read=work.notes), dep


def simulate_prepared(
    flags: SimulateRequest, work: Workload, *, dep: Deployment, knobs: dict[str, Any]
) -> SimResult:
    """The simulation of `work` on the prepared deployment: a P:D fleet (--pd), DP groups, or one engine."""
    from planner.sim import dpgroups, pdloop, pdspec, run

    slo = flags.slo_s()
    if flags.pd is not None:  # each instance's DP groups are engines of the fleet (pdloop.engines_for)
        simrequest.check_pd_flags(flags)
        layout = pdspec.PrefillLayout(tp=flags.prefill_tp, dp=flags.prefill_dp, ep=flags.prefill_ep)
        counts = pdspec.parse_pd(flags.pd)
        spec = pdspec.spec_for(dep, counts=counts, prefill=layout, link_gbps=flags.kv_link_gbps)
        return pdloop.simulate_fleet(
            spec, work, slo=slo, knobs={k: v for k, v in knobs.items() if v is not None}
        )
    if dep.dp > 1:
        return dpgroups.simulate_dp(dep, work, slo=slo, knobs=knobs)
    return run.simulate(dep, work, cfg=run.default_config(dep, workload=work, **knobs), slo=slo)


def running_cap_of(flags: SimulateRequest) -> int:
    """The instance's running limit for the flags' deployment: --max-batch, else the engine's default per
    DP group (bench.engine_cap), times dp."""
    from planner.sim import bench

    dep, _ = prepared(flags, workload_of(flags, rate=None, concurrency=1, trace=None))
    return bench.engine_cap(dep, max_batch=flags.knobs.max_batch) * dep.dp


def summary_at(flags: SimulateRequest, load: dict[str, Any]) -> SimSummary:
    """The summary of one simulation of the flags with `load` (rate= / concurrency=) replacing theirs."""
    return simulate_workload(flags, workload_of(flags, **load))[0].summary


def run_simulation(flags: SimulateRequest) -> tuple[SimResult, Deployment]:
    """Workload from the flags -> the simulation and its deployment (each built once)."""
    return simulate_workload(flags, workload_of(flags))


def workload_of(flags: SimulateRequest, **load: Any) -> Workload:
    """The flags' workload; `load` (rate= or concurrency=) replaces theirs (searches)."""
    values = {"rate": flags.rate, "concurrency": flags.concurrency, "trace": flags.trace, **load}
    return build_workload(
        rate=values["rate"],
        concurrency=values["concurrency"],
        trace=values["trace"],
        lengths=flags.lengths,
        shape=(flags.requests, flags.seed),
    )


def register(app: typer.Typer) -> None:
    """Add `simulate` to the `kvplan` app."""
    placements = (
        ("requests", ("prefix_cached_fraction",)),
        ("seed", ("ttft_ms", "tpot_ms")),
        (None, LOAD_FLAGS),
    )
    app.command("simulate", cls=flag_command(*placements))(simulate_command)
