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
from planner.cli.options import BATCH_FLAGS, PROMPT_FLAGS, REQUESTS_FLAGS
from planner.cli.simrequest import SchedulerFlags, SimulateRequest, check_flag_combinations, input_files
from planner.errors import KvplanError, PlanInputError
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
MAX_BATCH = 5000  # MindIE maxBatchSize range [1, 5000] (facts 1.2); also bounds the step grid
MAX_PASS_TOKENS = 4_194_304  # MindIE maxPrefillTokens range [1, 4194304] (facts 1.2)

LengthOpt = Annotated[
    str, typer.Option(help="Tokens: 1k | uniform:LO:HI | lognormal:MEDIAN:SIGMA | empirical:FILE.")
]


def knob(help_text: str, most: int, *names: str) -> Any:
    """The typer option of an integer scheduler knob: 1..most (the engine's documented range); `names`: its
    flag and aliases (default: from the parameter name)."""
    return typer.Option(*names, min=1, max=most, help=help_text)


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
    seed: Annotated[int, typer.Option(min=0, max=2**63 - 1, help="Random seed (arrivals, lengths).")] = 0,
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
    prefill_tp: Annotated[int | None, prefill_degree("tp")] = None,
    prefill_dp: Annotated[int | None, prefill_degree("dp")] = None,
    prefill_ep: Annotated[int | None, prefill_degree("ep")] = None,
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
            max_batch=max_batch, max_batched_tokens=max_batched_tokens, max_prefill_batch=max_prefill_batch,
            max_prefill_tokens=max_prefill_tokens, select_batch=select_batch,
            prefill_time_ms_per_req=prefill_time_ms_per_req, decode_time_ms_per_req=decode_time_ms_per_req,
            queue_delay_us=queue_delay_us,
        ),
        pd=pd, prefill_tp=prefill_tp, prefill_dp=prefill_dp, prefill_ep=prefill_ep, kv_link_gbps=kv_link_gbps,
        search=search, quantile=quantile,
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
        options.print_json(
            {**head, **result.summary.model_dump(mode="json"), "speed_range": band.model_dump(mode="json")}
        )
        return
    for line in simview.summary_lines(result, label=run_label(flags, model=model), band=band):
        typer.echo(line)


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
        options.print_json(
            {**head, **found.model_dump(mode="json"), "speed_range": band.model_dump(mode="json")}
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

    longest = int((work.input_tokens + work.output_tokens).max())
    if longest > units.MAX_TOKENS:
        raise PlanInputError(
            f"--input-tokens + --output-tokens: longest request too long (got {longest}, "
            f"expected <= {units.MAX_TOKENS})"
        )
    ctx_tokens = longest if flags.ctx is None else inputs.parse_ctx(flags.ctx, flag="--ctx")
    if ctx_tokens < longest:
        raise PlanInputError(
            f"--ctx: shorter than the longest request (got {ctx_tokens}, expected >= {longest}, its input + "
            "output tokens)"
        )
    given = flags.knobs.max_prefill_tokens
    request = records.replace(flags.request, ctx=str(ctx_tokens), max_prefill_tokens=given)
    dep = inputs.workload_deployment(
        request, prompt_tokens=int(work.input_tokens.max()), batched_tokens=flags.knobs.max_batched_tokens
    )
    knobs = scheduler_knobs(flags.knobs)
    if knobs["max_prefill_tokens"] is not None:  # as raised for the plan (MindIE: >= maxInputTokenLen)
        knobs["max_prefill_tokens"] = dep.max_prefill_tokens
    return dep, knobs


def simulate_workload(flags: SimulateRequest, work: Workload) -> tuple[SimResult, Deployment]:
    """One simulation of `work` (aggregated, or disaggregated with --pd) and the deployment prepared for it,
    built once (a search: once per load)."""
    from planner.sim import dpgroups, pdloop, pdspec, run

    dep, knobs = prepared(flags, work)
    slo = flags.slo_s()
    if flags.pd is not None:  # each instance's DP groups are engines of the fleet (pdloop.engines_for)
        simrequest.check_pd_flags(flags)
        layout = pdspec.PrefillLayout(tp=flags.prefill_tp, dp=flags.prefill_dp, ep=flags.prefill_ep)
        counts = pdspec.parse_pd(flags.pd)
        spec = pdspec.spec_for(dep, counts=counts, prefill=layout, link_gbps=flags.kv_link_gbps)
        fleet = pdloop.simulate_fleet(
            spec, work, slo=slo, knobs={k: v for k, v in knobs.items() if v is not None}
        )
        return simview.with_notes(fleet, flags, dep), dep
    if dep.dp > 1:
        return simview.with_notes(dpgroups.simulate_dp(dep, work, slo=slo, knobs=knobs), flags, dep), dep
    cfg = run.default_config(dep, workload=work, **knobs)
    return simview.with_notes(run.simulate(dep, work, cfg=cfg, slo=slo), flags, dep), dep


def inputs_bounded(value: float, flag: str, limits: tuple[float, float]) -> float:
    """planner.inputs.bounded (deferred import)."""
    from planner import inputs

    return inputs.bounded(value, flag, limits)


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


TIME_KNOBS = {
    "prefill_time_ms_per_req": (0, 1000),
    "decode_time_ms_per_req": (0, 1000),
    "queue_delay_us": (0, 1e6),
}


def scheduler_knobs(knobs: SchedulerFlags) -> dict[str, Any]:
    """SchedulerConfig keywords from the flags (None: the engine default); time knobs within MindIE's ranges
    (facts 1.2), NaN refused."""
    for key, limits in TIME_KNOBS.items():
        value = getattr(knobs, key)
        if value is not None:
            inputs_bounded(value, "--" + key.replace("_", "-"), limits)
    prefill_ms, decode_ms = knobs.prefill_time_ms_per_req, knobs.decode_time_ms_per_req
    return {
        "max_batch": knobs.max_batch,
        "max_batched_tokens": knobs.max_batched_tokens,
        "max_prefill_batch": knobs.max_prefill_batch,
        "max_prefill_tokens": knobs.max_prefill_tokens,
        "select_batch": knobs.select_batch,
        "prefill_time_per_req_s": None if prefill_ms is None else prefill_ms * units.MS_S,
        "decode_time_per_req_s": None if decode_ms is None else decode_ms * units.MS_S,
        "queue_delay_s": None if knobs.queue_delay_us is None else knobs.queue_delay_us * units.US_S,
    }


def register(app: typer.Typer) -> None:
    """Add `simulate` to the `kvplan` app."""
    placements = (
        ("requests", ("prefix_cached_fraction",)),
        ("seed", ("ttft_ms", "tpot_ms")),
        (None, LOAD_FLAGS),
    )
    app.command("simulate", cls=flag_command(*placements))(simulate_command)
