"""Layout search: every tp x dp x ep x pp layout that fits a device budget, planned with the SLOs, ranked by
tokens/s per device (what aiconfigurator and msModeling offer, here on Ascend's interconnect).

Composition only: each candidate is a whole plan, built by the plan builder the caller passes
(planner/plan/compose.py build_plan: memory, SLO search, roofline speed with the layout's collectives);
impossible layouts and SLO misses are counted, not shown.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import Field

from planner import capacity, kinds, layout
from planner.degrees import DEGREES, MAX_TP, Degrees, carried
from planner.deployment import Deployment
from planner.engines import registry
from planner.errors import KvplanError, PlanInputError
from planner.inputs import ServiceLevels
from planner.results import Plan
from planner.schema import Frozen

MAX_BUDGET_DEVICES = 1024
PIPELINE_STAGES = (1, 2, 4)  # pipeline degrees tried (vLLM only; kvplan plans no MindIE pipeline)


class PlanBuilder(Protocol):
    """planner/plan/compose.py build_plan: one whole plan of a deployment (KvplanError when impossible)."""

    def __call__(self, dep: Deployment, *, prompt_tokens: int, slo: ServiceLevels) -> Plan: ...


class LayoutCandidate(Degrees):
    """One layout (its degrees: Degrees) that fits and meets the SLOs; speeds per instance, replicas fill
    the budget."""

    devices: int = Field(description="devices of one instance: tp x dp x pp")
    replicas: int = Field(description="instances the budget holds: floor(budget / devices)")
    max_batch_size: int
    decode_step_s: float = Field(
        description="one decode step at the batch and the full ctx (the plan's speed)"
    )
    tpot_s: float = Field(description="time per output token there: decode_step_s / MTP tokens per step")
    ttft_s: float = Field(description="one prompt of LayoutSearch.prompt_tokens alone")
    tokens_per_s: float = Field(description="one instance's aggregate decode tokens/s")
    tokens_per_s_per_device: float
    binding_constraint: str
    # with SLO targets: the p99 tails the SLO search simulated at the batch (the default workload, as the
    # targets are checked; None without targets)
    slo_tpot_p99_s: float | None = None
    slo_ttft_p99_s: float | None = None


class LayoutSearch(Frozen):
    """Candidates best first (tokens/s per device, then fewer devices); `tried` layouts in all."""

    budget_devices: int
    tried: int
    prompt_tokens: int = Field(description="the prompt every candidate's TTFT is for (one request alone)")
    candidates: list[LayoutCandidate]


def powers_of_two(limit: int) -> list[int]:
    """1, 2, 4, ... up to limit."""
    return [1 << i for i in range(limit.bit_length()) if 1 << i <= limit]


def candidate_degrees(dep: Deployment, *, budget: int) -> list[Degrees]:
    """(tp, dp, ep, pp) with tp x dp x pp <= budget: powers of two, tp <= 64; ep 1 for dense models, else
    the divisors of tp x dp (MindIE) or 1 and tp x dp (vLLM's --enable-expert-parallel); pp > 1 on vLLM."""
    stages = PIPELINE_STAGES if registry.supports_pipeline(dep) else (1,)
    found = []
    for tp in powers_of_two(min(budget, MAX_TP)):
        for dp in powers_of_two(budget // tp):
            for pp in (p for p in stages if tp * dp * p <= budget):
                for ep in expert_degrees(dep, group=tp * dp):
                    found.append(Degrees(tp=tp, dp=dp, ep=ep, pp=pp))
    return found


def expert_degrees(dep: Deployment, *, group: int) -> list[int]:
    """Expert-parallel degrees worth trying for a MoE layer group of `group` ranks."""
    if not dep.model.is_moe:
        return [1]
    return registry.expert_degrees(dep, group=group, candidates=powers_of_two(group))


def candidate(
    dep: Deployment, *, budget: int, slo: ServiceLevels, prompt: int, plan_of: PlanBuilder
) -> LayoutCandidate:
    """Plan one layout (KvplanError when it is impossible, does not fit or misses an SLO)."""
    capacity.check_supported(dep)
    result = plan_of(dep, prompt_tokens=prompt, slo=slo)
    perf = result.performance
    if perf is None:  # build_plan always computes it here; kept for the type checker
        raise KvplanError("no performance estimate")
    devices = layout.world_size(dep)
    return LayoutCandidate(
        **carried(dep, DEGREES),
        devices=devices,
        replicas=budget // devices,
        max_batch_size=result.recommendation.max_batch_size,
        decode_step_s=perf.decode_step_s,
        tpot_s=perf.tpot_s,
        ttft_s=perf.ttft_s,
        tokens_per_s=perf.tokens_per_s,
        tokens_per_s_per_device=perf.tokens_per_s / devices,
        binding_constraint=result.recommendation.binding_constraint,
        slo_tpot_p99_s=None if result.slo is None else result.slo.tpot_s,
        slo_ttft_p99_s=None if result.slo is None else result.slo.ttft_s,
    )


def search_layouts(
    dep: Deployment,
    *,
    budget: int,
    slo: ServiceLevels,
    plan_of: PlanBuilder,
    prompt_tokens: int | None = None,
    keep: int | None = None,
) -> LayoutSearch:
    """Candidate layouts of the deployment within `budget` devices, each planned by `plan_of`
    (compose.build_plan), ranked best first: every one that fits, or with SLOs and `keep` the best `keep`
    (and any others searched on the way).

    Formula: score = instance tokens/s / (tp x dp x pp); ties go to the smaller instance.
    With SLOs each layout is first planned without them: the SLO search can only lower its batch, so that
    score bounds it from above. The SLO searches (a dozen simulations each) then run best bound first and
    stop once `keep` layouts score above every bound still unsearched.
    """
    prompt = prompt_tokens or kinds.default_request_tokens(dep.ctx_tokens)[0]
    refusals: list[KvplanError] = []
    degrees = candidate_degrees(dep, budget=budget)
    bounds: list[tuple[LayoutCandidate, Deployment]] = []
    for degree in degrees:
        trial = dep.model_copy(update={**carried(degree, DEGREES), "nodes": None})
        try:
            free = candidate(trial, budget=budget, slo=ServiceLevels(), prompt=prompt, plan_of=plan_of)
        except KvplanError as exc:
            refusals.append(exc)
            continue
        bounds.append((free, trial))
    bounds.sort(key=lambda pair: rank(pair[0]))
    found = [free for free, _ in bounds] if not slo.any else []
    for free, trial in bounds if slo.any else []:
        best = sorted(found, key=rank)
        if (
            keep is not None
            and len(best) >= keep
            and best[keep - 1].tokens_per_s_per_device > free.tokens_per_s_per_device
        ):
            break  # no layout left can enter the best `keep`
        try:
            found.append(candidate(trial, budget=budget, slo=slo, prompt=prompt, plan_of=plan_of))
        except KvplanError as exc:
            refusals.append(exc)
    if not found and refusals and all(type(exc) is PlanInputError for exc in refusals):
        raise refusals[0]  # an input every layout refuses (a KV dtype, a drafter, a block size): say which
    found.sort(key=rank)
    return LayoutSearch(budget_devices=budget, tried=len(degrees), prompt_tokens=prompt, candidates=found)


def rank(c: LayoutCandidate) -> tuple[float, int]:
    """Sort key, best first: tokens/s per device, then the smaller instance."""
    return (-c.tokens_per_s_per_device, c.devices)
