"""The plan in `python -m sglang.launch_server`'s own flag names (server_args.py), light, so the plan can
print them (engines/sglang/launch.py writes the whole command for `kvplan sglang`)."""

from __future__ import annotations

from planner.deployment import Deployment
from planner.engines.sglang import defaults
from planner.results import Plan

MODULE = "python -m sglang.launch_server"


def layout_words(dep: Deployment) -> list[tuple[str, str | None]]:
    """--tp-size (kvplan's tp x dp), and --dp-size with --enable-dp-attention, --ep-size, --pp-size where
    used (docs/engines/sglang.md "Layouts")."""
    words: list[tuple[str, str | None]] = [("--tp-size", str(defaults.sglang_tp(tp=dep.tp, dp=dep.dp)))]
    if dep.dp > 1:
        words += [("--dp-size", str(dep.dp)), ("--enable-dp-attention", None)]
    words += [("--ep-size", str(dep.ep))] if dep.ep > 1 else []
    words += [("--pp-size", str(dep.pp))] if dep.pp > 1 else []
    return words


def plan_words(plan: Plan, dep: Deployment, *, ctx_tokens: int | None = None) -> list[tuple[str, str]]:
    """The plan's sizing flags: --max-running-requests (the plan's batch x dp: SGLang gives each attention-DP
    rank R // dp), --context-length (ctx_tokens, else the plan's max_seq_len), --chunked-prefill-size (the
    plan's prefill tokens per pass), --mem-fraction-static, --page-size."""
    return [
        ("--max-running-requests", str(plan.batch_per_dp_group * dep.dp)),
        ("--context-length", str(ctx_tokens or plan.recommendation.max_seq_len)),
        ("--chunked-prefill-size", str(dep.max_prefill_tokens)),
        ("--mem-fraction-static", f"{dep.memory_fraction:g}"),
        ("--page-size", str(defaults.page_tokens(dep.hardware))),
    ]
