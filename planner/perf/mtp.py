"""Tokens a sequence emits per decode step with multi-token prediction (MTP) drafts: the step model's
per-step output, shared by the plan, the serving analytics and the simulator."""

from __future__ import annotations

from typing import TypeVar

from planner.arrays import FloatArray
from planner.deployment import Deployment
from planner.speculation import chained_acceptance as chained_acceptance  # re-exported (lab, callers)
from planner.speculation import speculative_tokens_per_step as speculative_tokens_per_step  # re-exported


def tokens_per_step(dep: Deployment) -> float:
    """Expected tokens per sequence per decode step: speculative when an MTP head or a draft model drafts
    (dep.speculative_tokens), else 1."""
    return speculative_tokens_per_step(
        dep.speculative_tokens, acceptance_fraction=dep.mtp_acceptance_fraction
    )


# a decode step time: one float, or a grid of them (serving/sweep.py)
Step = TypeVar("Step", float, FloatArray)


def tpot_s(decode_step_s: Step, *, tokens_per_step: float) -> Step:
    """Time per output token (TPOT, s/token) in steady decode, as `vllm bench serve` reports it: one decode
    step spread over the tokens it emits.

    Formula: tpot_s = decode_step_s / tokens_per_step (tokens_per_step = 1 without drafts, so TPOT is the
    decode step then; with MTP it is shorter than the step).
    """
    return decode_step_s / tokens_per_step
