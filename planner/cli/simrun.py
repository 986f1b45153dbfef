"""What `kvplan simulate` runs, from its typed request (planner/cli/simrequest.py): the workload, the
deployment sized for its longest request, the scheduler knobs, and one simulation (aggregated, --dp groups or
a --pd fleet). planner/cli/simulate.py parses the flags and prints; planner/cli/simsearch.py searches with
summary_at and tpot_floor_s.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner import records, units
from planner.cli import options
from planner.cli.simrequest import SchedulerFlags, SimulateRequest
from planner.errors import PlanInputError

if TYPE_CHECKING:
    from planner.deployment import Deployment
    from planner.perf.ranges import SpeedBand
    from planner.sim.instance import SimResult
    from planner.sim.metrics import SimSummary
    from planner.sim.workload import Workload

RATE_RANGE_PER_S = (1e-6, 1e6)  # requests/s: one a fortnight .. far beyond any single instance
MAX_CONCURRENCY = 100_000


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
        options.positive(rate, "--rate")
        checked = inputs.bounded(rate, "--rate", RATE_RANGE_PER_S)
        return wl.synthetic(lengths=dists, count=requests, rate_per_s=checked, seed=seed)
    if concurrency is None or not 1 <= concurrency <= MAX_CONCURRENCY:
        raise PlanInputError(
            f"--concurrency: out of range (got {concurrency}, expected 1..{MAX_CONCURRENCY})"
        )
    closed = wl.synthetic(lengths=dists, count=requests, rate_per_s=None, seed=seed)
    return wl.Workload(closed.input_tokens, closed.output_tokens, arrival_s=None, concurrency=concurrency)


def tpot_floor_s(flags: SimulateRequest) -> tuple[float, int]:
    """(TPOT of one request alone on a decode instance at the workload's shortest prompt, that prompt + 1):
    no load or P:D split gives a lower TPOT, since more instances share requests without making a step
    faster.

    Formula: floor = decode_step_s(batch 1, ctx = shortest prompt + 1) / tokens_per_step (MTP: > 1 token)
    """
    from planner.perf import roofline
    from planner.serving import performance

    work = workload_of(flags)
    dep, _ = prepared(flags, work)
    ctx_tokens = int(work.input_tokens.min()) + 1
    step_s = roofline.decode_step_s(dep, batch=1, ctx_tokens=ctx_tokens)
    return step_s / performance.tokens_per_step(dep), ctx_tokens


def speed_band_of(flags: SimulateRequest, *, batch: int | None) -> SpeedBand:
    """Source and range of the simulated figures (ranges.speed_band) at `batch` and the longest request;
    batch None (a search): the largest batch it can run, the memory limit capped by --max-batch and by
    --concurrency."""
    from planner import capacity
    from planner.perf import ranges

    dep, _ = prepared(flags, workload_of(flags))
    if batch is None:
        caps = [capacity.memory_plan(dep)[1].max_batch_size, flags.knobs.max_batch, flags.concurrency]
        batch = min(cap for cap in caps if cap is not None)
    return ranges.speed_band(dep, batch=max(1, batch), ctx_tokens=dep.ctx_tokens)


def prepared(flags: SimulateRequest, work: Workload) -> tuple[Deployment, dict[str, Any]]:
    """The deployment at ctx = the longest request and the scheduler knobs."""
    from planner import deployment, inputs

    longest = int((work.input_tokens + work.output_tokens).max())
    if longest > units.MAX_TOKENS:
        raise PlanInputError(
            f"--input-tokens + --output-tokens: longest request too long (got {longest}, "
            f"expected <= {units.MAX_TOKENS})"
        )
    prefill = flags.knobs.max_prefill_tokens or max(longest, deployment.DEFAULT_MAX_PREFILL_TOKENS)
    request = records.replace(flags.request, ctx=str(longest), max_prefill_tokens=prefill)
    return inputs.to_deployment(request), scheduler_knobs(flags.knobs)


def simulate_workload(flags: SimulateRequest, work: Workload) -> SimResult:
    """One simulation of `work`: aggregated, or disaggregated with --pd."""
    from planner.sim import dpgroups, pdloop, pdspec, run

    dep, knobs = prepared(flags, work)
    slo = flags.slo_s()
    if dep.dp > 1 and flags.pd is not None:
        raise PlanInputError(f"--dp/--pd: not simulated together (got --dp {dep.dp} and --pd {flags.pd})")
    if dep.dp > 1:
        return dpgroups.simulate_dp(dep, work, slo=slo, knobs=knobs)
    if flags.pd is None:
        cfg = run.default_config(dep, workload=work, **knobs)
        return run.simulate(dep, work, cfg=cfg, slo=slo)
    link = flags.kv_link_gbps
    if link is not None:
        inputs_bounded(link, "--kv-link-gbps", (1e-3, 1e6))
    if flags.prefill_tp is not None and not 1 <= flags.prefill_tp <= 64:
        raise PlanInputError(f"--prefill-tp: out of range (got {flags.prefill_tp}, expected 1..64)")
    spec = pdspec.spec_for(dep, counts=pdspec.parse_pd(flags.pd), prefill_tp=flags.prefill_tp, link_gbps=link)
    return pdloop.simulate_fleet(spec, work, slo=slo, knobs={k: v for k, v in knobs.items() if v is not None})


def inputs_bounded(value: float, flag: str, limits: tuple[float, float]) -> float:
    """planner.inputs.bounded (deferred import)."""
    from planner import inputs

    return inputs.bounded(value, flag, limits)


def summary_at(flags: SimulateRequest, load: dict[str, Any]) -> SimSummary:
    """The summary of one simulation of the flags with `load` (rate= / concurrency=) replacing theirs."""
    return simulate_workload(flags, workload_of(flags, **load)).summary


def run_simulation(flags: SimulateRequest) -> SimResult:
    """Workload from the flags -> the simulation."""
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
