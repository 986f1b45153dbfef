"""Deployment -> Plan: the memory plan (planner/capacity.py), the SLO search and the roofline speed.

Composition only: the formulas live in planner/memory.py, planner/perf/roofline.py and
planner/perf/serving.py.
"""

from __future__ import annotations

from pydantic import Field

from planner import capacity
from planner.deployment import Deployment
from planner.errors import DoesNotFitError
from planner.perf import serving
from planner.results import Plan, Recommendation
from planner.schema import Frozen


class ServiceLevels(Frozen):
    """Latency targets for the SLO search; None means unconstrained."""

    tpot_s: float | None = Field(default=None, gt=0)
    ttft_s: float | None = Field(default=None, gt=0)
    min_user_tokens_per_s: float | None = Field(default=None, gt=0)

    @property
    def any(self) -> bool:
        """True when at least one target is set."""
        return any(v is not None for v in (self.tpot_s, self.ttft_s, self.min_user_tokens_per_s))


def apply_slo(
    dep: Deployment, rec: Recommendation, *, slo: ServiceLevels, prompt_tokens: int
) -> Recommendation:
    """Largest batch <= the memory limit that meets every SLO; DoesNotFitError when batch 1 misses one."""
    limit = dep.batch or rec.max_batch_size
    result = serving.search_slo(
        dep,
        tpot_s=slo.tpot_s,
        ttft_s=slo.ttft_s,
        min_user_tokens_per_s=slo.min_user_tokens_per_s,
        max_batch_by_memory=limit,
        prompt_tokens=prompt_tokens,
    )
    if not result.feasible:
        flag = {"tpot": "--tpot-ms", "ttft": "--ttft-ms", "min-user-tps": "--min-user-tps"}.get(
            result.binding, "--batch"
        )
        raise DoesNotFitError(
            f"{flag}: not met even at batch 1 for {dep.model.id} on {dep.hardware.id} at "
            f"ctx {dep.ctx_tokens} (see `kvplan serve` for the achievable values); "
            f"try a shorter --ctx, a smaller --dtype or a larger --tp"
        )
    if dep.batch is not None and result.batch < dep.batch:
        raise DoesNotFitError(
            f"--batch: {dep.batch} misses the {result.binding} target (got {dep.batch}, "
            f"expected <= {result.batch})"
        )
    return rec.model_copy(
        update={
            "max_batch_size": result.batch,
            "binding_constraint": "memory" if result.batch == limit else result.binding,
        }
    )


def build_plan(
    dep: Deployment,
    *,
    prompt_tokens: int | None = None,
    with_performance: bool = True,
    slo: ServiceLevels | None = None,
) -> Plan:
    """The whole plan: checks, memory, recommendation (memory, then SLOs), warnings and the roofline speed."""
    mem, rec = capacity.memory_plan(dep)
    prompt = prompt_tokens or dep.ctx_tokens
    if slo is not None and slo.any:
        rec = apply_slo(dep, rec, slo=slo, prompt_tokens=prompt)
    perf = None
    if with_performance:  # memory-only plans (MindIE's default schedule times) skip the roofline
        perf = serving.performance(
            dep, batch=rec.max_batch_size, ctx_tokens=dep.ctx_tokens, prompt_tokens=prompt
        )
    return Plan(
        model=dep.model.id,
        model_alias=dep.model_alias,
        card=dep.hardware.id,
        dtype=dep.weight_scheme.name,
        kv_dtype=dep.kv_dtype.value,
        tp=dep.tp,
        ctx_tokens=dep.ctx_tokens,
        batch=dep.batch,
        block_size_tokens=dep.block_size_tokens,
        memory_fraction=dep.memory_fraction,
        memory=mem,
        recommendation=rec,
        performance=perf,
        warnings=capacity.plan_warnings(dep, mem, rec),
    )
