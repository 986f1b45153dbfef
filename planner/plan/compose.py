"""Deployment -> Plan: the memory plan (planner/capacity.py), the SLO search and the roofline speed.

Composition only: the formulas live in planner/memory.py, planner/perf/roofline.py and
planner/serving/performance.py.
"""

from __future__ import annotations

from typing import Protocol

from planner import capacity, kinds, layout, units
from planner.degrees import carried
from planner.deployment import Deployment
from planner.engines import registry
from planner.errors import PlanInputError, SloNotMetError
from planner.inputs import ServiceLevels
from planner.perf import fitted, ranges
from planner.results import LayoutReport, Performance, Plan, Recommendation, SloAnswer, SpeedRange
from planner.serving import knee, performance

# The deployment's fields a Plan repeats as they are (same name, same value); the rest it names by id.
PLAN_ECHOES = ("model_alias", "tp", "ctx_tokens", "batch", "block_size_tokens", "memory_fraction")


class SloSearch(Protocol):
    """planner/sim/bench.slo_answer: the one SLO search's answer for a deployment (SloNotMetError, exit 3,
    when one user misses). Passed in by the CLI and the dashboard, so a plan without targets never imports
    the simulator."""

    def __call__(self, dep: Deployment, *, memory_batch: int, slo: ServiceLevels) -> SloAnswer: ...


def apply_slo(
    dep: Deployment, rec: Recommendation, *, slo: ServiceLevels, search: SloSearch
) -> tuple[Recommendation, SloAnswer]:
    """The instance's batch capped by the SLO search; SloNotMetError (exit 3) when --batch is more than the
    targets allow."""
    answer = search(dep, memory_batch=dep.batch or rec.max_batch_size, slo=slo)
    if dep.batch is not None and answer.batch < dep.batch:
        raise SloNotMetError(
            f"--batch: {dep.batch} misses the {answer.binding} target (got {dep.batch}, "
            f"expected <= {answer.batch} at {answer.input_tokens} in / {answer.output_tokens} out)"
        )
    binding = rec.binding_constraint if answer.binding == "memory" else f"slo:{answer.binding}"
    return rec.model_copy(update={"max_batch_size": answer.batch, "binding_constraint": binding}), answer


def build_plan(
    dep: Deployment,
    *,
    prompt_tokens: int | None = None,
    with_performance: bool = True,
    slo: ServiceLevels | None = None,
    slo_search: SloSearch | None = None,
) -> Plan:
    """The whole plan: checks, memory, recommendation (memory, then SLOs), warnings and the roofline speed.

    With dp > 1 the SLO search and the speed run on one DP group (its share of the batch); the instance's
    batch and aggregate tokens/s are dp times the group's.
    """
    prompt = checked_prompt_tokens(dep, prompt_tokens)
    mem, rec = capacity.memory_plan(dep)
    answer = None
    if slo is not None and slo.any:
        if slo_search is None:
            # a caller's bug, not a user's input: loud, never swallowed as "this layout does not fit"
            raise ValueError(
                "build_plan: SLO targets given without slo_search (planner/sim/bench.slo_answer)"
            )
        rec, answer = apply_slo(dep, rec, slo=slo, search=slo_search)
    group_dep = capacity.per_dp_rank(dep)
    perf = None
    if with_performance:  # memory-only plans (MindIE's default schedule times) skip the roofline
        perf = instance_performance(group_dep, batch=rec.max_batch_size, dp=dep.dp, prompt_tokens=prompt)
    report = plan_layout_report(dep, rec)
    pool_sequence_bytes = registry.kv_bytes_at_batch(dep, mem, batch=1)  # the engine's pool, built once
    return Plan(
        **carried(dep, PLAN_ECHOES),
        model=dep.model.id,
        card=dep.hardware.id,
        card_variant=dep.hardware.variant_id,
        engine_block_size_tokens=registry.prefix_cache_block_tokens(dep),
        pool_sequence_bytes=pool_sequence_bytes,
        dtype=dep.weight_scheme.name,
        kv_dtype=dep.kv_dtype.value,
        memory=mem,
        recommendation=rec,
        performance=perf,
        warnings=dtype_warnings(dep)
        + capacity.plan_warnings(dep, mem, rec, pool_sequence_bytes)
        + [f"speed from a fitted profile: {line}" for line in fitted_speed_warnings(dep, rec, perf)]
        + slo_context_warnings(answer, perf),
        layout=report,
        slo=answer,
    )


def dtype_warnings(dep: Deployment) -> list[str]:
    """What the plan, the config commands and serve say of --dtype: checkpoint_dtype_warnings, then
    experts_only_warnings."""
    return checkpoint_dtype_warnings(dep) + experts_only_warnings(dep)


def checkpoint_dtype_warnings(dep: Deployment) -> list[str]:
    """One line when the card records its checkpoint's quantized dtype (checkpoint_dtype, from `kvplan models
    import`) and the plan sizes another: --dtype defaults to the card's 16-bit dtype whatever the checkpoint
    holds."""
    stored = dep.model.checkpoint_dtype
    if stored is None or stored == dep.weight_scheme.name:
        return []
    return [
        f"{dep.model.id}'s checkpoint is quantized to {stored} (the card's checkpoint_dtype), but this plan "
        f"sizes {dep.weight_scheme.name} weights: pass --dtype {stored} to plan that checkpoint"
    ]


def experts_only_warnings(dep: Deployment) -> list[str]:
    """One line when --dtype quantizes the routed experts only (WeightScheme.other_linears: w4a8, w4a16-moe)
    and the model has none: every matmul is then stored as other_linears (memory.linear_scheme), so the plan
    is that dtype's in all but its name."""
    scheme = dep.weight_scheme
    if scheme.other_linears is None or dep.model.is_moe:
        return []
    # a 16-bit other_linears is the card's 16-bit dtype (fp16 on a card without bf16, as the activations)
    other = dep.activation_dtype.value if scheme.other_linears in ("bf16", "fp16") else scheme.other_linears
    return [
        f"--dtype {scheme.name} quantizes routed experts only and {dep.model.id} is dense: every matmul is "
        f"stored as {other} (the figures are --dtype {other}'s); for 4-bit weights in every matmul, use "
        "--dtype w4a16"
    ]


def checked_prompt_tokens(dep: Deployment, prompt_tokens: int | None) -> int:
    """The prompt length the speed uses, in tokens: --prompt-tokens (PlanInputError when outside
    1..ctx_tokens), else the default request's (kinds.default_request_tokens)."""
    if prompt_tokens is not None and not 1 <= prompt_tokens <= dep.ctx_tokens:
        raise PlanInputError(
            f"--prompt-tokens: longer than the context (got {prompt_tokens}, "
            f"expected 1..--ctx {dep.ctx_tokens})"
        )
    return prompt_tokens or kinds.default_request_tokens(dep.ctx_tokens)[0]


def slo_context_warnings(answer: SloAnswer | None, perf: Performance | None) -> list[str]:
    """One line when the recommended batch meets the TPOT target on the SLO search's workload but, decoding at
    the plan's full context (the speed line's TPOT), misses it: the two answers are for different lengths."""
    target_s = (answer.targets_s if answer is not None else {}).get("tpot_s")
    if answer is None or perf is None or target_s is None or perf.tpot_s <= target_s:
        return []
    return [
        f"SLO: the {answer.users} users meet TPOT <= {units.fmt_duration(target_s)} "
        f"at {answer.input_tokens} in / "
        f"{answer.output_tokens} out (the search's workload); with every sequence at the full "
        f"{perf.ctx_tokens} tokens, batch {perf.batch} decodes at TPOT {units.fmt_duration(perf.tpot_s)}, "
        f"over the target: plan --ctx for the lengths you serve, or check that load with `kvplan serve`"
    ]


def plan_layout_report(dep: Deployment, rec: Recommendation) -> LayoutReport | None:
    """The per-rank layout report at the recommended instance batch; None for a tp-only deployment."""
    parts = None if dep.is_tp_only else capacity.weight_bytes_by_part(dep)
    return (
        None
        if parts is None
        else layout.layout_report(dep, instance_batch=rec.max_batch_size, weights_by_part=parts)
    )


def fitted_speed_warnings(dep: Deployment, rec: Recommendation, perf: Performance | None) -> list[str]:
    """The fitted profile's warnings (on a bound, outside its range) at the batch the speed is given for."""
    batch = perf.batch if perf is not None else rec.max_batch_size
    return fitted.profile_warnings(dep, batch=batch, ctx_tokens=dep.ctx_tokens)


def instance_performance(group_dep: Deployment, *, batch: int, dp: int, prompt_tokens: int) -> Performance:
    """Speed of the instance at its batch B: one DP group's step at its share, the instance's batch and
    aggregate tokens/s.

    Formula: b = layout.per_dp_rank_batch(B, dp) = ceil(B / dp) sequences on the fullest group;
    instance tokens/s = B * per-user tokens/s at b (every one of the B sequences steps at the fullest group's
    pace; Performance.tokens_per_s computes it from the instance's batch).
    """
    group_batch = layout.per_dp_rank_batch(batch, dp=dp)
    group = performance.performance(
        group_dep, batch=group_batch, ctx_tokens=group_dep.ctx_tokens, prompt_tokens=prompt_tokens
    )
    if dp > 1:  # the instance's batch; tokens_per_s (computed) = B / TPOT of the fullest group's step
        group = group.model_copy(update={"batch": batch})
    return group.model_copy(update={"speed_range": speed_range(group_dep, group, batch=group_batch)})


def speed_range(group_dep: Deployment, perf: Performance, *, batch: int) -> SpeedRange:
    """The source of the plan's speed and its range (ranges.speed_band at the group's batch and ctx).

    Formula: a throughput x [low, high]; a time (decode step, TPOT, TTFT) / [high, low]; TTFT takes the band's
    prefill pair.
    """
    band = ranges.speed_band(group_dep, batch=batch, ctx_tokens=group_dep.ctx_tokens)
    return SpeedRange(
        source=band.source,
        label=band.label,
        decode_step_s_low=perf.decode_step_s / band.high_factor,
        decode_step_s_high=perf.decode_step_s / band.low_factor,
        tpot_s_low=perf.tpot_s / band.high_factor,
        tpot_s_high=perf.tpot_s / band.low_factor,
        tokens_per_s_low=perf.tokens_per_s * band.low_factor,
        tokens_per_s_high=perf.tokens_per_s * band.high_factor,
        per_user_tokens_per_s_low=perf.per_user_tokens_per_s * band.low_factor,
        per_user_tokens_per_s_high=perf.per_user_tokens_per_s * band.high_factor,
        ttft_s_low=perf.ttft_s / band.ttft_high_factor,
        ttft_s_high=perf.ttft_s / band.ttft_low_factor,
        ttft_source=band.ttft_source,
        extrapolated=band.extrapolated,
        notes=band.notes,
    )


def with_load_knee(plan: Plan, dep: Deployment) -> Plan:
    """The plan with the load knee of one DP group (planner/serving/knee.py: the seed's 256-in / 128-out
    benchmark, analytic closed loop, requests drifting apart, a few ms) when it has a speed; with dp > 1 the
    knee is per group. The knee reads the plan's memory plan (memory is planned once per deployment)."""
    if plan.performance is None:
        return plan
    group_knee = knee.load_knee(capacity.per_dp_rank(dep), memory=plan.memory)
    return plan.model_copy(update={"load_knee": group_knee})
