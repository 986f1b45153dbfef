"""One simulated serving instance, run and summarised: the engine loop (planner/sim/engine.py stepped by
planner/sim/schedulers.py) on a scheduler config and step table it is given, its records, timeline and
the `kvplan simulate --json` summary. Split from planner/sim/run.py, which builds the config and the step
table for a deployment (memory plan, engine registry, roofline) and composes `simulate`; the P:D and DP
simulators (planner/sim/pd.py, pdloop.py, dpgroups.py) run their instances through these functions.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from planner.errors import PlanInputError
from planner.sim import metrics, schedulers
from planner.sim.config import SchedulerConfig, chunks_prompts
from planner.sim.engine import Engine
from planner.sim.metrics import Records, SimSummary, Timeline
from planner.sim.steptable import StepTable
from planner.sim.workload import Workload

MAX_SIM_TOKENS = 2_000_000_000  # prompt + output tokens per simulated instance (~3 s of simulation)
MAX_ENGINE_LOOPS = 1_000_000  # engine iterations per instance: ~5x the most --requests allows (~20-40 s)

ASSUMPTIONS = (
    "step times: the planner's roofline ledger for this card/profile/engine (measured coefficients when "
    "calibrated), interpolated on a (batch, ctx) / (tokens, attended) grid",
    "a vLLM mixed step streams the weights once for its prefill and decode tokens",
    "MTP: every sequence gains the expected tokens per step (1 + a + ... + a^k), no per-step randomness",
    "preemption: recompute (the last-admitted request frees its blocks and prefills again)",
    "no prefix caching, no host overhead between steps beyond the step overhead in the profile",
)


@dataclass(frozen=True)
class SimResult:
    """Summary, one record per request, and the engine's timeline."""

    summary: SimSummary
    records: Records
    timeline: Timeline


def check_config(cfg: SchedulerConfig, *, workload: Workload) -> None:
    """Engine-side refusals: MindIE rejects prompts over maxPrefillTokens; vLLM needs a budget that holds
    a full decode batch (max_num_batched_tokens >= max_num_seqs, its own start-up check)."""
    longest_prompt = int(np.max(workload.input_tokens))
    if cfg.scheduler == "mindie" and longest_prompt > cfg.max_prefill_tokens:
        raise PlanInputError(
            f"--max-prefill-tokens: MindIE rejects a {longest_prompt}-token prompt "
            f"(got maxPrefillTokens {cfg.max_prefill_tokens}, expected >= the longest prompt)"
        )
    if cfg.scheduler == "vllm" and cfg.max_batched_tokens < cfg.max_batch:
        raise PlanInputError(
            f"--max-prefill-tokens: below max_num_seqs (got max_num_batched_tokens {cfg.max_batched_tokens}, "
            f"expected >= max_num_seqs {cfg.max_batch}: vLLM refuses max_num_batched_tokens < max_num_seqs)"
        )


def check_work(loops: int, cfg: SchedulerConfig, workload: Workload) -> int:
    """`loops` (engine iterations so far) if within MAX_ENGINE_LOOPS, else PlanInputError (bounded time).
    On the first loop, before any work: prompt + output tokens <= MAX_SIM_TOKENS and the prefill passes
    the prompts need at least (sum of prompt tokens / tokens per pass) <= MAX_ENGINE_LOOPS."""
    if loops == 1:
        tokens = int(np.sum(workload.input_tokens)) + int(np.sum(workload.output_tokens))
        if tokens > MAX_SIM_TOKENS:
            raise PlanInputError(
                f"--requests/--input-tokens/--output-tokens: too much to simulate (got {tokens:.3g} "
                f"tokens in {workload.requests} requests, expected <= {MAX_SIM_TOKENS:.3g})"
            )
    per_pass = cfg.max_batched_tokens if chunks_prompts(cfg.scheduler) else cfg.max_prefill_tokens
    needed = loops if loops > 1 else int(np.sum(workload.input_tokens)) // per_pass
    if needed > MAX_ENGINE_LOOPS:
        raise PlanInputError(
            f"--requests: the simulation needs more than {MAX_ENGINE_LOOPS} engine steps (got "
            f"{workload.requests} requests; expected fewer, shorter ones or larger batch/token limits)"
        )
    return loops


def run_engine(
    cfg: SchedulerConfig, table: StepTable, workload: Workload, *, emits_first: bool = False
) -> Engine:
    """Run the workload to completion (open loop: its arrivals; closed loop: `concurrency` users);
    emits_first: a vLLM P:D decode instance, whose first step after admission gives the first token."""
    eng = make_engine(cfg, table, workload, emits_first=emits_first)
    count = workload.requests
    step = schedulers.step_function(cfg.scheduler)
    loops = 0
    while eng.finished < count:
        loops += 1
        if loops == 1 or loops > MAX_ENGINE_LOOPS:  # check_work passes every loop in between
            check_work(loops, cfg, workload)
        eng.admit_arrivals()
        eng.record()
        if not (eng.running or eng.waiting or eng.prefilling):
            eng.t = max(eng.t, eng.next_arrival_s())
            continue
        step(eng)
    eng.record()
    return eng


def make_engine(
    cfg: SchedulerConfig, table: StepTable, workload: Workload, *, emits_first: bool = False
) -> Engine:
    """A fresh engine for the workload (open loop: its arrivals; closed loop: `concurrency` users at 0)."""
    count = workload.requests
    if workload.arrival_s is None:
        users = min(workload.concurrency or 1, count)
        arrivals = [0.0] * users + [math.inf] * (count - users)
    else:
        users, arrivals = count, workload.arrival_s.tolist()
    eng = Engine(
        cfg, table, requests=(workload.input_tokens.tolist(), workload.output_tokens.tolist(), arrivals)
    )
    eng.issued = users
    eng.decoder_emits_first = emits_first
    return eng


def records_of(eng: Engine) -> Records:
    """The engine's per-request lists as numpy columns."""
    return Records(
        arrival_s=np.asarray(eng.arrival, dtype=np.float64),
        input_tokens=np.asarray(eng.prompt, dtype=np.int64),
        output_tokens=np.asarray(eng.output, dtype=np.int64),
        first_token_s=np.asarray(eng.first, dtype=np.float64),
        finish_s=np.asarray(eng.finish, dtype=np.float64),
        preemptions=np.asarray(eng.preempted, dtype=np.int64),
    )


def timeline_of(eng: Engine) -> Timeline:
    """The engine's event trace as numpy columns (copies: the engine's arrays may grow on)."""
    times, in_system, batch, blocks, waiting = eng.trace
    return Timeline(
        time_s=np.array(times, dtype=np.float64),
        in_system=np.array(in_system, dtype=np.int64),
        batch=np.array(batch, dtype=np.int64),
        used_blocks=np.array(blocks, dtype=np.int64),
        waiting=np.array(waiting, dtype=np.int64),
    )


@dataclass(frozen=True)
class EngineStats:
    """What the engines report beyond the records: mean in system, batch and KV peaks, counters (fields of
    SimSummary under the same names)."""

    mean_in_system: float
    max_batch_reached: int
    preemptions: int
    kv_peak_fraction: float
    prefill_tokens: int


def peaks_of(engines: list[Engine], timelines: list[Timeline]) -> tuple[int, float]:
    """(max_batch_reached, kv_peak_fraction) over the engines, each from its own trace: the most sequences
    in one step (decoding + prefilling, Engine.record) and the most blocks held / the engine's pool."""
    pairs = zip(engines, timelines, strict=True)
    batch = max(int(np.max(t.batch)) for t in timelines)
    return batch, max(float(np.max(t.used_blocks)) / eng.cfg.total_blocks for eng, t in pairs)


def fleet_stats(
    records: Records, engines: list[Engine], *, prefill_tokens: int
) -> tuple[EngineStats, Timeline]:
    """EngineStats of engines that served one set of records together (DP groups, a P:D fleet's decode side),
    and the first engine's timeline (the one a result carries).

    Formula: mean in system = sum(e2e_s) / duration (Little's law over the records); batch and KV peak =
    peaks_of the engines' own traces; preemptions = sum over the records.
    """
    timelines = [timeline_of(eng) for eng in engines]
    batch, kv_peak = peaks_of(engines, timelines)
    stats = EngineStats(
        mean_in_system=float(np.sum(records.e2e_s)) / metrics.duration_s(records),
        max_batch_reached=batch,
        preemptions=int(records.preemptions.sum()),
        kv_peak_fraction=kv_peak,
        prefill_tokens=prefill_tokens,
    )
    return stats, timelines[0]


def stats_of(eng: Engine, timeline: Timeline) -> EngineStats:
    """EngineStats of one finished engine (mean in system and the peaks from its own event trace)."""
    batch, kv_peak = peaks_of([eng], [timeline])
    return EngineStats(
        mean_in_system=metrics.mean_in_system(
            timeline,
            arrival_s=np.asarray(eng.arrival, dtype=np.float64),
            reach_delay_s=eng.table.request_overhead_s,
        ),
        max_batch_reached=batch,
        preemptions=eng.preemptions,
        kv_peak_fraction=kv_peak,
        prefill_tokens=eng.prefill_tokens,
    )


def summary_of(
    records: Records,
    stats: EngineStats,
    *,
    cfg: SchedulerConfig,
    calibrated: bool,
    slo: tuple[float | None, float | None],
    closed_loop: bool = False,
) -> SimSummary:
    """Summary statistics of finished records; slo = (ttft_s, tpot_s), either may be None; closed_loop: the
    records are K users' (never overloaded: metrics.overload)."""
    with_slo = any(limit is not None for limit in slo)
    backlog, overloaded = metrics.overload(records, closed_loop=closed_loop)
    return SimSummary(
        requests=records.finish_s.size,
        duration_s=metrics.duration_s(records),
        throughput=metrics.throughput(records),
        ttft_s=metrics.percentiles(records.ttft_s),
        tpot_s=metrics.percentiles(records.tpot_sample_s),
        tpot_requests=int(records.tpot_sample_s.size),
        e2e_s=metrics.percentiles(records.e2e_s),
        **asdict(stats),  # the engine's counters, under the summary's names
        goodput_requests_per_s=(
            metrics.goodput_requests_per_s(records, ttft_s=slo[0], tpot_s=slo[1]) if with_slo else None
        ),
        slo={k: v for k, v in zip(("ttft_s", "tpot_s"), slo, strict=True) if v is not None} or None,
        scheduler=cfg,
        calibrated=calibrated,
        assumptions=ASSUMPTIONS,
        backlog_at_last_arrival=backlog,
        overloaded=overloaded,
    )
