"""Tokens a sequence emits per decode step with multi-token prediction (MTP) drafts: the step model's
per-step output, shared by the plan, the serving analytics and the simulator."""

from __future__ import annotations

from planner.deployment import Deployment


def speculative_tokens_per_step(draft_tokens: int, *, acceptance_fraction: float) -> float:
    """Expected tokens a sequence emits per verify step with k draft tokens of acceptance a each.

    Formula: sum_{i=0..k} a^i = 1 + a + ... + a^k   (the verified token always counts; draft i is kept
    only when drafts 1..i all are, acceptances independent). Bounded by 1 + k; equals 1 when k = 0.
    Seed 002 (Qwen3.5-0.8B, 1 draft, 89.6 %): 1 + 0.896 = 1.896, the reported 1.90 tokens/step.
    """
    return float(sum(acceptance_fraction**i for i in range(draft_tokens + 1)))


def chained_acceptance(draft_tokens: int, *, accepted_share: float) -> float:
    """Per-draft acceptance a (speculative_tokens_per_step's) giving the tokens per step that a share of
    drafted tokens accepted gives.

    vLLM's spec-decode metrics report the draft acceptance rate as accepted / drafted tokens, so its mean
    acceptance length is 1 + k * share ("Avg Draft acceptance rate" = num_accepted_tokens / num_draft_tokens,
    "Mean acceptance length" = 1 + num_accepted_tokens / num_drafts: vllm-project/vllm
    vllm/v1/spec_decode/metrics.py, SpecDecodingLogging.log @ee4ceaae), while the chained a keeps draft i
    only when drafts 1..i are kept. Qwen3.8-27B with 3 drafts at 64.2 % (corpus line
    171): mean length 2.93 as published, where reading 0.642 as a gives 2.32.

    Formula: solve a + a^2 + ... + a^k = k * share for a in [0, 1] (increasing in a: bisection to 1e-12).
    k = 1: a = share; share = 1: a = 1.
    """
    if draft_tokens <= 1 or accepted_share >= 1.0:
        return accepted_share
    target = draft_tokens * accepted_share
    low, high = 0.0, 1.0
    while high - low > 1e-12:
        mid = (low + high) / 2.0
        if speculative_tokens_per_step(draft_tokens, acceptance_fraction=mid) - 1.0 < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def tokens_per_step(dep: Deployment) -> float:
    """Expected tokens per sequence per decode step: speculative when MTP is on, else 1."""
    draft = dep.mtp_tokens if dep.include_mtp else 0
    return speculative_tokens_per_step(draft, acceptance_fraction=dep.mtp_acceptance_fraction)
