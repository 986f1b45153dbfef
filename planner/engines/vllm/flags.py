"""The plan in `vllm serve`'s own flag names (vLLM engine arguments; vllm-ascend takes the same), light, so
the plan can print them without loading the vLLM pool model (engines/vllm/args.py writes the command)."""

from __future__ import annotations

from planner.deployment import Deployment
from planner.results import Plan


def serve_words(plan: Plan, dep: Deployment) -> list[tuple[str, str]]:
    """--max-num-seqs (sequences per step), --max-model-len (tokens per request), --max-num-batched-tokens
    (tokens per prefill pass) and --gpu-memory-utilization (share of device memory), from the plan;
    --max-num-seqs is per engine core, so with --data-parallel-size one DP group's share."""
    return [
        ("--max-num-seqs", str(plan.batch_per_dp_group)),
        ("--max-model-len", str(plan.recommendation.max_seq_len)),
        ("--max-num-batched-tokens", str(dep.max_prefill_tokens)),
        ("--gpu-memory-utilization", f"{dep.memory_fraction:g}"),
    ]
