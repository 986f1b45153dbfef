"""`simulate`: a workload through one simulated serving instance of a deployment -> summary + records.

The deployment's ctx is the longest request (prompt + output); its memory plan gives the KV block pool
and the default batch cap (MindIE: maxBatchSize as `kvplan mindie` writes it at that ctx; vLLM: its
max_num_seqs default for the device, the KV pool bounding the batch through preemption). The step table
is built here from the planner's roofline (no second model):
decode[b][j]   seconds of one decode step of b sequences (b = 1..max_batch) at mean context ctx_axis[j]:
               planner.perf.roofline.decode_step_s_grid, vectorised over the whole grid.
pass_[i][j]    seconds of one prefill pass of tokens_axis[i] query tokens whose mean attended keys are
               attended_axis[j]: the same ledger terms (opcost.step_terms + term_time_s + step overhead)
               on a prefill Step, so a one-chunk prompt costs exactly roofline.ttft_s.
The instance itself runs and is summarised in planner/sim/instance.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from planner import capacity, layout
from planner.arrays import FloatArray
from planner.deployment import Deployment
from planner.engines import registry
from planner.engines.common import BlockPool
from planner.errors import DoesNotFitError
from planner.perf import roofline
from planner.perf.mtp import tokens_per_step
from planner.perf.terms import Step
from planner.results import MemoryBreakdown
from planner.sim import config
from planner.sim.config import SchedulerConfig, SchedulerName
from planner.sim.engine import Engine
from planner.sim.instance import (
    SimResult,
    check_config,
    records_of,
    run_engine,
    stats_of,
    summary_of,
    timeline_of,
)
from planner.sim.metrics import Records, SimSummary, Timeline
from planner.sim.steptable import StepTable
from planner.sim.workload import Workload


def block_pool(dep: Deployment, mem: MemoryBreakdown, *, max_model_len: int) -> dict[str, int | None]:
    """SchedulerConfig keywords total_blocks, state_blocks, block_tokens, lookahead_tokens, slot_cap_tokens:
    the engine's pool (registry)."""
    pool = registry.block_pool(dep, mem, max_model_len=max_model_len)
    return {**pool.model_dump(), "total_blocks": max(pool.total_blocks, 1)}


def group_knobs(dep: Deployment, knobs: dict[str, object]) -> dict[str, object]:
    """Scheduler knobs of one DP group: the given ones (None dropped); with dp > 1 the batch cap defaults to
    ceil(the plan's batch / dp) (layout.per_dp_rank_batch), and a given --max-batch is per DP group, as
    vLLM's max_num_seqs is per DP rank (dp 1: default_config's engine default). DP groups
    (planner/sim/dpgroups.py) and the P:D instances' groups (planner/sim/pdloop.py, pd.py) use it."""
    given = {k: v for k, v in knobs.items() if v is not None}
    if dep.dp == 1 or "max_batch" in given:
        return given
    _, rec = capacity.memory_plan(dep)
    return {"max_batch": layout.per_dp_rank_batch(rec.max_batch_size, dp=dep.dp), **given}


def default_max_batch(dep: Deployment, *, planned_batch: int) -> int:
    """The engine's default batch cap in the simulator within its config's limit (registry.running_cap:
    vLLM's max_num_seqs default, 256 on Ascend, at most --max-num-batched-tokens)."""
    return registry.running_cap(dep, max_batch=None, planned_batch=planned_batch)


def default_batched_tokens(dep: Deployment) -> int:
    """The per-step token budget the simulated vLLM scheduler runs with when not given: the engine's own
    --max-num-batched-tokens default on the card (registry.default_prefill_tokens: 2048 on vllm-ascend),
    else the deployment's prefill budget (engines that prefill a prompt in one pass)."""
    return registry.default_prefill_tokens(dep.engine, dep.hardware) or dep.max_prefill_tokens


def scheduler_for(dep: Deployment) -> SchedulerName:
    """MindIE's prefill-priority scheduler or vLLM's continuous batching, as the engine's room says."""
    return registry.scheduler_for(dep)


GRID_POINTS_PER_DOUBLING = 4  # interpolation nodes per factor of 2 (step time is near-linear between)


def geometric_axis(high: float) -> list[float]:
    """1, 2^(1/g), 2^(2/g), ... up to and including `high` (g = GRID_POINTS_PER_DOUBLING)."""
    count = int(np.ceil(np.log2(max(high, 2.0)) * GRID_POINTS_PER_DOUBLING)) + 1
    axis = np.unique(np.round(np.exp2(np.arange(count) / GRID_POINTS_PER_DOUBLING)))
    return [float(v) for v in axis[axis < high]] + [float(high)]


def prefill_pass(dep: Deployment, *, tokens: FloatArray, attended: FloatArray) -> Step:
    """A prefill pass of `tokens` query tokens attending `attended` keys each on average (broadcast).

    Formula: cached = max(attended - (tokens + 1) / 2, 0) (the prefix a chunk reads from the cache; 0 for
    fresh prompts batched together); logits for 1 row; one MTP draft pass over the tokens when MTP is on.
    """
    cached = np.maximum(attended - (tokens + 1.0) / 2.0, 0.0)
    ones = np.ones(np.broadcast_shapes(tokens.shape, attended.shape))
    return Step(
        tokens=tokens * ones,
        sequences=ones,
        cached_tokens=cached * ones,
        attended_tokens=attended * ones,
        logits_tokens=ones,
        draft_runs=1 if dep.speculative_tokens else 0,
        draft_tokens=tokens * ones,
        draft_logits=ones,
    )


def pass_s_grid(dep: Deployment, *, tokens: FloatArray, attended: FloatArray) -> FloatArray:
    """Seconds of prefill passes over broadcast arrays: roofline.prefill_pass_s_grid of prefill_pass."""
    return roofline.prefill_pass_s_grid(dep, step=prefill_pass(dep, tokens=tokens, attended=attended))


def step_table(dep: Deployment, *, max_batch: int, max_ctx_tokens: int, max_pass_tokens: int) -> StepTable:
    """Grids covering batches 1..max_batch, contexts to max_ctx_tokens and passes to max_pass_tokens."""
    ctx_axis = geometric_axis(max_ctx_tokens + 1)
    batch = np.arange(1, max_batch + 1, dtype=np.float64)[:, None]
    decode = roofline.decode_step_s_grid(dep, batch=batch, ctx_tokens=np.asarray(ctx_axis)[None, :])
    tokens_axis = geometric_axis(max_pass_tokens + max_batch * (1 + dep.mtp_tokens))
    attended_axis = geometric_axis(max_ctx_tokens + 1)
    grid = pass_s_grid(
        dep, tokens=np.asarray(tokens_axis)[:, None], attended=np.asarray(attended_axis)[None, :]
    )
    return StepTable(
        ctx_axis=ctx_axis,
        decode=decode.tolist(),
        tokens_axis=tokens_axis,
        attended_axis=attended_axis,
        pass_=grid.tolist(),
        tokens_per_step=tokens_per_step(dep),
        query_tokens_per_step=1 + dep.speculative_tokens,
        request_overhead_s=roofline.request_overhead_s(dep),
    )


def default_config(dep: Deployment, *, workload: Workload, **knobs: Any) -> SchedulerConfig:
    """Scheduler knobs: the engine's defaults, the plan's block pool and batch cap, maxPrefillTokens at least
    the longest prompt (MindIE requires maxPrefillTokens >= maxInputTokenLen), then `knobs`.

    DoesNotFitError when the model does not fit, or when one request alone outgrows the block pool.
    """
    mem, rec = capacity.memory_plan(dep)
    pool = block_pool(dep, mem, max_model_len=dep.ctx_tokens)
    values: dict[str, Any] = {
        "scheduler": scheduler_for(dep),
        "max_batch": default_max_batch(dep, planned_batch=rec.max_batch_size),
        "max_batched_tokens": default_batched_tokens(dep),
        "max_prefill_tokens": max(dep.max_prefill_tokens, int(np.max(workload.input_tokens))),
        "prefix_cached_fraction": dep.prefix_cached_fraction,
        **pool,
    }
    values.update({k: v for k, v in knobs.items() if v is not None})
    cfg = SchedulerConfig(**values)
    longest = int(np.max(workload.input_tokens + workload.output_tokens))
    fields = ("total_blocks", "state_blocks", "block_tokens", "lookahead_tokens", "slot_cap_tokens")
    need = BlockPool(**{name: getattr(cfg, name) for name in fields}).sequence_blocks(longest)
    if need > cfg.total_blocks:
        raise DoesNotFitError(
            f"{dep.model.id} on {dep.hardware.id} at tp={dep.tp}: a {longest}-token request needs {need} KV "
            f"blocks, the pool has {cfg.total_blocks}; try a larger --tp or shorter requests"
        )
    return cfg


def build_table(dep: Deployment, cfg: SchedulerConfig, workload: Workload) -> StepTable:
    """Step grids that cover every batch, context and pass this run can reach."""
    longest = int(np.max(workload.input_tokens + workload.output_tokens))
    budget = cfg.max_batched_tokens if config.chunks_prompts(cfg.scheduler) else cfg.max_prefill_tokens
    return step_table(
        dep, max_batch=cfg.max_batch, max_ctx_tokens=longest, max_pass_tokens=max(budget, longest)
    )


def summarize(
    eng: Engine, *, dep: Deployment, slo: tuple[float | None, float | None], closed_loop: bool = False
) -> tuple[SimSummary, Records, Timeline]:
    """Summary, records and timeline of a finished engine (closed_loop: its workload's users)."""
    records, timeline = records_of(eng), timeline_of(eng)
    stats = stats_of(eng, timeline)
    calibrated = roofline.is_calibrated(dep)
    summary = summary_of(records, stats, cfg=eng.cfg, calibrated=calibrated, slo=slo, closed_loop=closed_loop)
    return summary, records, timeline


def simulate(
    dep: Deployment,
    workload: Workload,
    *,
    cfg: SchedulerConfig | None = None,
    slo: tuple[float | None, float | None] = (None, None),
) -> SimResult:
    """Simulate `workload` on one instance of `dep` (cfg: default_config when None)."""
    cfg = cfg or default_config(dep, workload=workload)
    table = build_table(dep, cfg, workload)
    check_config(cfg, workload=workload)
    closed = workload.arrival_s is None
    summary, records, timeline = summarize(
        run_engine(cfg, table, workload), dep=dep, slo=slo, closed_loop=closed
    )
    return SimResult(summary=summary, records=records, timeline=timeline)
