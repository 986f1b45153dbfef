"""What the simulated engine is allowed to do: its scheduler knobs and the plan's KV block budget.

Scheduler knobs keep the engines' names in comments; defaults are the engines' documented defaults, kept in
each engine's room (planner/engines/mindie/scheduler.py, planner/engines/vllm/scheduler.py reading
planner/engines/vllm/startup.py's per-release defaults; facts file
sections 1.2 and 1.6). The block budget is the plan's own accounting through planner/engines/registry.py:
the same KV budget, block size and reserved block that `kvplan` and `kvplan mindie` / `kvplan vllm` use.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from planner import units
from planner.deployment import DEFAULT_MAX_PREFILL_TOKENS
from planner.engines.mindie import scheduler as mindie_scheduler
from planner.schema import Frozen

# decode: a P:D decode instance (planner/sim/pd.py)
SchedulerName = Literal["vllm", "mindie", "sglang", "decode"]


class SchedulerConfig(Frozen):
    """Knobs of one serving instance (SI units) and its KV block pool.

    vllm:   max_batch = max_num_seqs, max_batched_tokens = max_num_batched_tokens (chunked prefill).
    sglang: max_batch = max_running_requests, max_batched_tokens = chunked_prefill_size (prefill passes only).
    mindie: max_batch = maxBatchSize, max_prefill_batch = maxPrefillBatchSize, max_prefill_tokens =
            maxPrefillTokens, select_batch = supportSelectBatch with prefill/decode_time_per_req_s =
            prefillTimeMsPerReq / decodeTimeMsPerReq, queue_delay_s = maxQueueDelayMicroseconds.
    total_blocks  KV blocks of block_tokens each; state_blocks  extra blocks a sequence holds for its
    fixed recurrent state (linear-attention models), charged while it is admitted; lookahead_tokens  slots a
    decoding sequence keeps free past its last token for speculative drafts (MindIE's gamma, vLLM's
    num_lookahead_tokens): it holds ceil(min(tokens + lookahead, slot_cap_tokens) / block) blocks;
    slot_cap_tokens  the length past which the engine allocates no slot (vLLM's max_model_len; None: none).
    prefix_cached_fraction  share of each prompt a prefix cache holds (Deployment's): prefill starts after
    its whole blocks (Engine.cached_tokens_of); the shared blocks are still charged to every sequence.
    """

    scheduler: SchedulerName
    max_batch: int = Field(ge=1)
    max_batched_tokens: int = Field(ge=1)  # run.default_config: the engine's default (registry)
    max_prefill_batch: int = Field(default=mindie_scheduler.DEFAULT_MAX_PREFILL_BATCH, ge=1)
    max_prefill_tokens: int = Field(default=DEFAULT_MAX_PREFILL_TOKENS, ge=1)
    select_batch: bool = False
    prefill_time_per_req_s: float = Field(
        default=mindie_scheduler.DEFAULT_PREFILL_TIME_PER_REQ_MS * units.MS_S, ge=0
    )
    decode_time_per_req_s: float = Field(
        default=mindie_scheduler.DEFAULT_DECODE_TIME_PER_REQ_MS * units.MS_S, ge=0
    )
    queue_delay_s: float = Field(default=mindie_scheduler.DEFAULT_QUEUE_DELAY_US * units.US_S, ge=0)
    total_blocks: int = Field(ge=1)
    block_tokens: int = Field(ge=1)
    state_blocks: int = Field(default=0, ge=0)
    lookahead_tokens: int = Field(default=0, ge=0)
    slot_cap_tokens: int | None = Field(default=None, ge=1)
    prefix_cached_fraction: float = Field(default=0.0, ge=0, le=1)

    @model_serializer(mode="wrap")
    def _without_unset_prefix(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The fields, prefix_cached_fraction and lookahead_tokens only when set, slot_cap_tokens only with a
        lookahead (the one thing it caps): outputs of runs without them (every recorded transcript) keep the
        fields they always had."""
        fields: dict[str, Any] = handler(self)
        for name in ("prefix_cached_fraction", "lookahead_tokens"):
            if not getattr(self, name):
                fields.pop(name, None)
        if not self.lookahead_tokens:
            fields.pop("slot_cap_tokens", None)
        return fields


def chunks_prompts(scheduler: str) -> bool:
    """True for the schedulers that cut prompts into max_batched_tokens chunks (vLLM, SGLang)."""
    return scheduler in ("vllm", "sglang")


def blocks_for(tokens: int, *, block_tokens: int) -> int:
    """Blocks that hold `tokens` tokens of KV: ceil(tokens / block)."""
    return -(-tokens // block_tokens)
