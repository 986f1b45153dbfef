"""Deployment -> memory plan: checks the inputs against the card, sizes memory, recommends lengths.

The formulas live in memory.py; this module composes them per deployment (one KV budget, one batch cap) and
words the outcome; plan/compose.py adds the speed; `admission`: the running batch serve and the fit share.
"""

import numpy as np
from pydantic import computed_field

from planner import advice, drafts, layout, memory, params, support, units
from planner.arrays import IntArray
from planner.deployment import Deployment
from planner.dtypes import StorageDType
from planner.engines import registry
from planner.errors import DoesNotFitError, KvplanError, PlanInputError
from planner.results import MemoryBreakdown, Recommendation
from planner.schema import BUILT_ON_FIRST_USE, Frozen

# The seed article's rule of thumb: the KV cache should take 30-40 % of HBM.  [seed: Qwen3-27B on 950PR]
KV_GUIDELINE_FRACTION = (0.30, 0.40)


def check_matmul_peak(dep: Deployment) -> None:
    """PlanInputError when the card's profile states no peak for the scheme's matmul dtype. Only fp32 can
    miss one: 16-bit schemes run in the card's activation dtype, and a native dtype has a peak (schema).
    kvplan never extrapolates a peak from another dtype."""
    hw, scheme = dep.hardware, dep.weight_scheme
    if scheme.compute_dtype in ("bf16", "fp16") or scheme.compute_dtype in hw.peak_tflop_per_s:
        return
    stated = ", ".join(sorted(hw.peak_tflop_per_s))
    raise PlanInputError(
        f"--dtype: {scheme.name} matmuls need the card's {scheme.compute_dtype} peak, which the {hw.id} "
        f"profile does not state (got {scheme.name}, peaks stated for {stated}); add "
        f"peak_tflop_per_s.{scheme.compute_dtype} with its source, or pick --dtype {hw.activation_dtype}"
    )


def check_supported(dep: Deployment) -> None:
    """Reject dtype/parallelism combinations the card or the engines cannot run (PlanInputError)."""
    hw, scheme = dep.hardware, dep.weight_scheme
    native = ", ".join(hw.native_dtypes)
    if scheme.requires_native and scheme.requires_native not in hw.native_dtypes:
        same_width = ("fp16", "bf16") if scheme.weight_bits == 16 else ()  # then w8a16, w4a16: weight-only
        alternatives = [
            d for d in (*same_width, "int8", "w8a16", "w4a16") if d[0] == "w" or d in hw.native_dtypes
        ]
        raise PlanInputError(
            f"--dtype: {scheme.name} needs native {scheme.requires_native} units, which {hw.id} lacks "
            f"(got {scheme.name}, card supports {native}); try --dtype {' or '.join(alternatives)}"
        )
    registry.check_weight_dtype(dep)
    check_matmul_peak(dep)
    if dep.kv_dtype is not StorageDType.fp32 and dep.kv_dtype.value not in hw.native_dtypes:
        raise PlanInputError(
            f"--kv-dtype: {hw.id} has no native {dep.kv_dtype.value} (got {dep.kv_dtype.value}, "
            f"expected one of {native})"
        )
    registry.check_kv_dtype(dep)
    registry.check_draft_model(dep)
    support.check_tp(dep)
    layout.check_layout(dep)
    registry.check_layout(dep)


def weight_bytes(dep: Deployment) -> int:
    """Weight bytes per device for the deployment: the sum of weight_bytes_by_part."""
    return sum(weight_bytes_by_part(dep).values())


def weight_bytes_by_part(dep: Deployment) -> dict[str, int]:
    """Weight bytes per device split by part (memory.weight_bytes_by_part of the layout's rank tensors)."""
    tensors = params.model_tensors(
        dep.model, tp=dep.tp, include_mtp=dep.include_mtp, shards=layout.shards(dep)
    ) + drafts.draft_model_tensors(dep.model, method=dep.draft_method, tp=dep.tp)
    return memory.weight_bytes_by_part(
        tensors, scheme=dep.weight_scheme, activation_dtype=dep.activation_dtype
    )


def runtime_bytes(dep: Deployment) -> int:
    """Runtime reserve per device: the card's (covers the TP communicator) + the layout's comm buffers."""
    return dep.hardware.runtime_overhead_bytes + sum(layout.comm_buffer_bytes(dep).values())


def activation_bytes(dep: Deployment) -> int:
    """Prefill activation peak per device (memory.activation_bytes_per_device with its settings)."""
    return memory.activation_bytes_per_device(
        dep.model,
        max_prefill_tokens=dep.max_prefill_tokens,
        activation_dtype=dep.activation_dtype,
        tp=dep.tp,
        moe_tp=layout.moe_tp(dep),
    )


def kv_budget_bytes(dep: Deployment) -> int:
    """kvplan's own KV budget per device (an engine whose start-up arithmetic is modelled replaces it in
    memory_breakdown: registry.startup_budget).

    Formula: device_total * memory_fraction - weights - prefill activations - runtime overhead (bytes)
    device_total is the runtime-visible total (HardwareProfile.device_total_bytes), nominal when unknown.
    """
    hw = dep.hardware
    usable = memory.usable_bytes(hw.device_total_bytes, memory_fraction=dep.memory_fraction)
    return memory.kv_budget_bytes(
        usable, weights=weight_bytes(dep), activation=activation_bytes(dep), runtime=runtime_bytes(dep)
    )


def memory_breakdown(dep: Deployment) -> MemoryBreakdown:
    """Per-device memory plan for the deployment at ctx_tokens (KV of one sequence of ctx tokens)."""
    card, hw = dep.model, dep.hardware
    capacity = hw.device_total_bytes  # the runtime-visible total when the profile knows it
    usable = memory.usable_bytes(capacity, memory_fraction=dep.memory_fraction)
    weights = weight_bytes(dep)
    activation = activation_bytes(dep)
    kv_per_token = memory.kv_cache_bytes_per_token(
        card, kv_dtype=dep.kv_dtype, tp=dep.tp, mtp=dep.include_mtp, pp=dep.pp
    ) + drafts.draft_kv_bytes_per_token(card, method=dep.draft_method, kv_dtype=dep.kv_dtype, tp=dep.tp)
    state = memory.linear_state_bytes_per_sequence(
        card, conv_dtype=dep.activation_dtype, tp=dep.tp, pp=dep.pp, mtp=dep.include_mtp
    )
    runtime = runtime_bytes(dep)
    # = kv_budget_bytes(dep), without computing the weights twice
    budget = memory.kv_budget_bytes(usable, weights=weights, activation=activation, runtime=runtime)
    engine = registry.startup_budget(dep, weights_bytes=weights)
    if engine is not None:  # the engine's own start-up arithmetic (vLLM): its activation and overheads
        activation, runtime, budget = engine.activation_bytes, engine.runtime_bytes, engine.kv_budget_bytes
    per_sequence = memory.sequence_bytes(
        dep.ctx_tokens,
        kv_bytes_per_token=kv_per_token,
        state_bytes=state,
        block_size_tokens=dep.block_size_tokens,
    )
    return MemoryBreakdown(
        device_capacity_bytes=capacity,
        usable_bytes=usable,
        weights_bytes=weights,
        kv_bytes_per_token=kv_per_token,
        state_bytes_per_sequence=state,
        activation_bytes=activation,
        runtime_bytes=runtime,
        reserved_bytes=capacity - usable,
        kv_budget_bytes=budget,
        kv_bytes_per_sequence=per_sequence,
        kv_budget_fraction_of_capacity=max(budget, 0) / capacity,
    )


def fits(dep: Deployment) -> bool:
    """Whether dep passes the checks and its engine holds at least one ctx sequence (for advice hints)."""
    try:
        check_supported(dep)
        mem = memory_breakdown(dep)
        return mem.kv_budget_bytes >= mem.kv_bytes_per_sequence and max_batch_size(dep, mem) >= 1
    except KvplanError:
        return False


def _no_fit_hint(dep: Deployment, mem: MemoryBreakdown) -> str:
    longest = 0
    if mem.kv_budget_bytes > 0 and mem.kv_bytes_per_token:
        longest = memory.max_seq_len_at_batch(
            mem.kv_budget_bytes,
            batch=1,
            kv_bytes_per_token=mem.kv_bytes_per_token,
            state_bytes=mem.state_bytes_per_sequence,
            block_size_tokens=dep.block_size_tokens,
        )
    hints = advice.no_fit_hints(dep, fits=fits, longest_ctx_tokens=longest)
    return "try " + " or ".join(hints) if hints else "no larger --tp or smaller --dtype fits this card"


def check_fits(dep: Deployment, mem: MemoryBreakdown) -> None:
    """Raise DoesNotFitError, with the numbers and what would help, when not one sequence of ctx fits."""
    if mem.kv_budget_bytes >= mem.kv_bytes_per_sequence:
        return
    where = (
        f"{dep.model.id} ({dep.weight_scheme.name}) does not fit on {dep.hardware.id} "
        f"at {layout.describe(dep)}"
    )
    if mem.kv_budget_bytes <= 0:
        need = mem.weights_bytes + mem.activation_bytes + mem.runtime_bytes
        detail = (
            f"weights + activations + runtime need {units.fmt_gib(need)} per device, "
            f"{units.fmt_gib(mem.usable_bytes)} usable"
        )
    else:
        detail = (
            f"one {dep.ctx_tokens}-token sequence needs {units.fmt_gib(mem.kv_bytes_per_sequence)} of KV, "
            f"{units.fmt_gib(mem.kv_budget_bytes)} left after weights"
        )
    raise DoesNotFitError(f"{where}: {detail}; {_no_fit_hint(dep, mem)}")


def max_batch_size(dep: Deployment, mem: MemoryBreakdown) -> int:
    """Most sequences of ctx the engine holds on the memory plan (the one batch cap): one cell of
    max_batch_grid, the grid `kvplan sweep` and the dashboard read; DoesNotFitError in the engine's words
    when it holds none."""
    return registry.max_batch_size(dep, mem)


def max_batch_grid(dep: Deployment, mem: MemoryBreakdown, *, ctx_tokens: IntArray) -> IntArray:
    """Most sequences of each ctx one DP group holds on the memory plan: registry.max_batch_grid (the
    engine's own accounting: MindIE's blocks, vLLM's pool, the engine-neutral bound otherwise)."""
    return registry.max_batch_grid(dep, mem, ctx_tokens=ctx_tokens)


def recommend(dep: Deployment, mem: MemoryBreakdown) -> Recommendation:
    """max_batch_size at ctx for the whole instance: dp x what one DP group's KV holds (memory is per device,
    and each DP group holds only its own sequences' KV); max_seq_len = ctx (recommend_per_rank)."""
    rank_dep = per_dp_rank(dep)
    rec = recommend_per_rank(rank_dep, mem)
    if dep.dp == 1:
        return rec
    instance = dep.batch if dep.batch is not None else rec.max_batch_size * dep.dp
    return rec.model_copy(update={"max_batch_size": instance})


def per_dp_rank(dep: Deployment) -> Deployment:
    """The deployment as one DP group sees it: --batch N becomes ceil(N / dp) sequences."""
    if dep.dp == 1 or dep.batch is None:
        return dep
    return dep.model_copy(update={"batch": layout.per_dp_rank_batch(dep.batch, dp=dep.dp)})


def longest_at_batch(dep: Deployment, mem: MemoryBreakdown) -> int:
    """Longest sequence (tokens, whole blocks, at most the model's max_position_embeddings) of which one DP
    group holds dep.batch by the engine's own accounting (max_batch_grid); 0 when none. Bisection over whole
    blocks (held never grows with length): log2(max_position / block) cells, not one per block."""
    block, batch = dep.block_size_tokens, dep.batch or 1
    low, high = 0, dep.model.max_position_embeddings // block  # `low` blocks hold the batch (0 trivially)
    while low < high:
        mid = (low + high + 1) // 2
        held = max_batch_grid(dep, mem, ctx_tokens=np.array([mid * block], dtype=np.int64))[0]
        low, high = (mid, high) if held >= batch else (low, mid - 1)
    return low * block


def recommend_per_rank(dep: Deployment, mem: MemoryBreakdown) -> Recommendation:
    """max_batch_size at ctx from one device's memory (or --batch when it fits); max_seq_len is always ctx,
    the length the configs write (maxSeqLen, --max-model-len); plan_warnings says how long sequences could
    be at --batch."""
    max_batch = max_batch_size(dep, mem)
    registry.check_batch_cap(dep, batch=dep.batch, flag="--batch")
    if dep.batch is None:
        cap = registry.batch_cap(dep)
        binding = "engine limit" if cap is not None and max_batch >= cap else "memory"
        return Recommendation(
            max_batch_size=max_batch, max_seq_len=dep.ctx_tokens, binding_constraint=binding
        )
    if dep.batch > max_batch:
        longest = longest_at_batch(dep, mem)
        room = f"at --batch {dep.batch} the longest sequence is {longest} tokens" if longest else ""
        raise DoesNotFitError(
            f"--batch: {dep.batch} sequences of {dep.ctx_tokens} tokens do not fit on {dep.hardware.id} "
            f"at {layout.describe(dep)} (got {dep.batch}, expected <= {max_batch} at this --ctx"
            f"{' per DP group' if dep.dp > 1 else ''}); {room or 'no sequence length leaves room for them'}"
        )
    return Recommendation(max_batch_size=dep.batch, max_seq_len=dep.ctx_tokens, binding_constraint="batch")


def engine_notes(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]:
    """What the batch assumes of the engine, and the longer context a smaller --batch leaves room for."""
    notes = registry.engine_notes(dep, mem, rec)
    if dep.batch is not None:
        longest = longest_at_batch(per_dp_rank(dep), mem)
        if longest > dep.ctx_tokens:
            notes.append(
                f"--batch {dep.batch}: memory holds sequences of up to {longest} tokens; the plan and "
                f"the configs keep max_seq_len = --ctx {dep.ctx_tokens} (raise --ctx to use the room)"
            )
    return notes


# Vision towers of the multimodal releases carded as text decoders: Qwen3.5's ~0.4-0.9 B parameters (the
# cards' notes; a Qwen3.6-27B safetensors reading of 55.56 GB against kvplan's 53.79 GB of text weights and
# its MTP layer leaves ~0.4 B), Kimi-K2.5's 27-layer MoonViT.  [assumed: not read from a checkpoint]
VISION_TOWER_NOTE = (
    "weights: {model}'s card is the text decoder; the released checkpoint's vision tower, which MindIE and "
    "vLLM load with it, is not counted (about 0.4-0.9 B parameters, 0.8-1.8 GB at 16 bits): keep that much "
    "headroom, or `kvplan models import` the checkpoint for its exact bytes"
)


def plan_warnings(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation, pool_bytes: int) -> list[str]:
    """Advice that does not stop the plan: context beyond the model, the KV share (one DP group's batch x
    pool_bytes, one sequence in the engine's pool: Plan.pool_sequence_bytes) vs the 30-40 % guideline."""
    notes: list[str] = []
    if dep.ctx_tokens > dep.model.max_position_embeddings:
        notes.append(
            f"--ctx {dep.ctx_tokens} exceeds {dep.model.id}'s max_position_embeddings "
            f"({dep.model.max_position_embeddings}); quality may suffer (MindIE docs)"
        )
    low, high = KV_GUIDELINE_FRACTION
    rank_batch = layout.per_dp_rank_batch(rec.max_batch_size, dp=dep.dp)
    used_fraction = rank_batch * pool_bytes / mem.device_capacity_bytes
    if not low <= used_fraction <= high:
        notes.append(
            f"KV cache at the recommended batch takes {units.fmt_fraction(used_fraction)} of device memory; "
            f"the seed article's rule of thumb is {units.fmt_fraction(low)}-{units.fmt_fraction(high)}"
        )
    measured = dep.hardware.measured
    if measured is not None and measured.backend == "bench-fit" and dep.calibrated:
        notes.append(f"{dep.hardware.id} speeds: {measured.device_name}")
    if not dep.hardware.is_calibrated:
        notes.append(
            f"{dep.hardware.id} is uncalibrated: speeds use datasheet peaks and assumed efficiencies "
            f"(run `kvplan calibrate`)"
        )
    if dep.model.vision_tower_uncounted:
        notes.append(VISION_TOWER_NOTE.format(model=dep.model.id))
    return notes + engine_notes(dep, mem, rec)


def memory_plan(dep: Deployment) -> tuple[MemoryBreakdown, Recommendation]:
    """Checks, memory breakdown and the memory-bound recommendation (DoesNotFitError when nothing fits)."""
    check_supported(dep)
    mem = memory_breakdown(dep)
    check_fits(dep, mem)
    return mem, recommend(dep, mem)


class Admission(Frozen):
    """How many of a replica's clients the engine runs at once, and why the rest queue.

    clients          closed-loop users sent to this replica (K)
    running          sequences decoded together: min(K, engine cap, full-length memory batch)
    engine_cap       the engine's running-sequence limit (--max-batch, else the engine's default: vLLM
                     max_num_seqs, MindIE maxBatchSize; running_cap())
    full_length_batch  sequences the KV pool holds with every one at full length (one DP group's share
                     at full_length_tokens), at most the engine's own batch limit (registry.batch_cap)
    full_length_tokens  that full length: a request's input + output tokens, at most --ctx
    full_length_bound  what sets full_length_batch: "memory", or "engine limit" where batch_cap does
    """

    model_config = BUILT_ON_FIRST_USE

    clients: int
    running: int
    engine_cap: int
    full_length_batch: int
    full_length_tokens: int
    full_length_bound: str = "memory"

    @computed_field  # type: ignore[prop-decorator]  # in model_dump: the --json admission object
    @property
    def queued(self) -> int:
        """Clients waiting for a slot: K - running."""
        return self.clients - self.running

    @computed_field  # type: ignore[prop-decorator]
    @property
    def beyond_full_length(self) -> bool:
        """True when more sequences were sent than the pool holds at full length (the engines still run
        them: vLLM allocates blocks as tokens arrive and preempts, MindIE queues beyond maxBatchSize)."""
        return min(self.clients, self.engine_cap) > self.full_length_batch


def running_cap(dep: Deployment, *, max_batch: int | None) -> int:
    """The engine's running-sequence cap per DP group: max_batch (--max-batch, a row's max_num_seqs) when
    given, else the engine's default at the plan's batch (registry.running_cap: vLLM max_num_seqs, SGLang
    max_running_requests, MindIE maxBatchSize as `kvplan mindie` writes it). The simulator, `kvplan serve`'s
    analytic estimate and the serving fit all run under it."""
    if max_batch is not None:  # no memory plan needed
        return max_batch
    planned = memory_plan(dep)[1].max_batch_size // dep.dp  # one DP group's share
    return registry.running_cap(dep, max_batch=None, planned_batch=max(1, planned))


def admission(
    dep: Deployment, *, clients: int, engine_cap: int | None, request_tokens: int | None = None
) -> Admission:
    """The running batch of one replica: the one rule `kvplan serve` and the serving fit share.

    Formula: running = max(1, min(K, cap, full_length_batch)), cap = running_cap(dep, max_batch=engine_cap)
    (None: the engine's default, e.g. vLLM's max_num_seqs 256 on Ascend, as the simulator runs it),
    full_length_batch = what one DP group's pool holds at the full length L = min(ctx, request_tokens):
    the plan's max_batch_size / dp at ctx, else max_batch_grid at L (the engines allocate blocks as a
    request grows, so a request of input + output tokens never holds --ctx's worth). Never a refusal: the
    engine queues what it does not run (closed-loop steady state; the simulator shows the on-demand blocks
    and preemptions).
    """
    mem, recommendation = memory_plan(dep)
    length = dep.ctx_tokens if request_tokens is None else min(dep.ctx_tokens, request_tokens)
    if length == dep.ctx_tokens:
        full = recommendation.max_batch_size // dep.dp
    else:
        full = int(max_batch_grid(per_dp_rank(dep), mem, ctx_tokens=np.array([length], dtype=np.int64))[0])
    cap = running_cap(dep, max_batch=engine_cap)
    running = max(1, min(clients, cap, full))
    bound = "engine limit" if (limit := registry.batch_cap(dep)) is not None and full >= limit else "memory"
    return Admission(
        clients=clients,
        running=running,
        engine_cap=cap,
        full_length_batch=full,
        full_length_tokens=length,
        full_length_bound=bound,
    )
