"""vLLM's scheduler facts: its per-step token budget, max_num_seqs default, preemption and data-parallel
stepping, as the simulator runs them (planner/sim/). Split from planner/engines/vllm/batch.py (which
re-exports what the registry asks); the transformers room borrows them, being simulated with vLLM's
scheduler (planner/engines/transformers/pool.py).
"""

from __future__ import annotations

from planner.deployment import Deployment
from planner.engines.vllm import startup
from planner.kinds import SchedulerKind

# The scheduler's defaults when `vllm serve` gets no --max-num-seqs / --max-num-batched-tokens come from the
# engine's own start-up rules, per release (planner/engines/vllm/startup.py scheduler_defaults): vllm-ascend
# cannot report device memory to vLLM, so it runs with 256 sequences / 2048 tokens per step on every card;
# vLLM on CUDA gets 1024 / 8192 on a device of >= 70 GiB (not an A100), else 256 / 2048.
# Chunked prefill: on in every release kvplan plans (startup.version_for_vendor: vllm-ascend main,
# vLLM >= 0.21), both on the V1 scheduler, which always chunks (vllm/v1/core/sched/scheduler.py); the
# simulator's vLLM scheduler (planner/sim/schedulers.py) is that chunked scheduler.
CHUNKED_PREFILL = True
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


def scheduler_defaults(dep: Deployment) -> startup.SchedulerDefaults:
    """`vllm serve`'s max_num_seqs / max_num_batched_tokens when left out, for the release kvplan plans on
    dep's card (startup.version_for_vendor) and the card's device total (startup.device_total_bytes)."""
    version = startup.version_for_vendor(dep.hardware.vendor)
    return startup.scheduler_defaults(
        version, device_total_bytes=startup.device_total_bytes(dep.hardware), device_name=dep.hardware.name
    )


def default_max_batch(dep: Deployment, *, planned_batch: int) -> int:
    """max_num_seqs' default (scheduler_defaults: 256 on Ascend, 1024 or 256 on CUDA by device memory)."""
    return scheduler_defaults(dep).max_num_seqs


def default_batched_tokens(dep: Deployment) -> int:
    """max_num_batched_tokens' default, the chunked-prefill token budget of one step (scheduler_defaults:
    2048 on Ascend, 8192 or 2048 on CUDA by device memory)."""
    return scheduler_defaults(dep).max_num_batched_tokens
