"""What the simulated engine is allowed to do: its scheduler knobs and the plan's KV block budget.

Scheduler knobs keep the engines' names in comments; defaults are the engines' documented defaults
(/work/shared/reference/ascend-mindie-facts.md, section 1.2 for MindIE ScheduleConfig, 1.6 for vLLM).
The block budget is the plan's own accounting (planner/capacity.py, planner/engines/vllm/pool.py): the same
KV budget, block size and reserved block that `kvplan` and `kvplan mindie` / `kvplan vllm` use.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from planner import capacity, units
from planner.deployment import Deployment
from planner.engines.vllm import pool as vllm_pool
from planner.results import MemoryBreakdown
from planner.schema import Frozen

SchedulerName = Literal["vllm", "mindie", "decode"]  # decode: a P:D decode instance (planner/sim/pd.py)

# vLLM: max_num_batched_tokens of the API server on a >= 70 GiB device (facts 1.6, [S]): the per-step
# token budget of chunked prefill (vLLM V1 always chunks).
DEFAULT_MAX_BATCHED_TOKENS = 8192
# vLLM max_num_seqs default by device (facts 1.6, [S]: vllm/engine/arg_utils.py get_batch_defaults): 1024 on
# a device of >= 70 GiB, else 256. The KV pool, not this cap, then bounds the batch (with preemption).
VLLM_MAX_NUM_SEQS_LARGE, VLLM_MAX_NUM_SEQS_SMALL = 1024, 256
VLLM_LARGE_DEVICE_GIB = 70
# MindIE ScheduleConfig defaults (facts 1.2, [P]): maxPrefillBatchSize 50, maxPrefillTokens 8192,
# prefillTimeMsPerReq 150, decodeTimeMsPerReq 50, maxQueueDelayMicroseconds 5000, supportSelectBatch false.
DEFAULT_MAX_PREFILL_BATCH = 50
DEFAULT_MAX_PREFILL_TOKENS = 8192
DEFAULT_PREFILL_TIME_PER_REQ_MS = 150.0
DEFAULT_DECODE_TIME_PER_REQ_MS = 50.0
DEFAULT_QUEUE_DELAY_US = 5000.0


class SchedulerConfig(Frozen):
    """Knobs of one serving instance (SI units) and its KV block pool.

    vllm:   max_batch = max_num_seqs, max_batched_tokens = max_num_batched_tokens (chunked prefill).
    mindie: max_batch = maxBatchSize, max_prefill_batch = maxPrefillBatchSize, max_prefill_tokens =
            maxPrefillTokens, select_batch = supportSelectBatch with prefill/decode_time_per_req_s =
            prefillTimeMsPerReq / decodeTimeMsPerReq, queue_delay_s = maxQueueDelayMicroseconds.
    total_blocks  KV blocks of block_tokens each; state_blocks  extra blocks a sequence holds for its
    fixed recurrent state (linear-attention models), charged while it is admitted.
    """

    scheduler: SchedulerName
    max_batch: int = Field(ge=1)
    max_batched_tokens: int = Field(default=DEFAULT_MAX_BATCHED_TOKENS, ge=1)
    max_prefill_batch: int = Field(default=DEFAULT_MAX_PREFILL_BATCH, ge=1)
    max_prefill_tokens: int = Field(default=DEFAULT_MAX_PREFILL_TOKENS, ge=1)
    select_batch: bool = False
    prefill_time_per_req_s: float = Field(default=DEFAULT_PREFILL_TIME_PER_REQ_MS * units.MS_S, ge=0)
    decode_time_per_req_s: float = Field(default=DEFAULT_DECODE_TIME_PER_REQ_MS * units.MS_S, ge=0)
    queue_delay_s: float = Field(default=DEFAULT_QUEUE_DELAY_US * units.US_S, ge=0)
    total_blocks: int = Field(ge=1)
    block_tokens: int = Field(ge=1)
    state_blocks: int = Field(default=0, ge=0)


def blocks_for(tokens: int, *, block_tokens: int) -> int:
    """Blocks that hold `tokens` tokens of KV: ceil(tokens / block)."""
    return -(-tokens // block_tokens)


def mindie_blocks(dep: Deployment, mem: MemoryBreakdown) -> tuple[int, int]:
    """(total blocks, state blocks per sequence) as MindIE counts them (capacity.mindie_batch_holds).

    Formula: floor(paged / (block * kv_per_token)) - MINDIE_RESERVED_BLOCKS, paged = kv_budget (floored
    to whole GiB when npuMemSize is explicit); state: ceil(state_bytes / block_bytes) per sequence.
    """
    block_bytes = dep.block_size_tokens * mem.kv_bytes_per_token
    paged = mem.kv_budget_bytes
    if dep.model.id in capacity.MINDIE_EXPLICIT_NPU_MEM:
        paged = paged // units.GIB_BYTES * units.GIB_BYTES
    total = paged // block_bytes - capacity.MINDIE_RESERVED_BLOCKS
    return total, math.ceil(mem.state_bytes_per_sequence / block_bytes)


def vllm_blocks(dep: Deployment, mem: MemoryBreakdown, *, max_model_len: int) -> tuple[int, int, int]:
    """(total blocks, state blocks per sequence, block tokens) of vLLM's pool (planner/engines/vllm/pool.py).

    State blocks: the pool's blocks per request beyond those of the max_model_len tokens of KV.
    """
    pool = vllm_pool.deployment_pool(
        dep, available_bytes=mem.kv_budget_bytes, max_model_len=max_model_len, num_spec=dep.mtp_tokens
    )
    kv_blocks = blocks_for(max_model_len, block_tokens=pool.block_size_tokens)
    return pool.num_blocks, max(pool.blocks_per_request - kv_blocks, 0), pool.block_size_tokens


def block_pool(dep: Deployment, mem: MemoryBreakdown, *, max_model_len: int) -> dict[str, int]:
    """SchedulerConfig keywords total_blocks, state_blocks, block_tokens for the deployment's engine."""
    if dep.engine == "vllm":
        total, state, block = vllm_blocks(dep, mem, max_model_len=max_model_len)
    else:
        (total, state), block = mindie_blocks(dep, mem), dep.block_size_tokens
    return {"total_blocks": max(total, 1), "state_blocks": state, "block_tokens": block}


def default_max_batch(dep: Deployment, *, planned_batch: int) -> int:
    """vLLM: its max_num_seqs default for the device; MindIE: the plan's maxBatchSize at the longest request
    (what `kvplan mindie` writes)."""
    if dep.engine == "mindie":
        return planned_batch
    large = dep.hardware.memory_capacity_bytes >= VLLM_LARGE_DEVICE_GIB * units.GIB_BYTES
    return VLLM_MAX_NUM_SEQS_LARGE if large else VLLM_MAX_NUM_SEQS_SMALL


def scheduler_for(dep: Deployment) -> SchedulerName:
    """MindIE's prefill-priority scheduler for engine mindie; vLLM continuous batching otherwise."""
    return "mindie" if dep.engine == "mindie" else "vllm"
