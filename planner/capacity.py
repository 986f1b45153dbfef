"""Deployment -> Plan: checks the inputs against the card, sizes memory, recommends lengths, adds speed.

The formulas live in memory.py and roofline.py; this module only composes them and words the outcome.
"""

from __future__ import annotations

from planner import memory, units
from planner.deployment import Deployment
from planner.errors import DoesNotFitError, PlanInputError
from planner.results import MemoryBreakdown, Performance, Plan, Recommendation

MINDIE_MAX_BATCH_SIZE = 5000  # ScheduleConfig.maxBatchSize range [1, 5000] (MindIE service parameter docs)
# The seed article's rule of thumb: the KV cache should take 30-40 % of HBM.  [seed: Qwen3-27B on 950PR]
KV_GUIDELINE_FRACTION = (0.30, 0.40)


def check_supported(dep: Deployment) -> None:
    """Reject dtype/parallelism combinations the card or the engines cannot run (PlanInputError)."""
    hw, scheme = dep.hardware, dep.weight_scheme
    native = ", ".join(hw.native_dtypes)
    if scheme.requires_native and scheme.requires_native not in hw.native_dtypes:
        alternatives = [d for d in ("int8", "w8a16", "w4a16") if d == "w8a16" or d == "w4a16" or d in hw.native_dtypes]
        raise PlanInputError(
            f"--dtype: {scheme.name} needs native {scheme.requires_native} units, which {hw.id} lacks "
            f"(got {scheme.name}, card supports {native}); try --dtype {' or '.join(alternatives)}"
        )
    if dep.kv_dtype.value not in hw.native_dtypes:
        raise PlanInputError(
            f"--kv-dtype: {hw.id} has no native {dep.kv_dtype.value} (got {dep.kv_dtype.value}, "
            f"expected one of {native})"
        )
    heads = dep.model.num_attention_heads
    if heads % dep.tp:
        divisors = [t for t in (1, 2, 4, 8, 16, 32) if heads % t == 0]
        raise PlanInputError(
            f"--tp: {dep.model.id} has {heads} attention heads, not divisible by tp "
            f"(got {dep.tp}, expected one of {', '.join(map(str, divisors))})"
        )


def memory_breakdown(dep: Deployment) -> MemoryBreakdown:
    """Per-device memory plan for the deployment at ctx_tokens (KV of one sequence of ctx tokens)."""
    card, hw = dep.model, dep.hardware
    capacity = hw.memory_capacity_bytes
    usable = memory.usable_bytes(capacity, memory_fraction=dep.memory_fraction)
    weights = memory.weight_bytes_per_device(card, scheme=dep.weight_scheme, activation_dtype=dep.activation_dtype,
                                             tp=dep.tp, include_mtp=dep.include_mtp)
    activation = memory.activation_bytes_per_device(card, max_prefill_tokens=dep.max_prefill_tokens,
                                                    activation_dtype=dep.activation_dtype, tp=dep.tp)
    kv_per_token = memory.kv_cache_bytes_per_token(card, kv_dtype=dep.kv_dtype, tp=dep.tp, mtp=dep.include_mtp)
    state = memory.linear_state_bytes_per_sequence(card, conv_dtype=dep.activation_dtype, tp=dep.tp)
    budget = memory.kv_budget_bytes(usable, weights=weights, activation=activation, runtime=hw.runtime_overhead_bytes)
    per_sequence = memory.sequence_bytes(dep.ctx_tokens, kv_bytes_per_token=kv_per_token, state_bytes=state,
                                         block_size_tokens=dep.block_size_tokens)
    return MemoryBreakdown(
        device_capacity_bytes=capacity, usable_bytes=usable, weights_bytes=weights,
        kv_bytes_per_token=kv_per_token, state_bytes_per_sequence=state, activation_bytes=activation,
        runtime_bytes=hw.runtime_overhead_bytes, reserved_bytes=capacity - usable, kv_budget_bytes=budget,
        kv_bytes_per_sequence=per_sequence, kv_budget_fraction_of_capacity=max(budget, 0) / capacity,
    )


def _no_fit_hint(dep: Deployment, mem: MemoryBreakdown) -> str:
    hints = [f"--tp {dep.tp * 2}"]
    if dep.weight_scheme.weight_bits > 8:
        hints.append("a smaller --dtype (fp8, int8 or w8a16)")
    if mem.kv_budget_bytes > 0 and mem.kv_bytes_per_token:
        longest = memory.max_seq_len_at_batch(mem.kv_budget_bytes, batch=1, kv_bytes_per_token=mem.kv_bytes_per_token,
                                              state_bytes=mem.state_bytes_per_sequence,
                                              block_size_tokens=dep.block_size_tokens)
        if longest:
            hints.append(f"--ctx {longest} or less")
    return "try " + " or ".join(hints)


def check_fits(dep: Deployment, mem: MemoryBreakdown) -> None:
    """Raise DoesNotFitError, with the numbers and what would help, when not one sequence of ctx fits."""
    if mem.kv_budget_bytes >= mem.kv_bytes_per_sequence:
        return
    where = f"{dep.model.id} ({dep.weight_scheme.name}) does not fit on {dep.hardware.id} at tp={dep.tp}"
    if mem.kv_budget_bytes <= 0:
        need = mem.weights_bytes + mem.activation_bytes + mem.runtime_bytes
        detail = (f"weights + activations + runtime need {units.fmt_gib(need)} per device, "
                  f"{units.fmt_gib(mem.usable_bytes)} usable")
    else:
        detail = (f"one {dep.ctx_tokens}-token sequence needs {units.fmt_gib(mem.kv_bytes_per_sequence)} of KV, "
                  f"{units.fmt_gib(mem.kv_budget_bytes)} left after weights")
    raise DoesNotFitError(f"{where}: {detail}; {_no_fit_hint(dep, mem)}")


def recommend(dep: Deployment, mem: MemoryBreakdown) -> Recommendation:
    """max_batch_size at ctx from memory; max_seq_len at the chosen batch (whole blocks, capped by the model)."""
    max_batch = min(memory.max_concurrent_sequences(mem.kv_budget_bytes, per_sequence_bytes=mem.kv_bytes_per_sequence),
                    MINDIE_MAX_BATCH_SIZE)
    batch = dep.batch or max_batch
    if batch > max_batch:
        longest = memory.max_seq_len_at_batch(mem.kv_budget_bytes, batch=batch, kv_bytes_per_token=mem.kv_bytes_per_token,
                                              state_bytes=mem.state_bytes_per_sequence,
                                              block_size_tokens=dep.block_size_tokens)
        raise DoesNotFitError(
            f"--batch: {batch} sequences of {dep.ctx_tokens} tokens do not fit on {dep.hardware.id} at tp={dep.tp} "
            f"(got {batch}, expected <= {max_batch} at this --ctx); at --batch {batch} the longest sequence is "
            f"{longest} tokens"
        )
    if dep.batch is None:
        return Recommendation(max_batch_size=max_batch, max_seq_len=dep.ctx_tokens)
    longest = memory.max_seq_len_at_batch(mem.kv_budget_bytes, batch=batch, kv_bytes_per_token=mem.kv_bytes_per_token,
                                          state_bytes=mem.state_bytes_per_sequence,
                                          block_size_tokens=dep.block_size_tokens)
    return Recommendation(max_batch_size=batch, max_seq_len=min(longest, dep.model.max_position_embeddings))


def plan_warnings(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]:
    """Advice that does not stop the plan: context beyond the model, KV share vs the 30-40 % guideline."""
    notes: list[str] = []
    if dep.ctx_tokens > dep.model.max_position_embeddings:
        notes.append(f"--ctx {dep.ctx_tokens} exceeds {dep.model.id}'s max_position_embeddings "
                     f"({dep.model.max_position_embeddings}); quality may suffer (MindIE docs)")
    low, high = KV_GUIDELINE_FRACTION
    used_fraction = rec.max_batch_size * mem.kv_bytes_per_sequence / mem.device_capacity_bytes
    if not low <= used_fraction <= high:
        notes.append(f"KV cache at the recommended batch takes {units.fmt_fraction(used_fraction)} of device memory; "
                     f"the seed article's rule of thumb is {units.fmt_fraction(low)}-{units.fmt_fraction(high)}")
    if not dep.hardware.is_calibrated:
        notes.append(f"{dep.hardware.id} is uncalibrated: speeds use datasheet peaks and assumed efficiencies "
                     f"(run `kvplan calibrate`)")
    return notes


def performance_at(dep: Deployment, *, batch: int, prompt_tokens: int) -> Performance:
    """Roofline speed at `batch` sequences each holding ctx_tokens, and TTFT for one prompt."""
    from planner import roofline, serving  # deferred: keeps plan-only callers light

    step_s = roofline.decode_step_s(dep, batch=batch, ctx_tokens=dep.ctx_tokens)
    tokens_per_step = serving.speculative_tokens_per_step(dep.mtp_tokens if dep.include_mtp else 0,
                                                          acceptance_fraction=dep.mtp_acceptance_fraction)
    per_user = tokens_per_step / step_s
    return Performance(
        batch=batch, ctx_tokens=dep.ctx_tokens, decode_step_s=step_s, tokens_per_s=per_user * batch,
        per_user_tokens_per_s=per_user, ttft_s=roofline.ttft_s(dep, prompt_tokens=prompt_tokens),
        calibrated=dep.calibrated and dep.hardware.is_calibrated,
    )


def build_plan(dep: Deployment, *, prompt_tokens: int | None = None, with_performance: bool = True) -> Plan:
    """The whole plan: checks, memory, recommendation, warnings and (when asked) the roofline speed."""
    check_supported(dep)
    mem = memory_breakdown(dep)
    check_fits(dep, mem)
    rec = recommend(dep, mem)
    perf = None
    if with_performance:
        perf = performance_at(dep, batch=rec.max_batch_size, prompt_tokens=prompt_tokens or dep.ctx_tokens)
    return Plan(
        model=dep.model.id, model_alias=dep.model_alias, card=dep.hardware.id, dtype=dep.weight_scheme.name,
        kv_dtype=dep.kv_dtype.value, tp=dep.tp, ctx_tokens=dep.ctx_tokens, batch=dep.batch,
        block_size_tokens=dep.block_size_tokens, memory_fraction=dep.memory_fraction, memory=mem,
        recommendation=rec, performance=perf, warnings=plan_warnings(dep, mem, rec),
    )

