"""vLLM's scheduler facts: its per-step token budget, max_num_seqs default, preemption and data-parallel
stepping, as the simulator runs them (planner/sim/). Split from planner/engines/vllm/batch.py (which
re-exports what the registry asks); the transformers room borrows them, being simulated with vLLM's
scheduler (planner/engines/transformers/pool.py).
"""

from __future__ import annotations

from planner import units
from planner.deployment import Deployment
from planner.kinds import SchedulerKind

# max_num_batched_tokens of the API server on a >= 70 GiB device (facts 1.6, [S]): the per-step token budget
# of chunked prefill (vLLM V1 always chunks).
DEFAULT_MAX_BATCHED_TOKENS = 8192
# max_num_seqs default by device (facts 1.6, [S]: vllm/engine/arg_utils.py get_batch_defaults): 1024 on a
# device of >= 70 GiB, else 256. The KV pool, not this cap, then bounds the batch (with preemption).
MAX_NUM_SEQS_LARGE, MAX_NUM_SEQS_SMALL = 1024, 256
LARGE_DEVICE_GIB = 70
SCHEDULER: SchedulerKind = "vllm"  # the simulator's continuous-batching scheduler (planner/sim/schedulers.py)
# KV blocks as tokens arrive, recompute preemption (vllm/v1/core/sched/scheduler.py)
ADMITS_BEYOND_POOL = True
# Data parallel (planner/sim/dpgroups.py), vllm/v1/engine/core.py @00080ee1: MoE DP ranks run
# DPEngineCoreProc, whose run_busy_loop executes a dummy batch when the rank ran nothing while others run
# (`if not executed: ... self.execute_dummy_batch()`), so every rank runs a forward each step and a step
# lasts as long as the slowest rank's; non-MoE DP ranks "are completely independent" (run_engine_core).
# Each rank schedules its own step (no shared prefill/decode decision).
DP_PHASE_VOTE = False
DP_LOCKSTEP_DENSE = False


def default_max_batch(dep: Deployment, *, planned_batch: int) -> int:
    """max_num_seqs' default for the device: 1024 at >= LARGE_DEVICE_GIB, else 256."""
    large = dep.hardware.memory_capacity_bytes >= LARGE_DEVICE_GIB * units.GIB_BYTES
    return MAX_NUM_SEQS_LARGE if large else MAX_NUM_SEQS_SMALL
