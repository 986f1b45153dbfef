"""Tokens a sequence emits per decode step with multi-token prediction (MTP) drafts: the step model's
per-step output, shared by the plan, the serving analytics and the simulator."""

from __future__ import annotations

from planner.deployment import Deployment
from planner.speculation import chained_acceptance as chained_acceptance  # re-exported (lab, callers)
from planner.speculation import speculative_tokens_per_step as speculative_tokens_per_step  # re-exported


def tokens_per_step(dep: Deployment) -> float:
    """Expected tokens per sequence per decode step: speculative when an MTP head or a draft model drafts
    (dep.speculative_tokens), else 1."""
    return speculative_tokens_per_step(
        dep.speculative_tokens, acceptance_fraction=dep.mtp_acceptance_fraction
    )
