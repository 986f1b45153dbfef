"""Frozen result models returned by the planner (never dict[str, Any])."""

from __future__ import annotations

from pydantic import Field

from planner.schema import Frozen


class MemoryBreakdown(Frozen):
    """Per-device memory plan, all in bytes.

    usable_bytes      capacity * memory_fraction (what the engine may use, MindIE NPU_MEMORY_FRACTION)
    reserved_bytes    capacity - usable: held back by the fraction
    runtime_bytes     runtime context (driver, comm buffers, fragmentation), from the card profile
    kv_budget_bytes   usable - weights - activation - runtime: what the KV cache and states may fill
    """

    device_capacity_bytes: int
    usable_bytes: int
    weights_bytes: int
    kv_bytes_per_token: int
    state_bytes_per_sequence: int
    activation_bytes: int
    runtime_bytes: int
    reserved_bytes: int
    kv_budget_bytes: int
    kv_bytes_per_sequence: int = Field(description="paged KV for one sequence of ctx tokens, plus its state")
    kv_budget_fraction_of_capacity: float


class Recommendation(Frozen):
    """What to configure: largest batch at ctx, longest sequence at the chosen batch."""

    max_batch_size: int
    max_seq_len: int
    binding_constraint: str = "memory"


class Performance(Frozen):
    """Roofline estimate at one batch size."""

    batch: int
    ctx_tokens: int
    decode_step_s: float
    tokens_per_s: float
    per_user_tokens_per_s: float
    ttft_s: float
    calibrated: bool


class Plan(Frozen):
    """The whole answer for one deployment."""

    model: str
    model_alias: str | None
    card: str
    dtype: str
    kv_dtype: str
    tp: int
    ctx_tokens: int
    batch: int | None
    block_size_tokens: int
    memory_fraction: float
    memory: MemoryBreakdown
    recommendation: Recommendation
    performance: Performance | None
    warnings: list[str]
