"""Frozen result models returned by the planner (never dict[str, Any])."""

from typing import Any

from pydantic import Field, computed_field

from planner.degrees import Degrees
from planner.schema_base import BUILT_ON_FIRST_USE, Frozen


class MemoryBreakdown(Frozen):
    """Per-device memory plan, all in bytes.

    usable_bytes      capacity * memory_fraction (what the engine may use, MindIE NPU_MEMORY_FRACTION)
    reserved_bytes    capacity - usable: held back by the fraction
    runtime_bytes     runtime context (driver, comm buffers, fragmentation), from the card profile; for an
                      engine whose start-up arithmetic kvplan models (vLLM), all it holds back besides
                      weights and activation (registry.startup_budget)
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
    # "memory", "engine limit" (the engine's batch cap, registry.batch_cap), "batch" (--batch given),
    # "tpot", "ttft", "min-user-tps"
    binding_constraint: str = "memory"


class SpeedRange(Frozen):
    """Where the plan's speed figures come from and the range they are good to (planner/perf/ranges.py):
    each figure at the low and high end of its range (a time's low end is the fast one), the compact and
    full source, which band prefill (TTFT) takes, whether the plan is outside what the profile covers, and
    notes (where the range comes from, what is extrapolated)."""

    source: str
    label: str
    decode_step_s_low: float
    decode_step_s_high: float
    tpot_s_low: float
    tpot_s_high: float
    tokens_per_s_low: float
    tokens_per_s_high: float
    per_user_tokens_per_s_low: float
    per_user_tokens_per_s_high: float
    ttft_s_low: float
    ttft_s_high: float
    ttft_source: str
    extrapolated: bool
    notes: list[str]


class Performance(Frozen):
    """Roofline estimate at one batch size, with its source and range (speed_range; None only where a
    caller built a bare estimate, and then left out of the JSON).

    decode_step_s: one decode step of the whole batch (s); tpot_s: time per output token of one sequence,
    decode_step_s / tokens_per_step (mtp.tpot_s; the step itself without drafts, shorter with MTP);
    per_user_tokens_per_s = 1 / tpot_s; tokens_per_s = batch * per_user_tokens_per_s (both computed)."""

    batch: int
    ctx_tokens: int
    decode_step_s: float
    tokens_per_step: float
    tpot_s: float
    ttft_s: float
    calibrated: bool
    speed_range: SpeedRange | None = None
    # the prompt ttft_s is for: one request of that many tokens alone on the instance (no queue, no load);
    # None only where a caller built a bare estimate
    ttft_prompt_tokens: int | None = None
    # what each request costs outside the forward pass (API server, tokenization: the fitted
    # request_overhead_us, roofline.request_overhead_s): a client's TTFT is ttft_s + this; 0 where none
    request_overhead_s: float = 0.0

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; the JSON keeps the key
    @property
    def per_user_tokens_per_s(self) -> float:
        """Tokens/s one sequence sees: 1 / tpot_s."""
        return 1.0 / self.tpot_s

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tokens_per_s(self) -> float:
        """Aggregate decode tokens/s of the batch: batch / tpot_s."""
        return self.batch * self.per_user_tokens_per_s


class LayoutReport(Degrees):
    """One rank's view of a layout beyond tensor parallelism (planner/layout.py): its degrees (tp, dp, ep,
    pp: Degrees) and what they give one rank; bytes per device.

    batch_per_dp_group      sequences each DP group serves at the recommended instance batch
    weights_by_part_bytes   the weights row itemised: embedding, attention, mlp, moe_experts, moe_shared, ...
    comm_buffers_bytes      buffers the layout adds to the card's runtime reserve (in memory.runtime_bytes)
    notes                   why the layout holds what it holds, with what is assumed
    """

    model_config = BUILT_ON_FIRST_USE

    model_type: str
    moe_tp: int
    world_size: int
    nodes: int
    devices_per_node: int
    experts_per_rank: int
    redundant_experts: int
    batch_per_dp_group: int
    weights_by_part_bytes: dict[str, int]
    comm_buffers_bytes: dict[str, int]
    notes: list[str]


class LoadKnee(Frozen):
    """The load knee (planner/serving/knee.py): the concurrency of largest throughput per P99 end-to-end
    second in a closed loop of I-in / O-out requests, and the tails there (seconds, tokens/s)."""

    users: int
    input_tokens: int
    output_tokens: int
    arrivals: str = "random"  # requests drift apart (planner/serving/knee.py's analytic closed loop)
    max_users: int  # the range searched: sequences of I + O tokens that memory holds (capped)
    output_tokens_per_s: float
    ttft_p99_s: float
    tpot_p99_s: float | None  # None: one-token outputs have no time between tokens
    e2e_p99_s: float
    single_user_tpot_s: float  # TPOT of one user alone, for scale
    calibrated: bool


class SloAnswer(Frozen):
    """The one SLO search's answer for a plan (planner/sim/bench.search_users): the most users of the workload
    whose simulated tails meet the targets, and the batch the plan takes (capped by memory at ctx).

    workload: (prompt, output) tokens; arrivals: the closed loop's mode; quantile: the tail the targets bind;
    targets_s: {"ttft_s": .., "tpot_s": ..}; users: the search's answer; ttft_s / tpot_s: its tails there."""

    model_config = BUILT_ON_FIRST_USE

    input_tokens: int
    output_tokens: int
    arrivals: str
    quantile: str
    targets_s: dict[str, float]
    users: int
    batch: int
    binding: str  # "memory" when the memory cap is at or below `users`, else the target the next user misses
    ttft_s: float
    tpot_s: float | None  # None: one-token outputs have no time between tokens


class Plan(Frozen):
    """The whole answer for one deployment."""

    model: str
    model_alias: str | None
    card: str
    card_variant: str  # the SKU whose memory the plan assumed (HardwareProfile.variant_id)
    dtype: str
    kv_dtype: str
    tp: int
    ctx_tokens: int
    batch: int | None
    block_size_tokens: int
    # the KV block the engine itself uses: block_size_tokens, except where it sets its own (vLLM aligns a
    # hybrid model's block to its state page: 1536 tokens for Qwen3.5-27B); registry.prefix_cache_block_tokens
    engine_block_size_tokens: int | None = None
    memory_fraction: float
    memory: MemoryBreakdown
    recommendation: Recommendation
    performance: Performance | None
    warnings: list[str]
    layout: LayoutReport | None = None  # None for a tensor-parallel-only plan (and left out of its JSON)
    load_knee: LoadKnee | None = None  # the main command's (left out of the JSON when None)
    slo: SloAnswer | None = None  # the SLO search's answer when targets were given (left out when None)
    # bytes one sequence of ctx holds in the engine's pool on one device: its pages or blocks with their
    # state and the drafts' lookahead (registry.kv_bytes_at_batch at batch 1)
    pool_sequence_bytes: int

    @property
    def batch_per_dp_group(self) -> int:
        """Sequences one DP group runs at the recommended batch: what an engine's per-instance cap
        (MindIE maxBatchSize, vLLM --max-num-seqs) and each device's memory see; the instance's
        max_batch_size without a layout (dp = 1)."""
        return self.layout.batch_per_dp_group if self.layout else self.recommendation.max_batch_size

    @computed_field  # type: ignore[prop-decorator]
    @property
    def kv_bytes_at_batch(self) -> int:
        """KV and state one device holds at the recommended batch (one DP group's), bytes: the plan's "KV at
        recommended batch" row. Formula: batch_per_dp_group * pool_sequence_bytes."""
        return self.batch_per_dp_group * self.pool_sequence_bytes

    def json_payload(self) -> dict[str, Any]:
        """The plan as JSON values; `layout` is left out of tensor-parallel-only plans, `load_knee` when
        not computed, `performance.speed_range` when none was computed."""
        absent = [name for name in ("layout", "load_knee", "slo") if getattr(self, name) is None]
        exclude: dict[str, Any] = dict.fromkeys(absent, True)
        if self.performance is not None and self.performance.speed_range is None:
            exclude["performance"] = {"speed_range"}
        return self.model_dump(mode="json", exclude=exclude or None)
