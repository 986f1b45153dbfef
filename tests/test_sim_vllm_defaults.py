"""The simulator's vLLM scheduler runs with the engine's own defaults (issue 23, section 3): vllm-ascend's
max_num_seqs / max_num_batched_tokens, read from the engine room (planner/engines/vllm/startup.py through
planner/engines/registry.py), not vLLM's large-GPU defaults on a large Ascend card."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from planner import inputs
from planner.cli import app
from planner.deployment import Deployment
from planner.engines.vllm import scheduler as vllm_scheduler
from planner.engines.vllm import versions
from planner.sim import run
from planner.sim import workload as wl

runner = CliRunner()


def vllm_deployment(card: str, *, memory_gib: float | None = None) -> Deployment:
    return inputs.to_deployment(
        inputs.PlanRequest(
            model="qwen3-8b", card=card, dtype="bf16", ctx="4k", engine="vllm", memory_gib=memory_gib
        )
    )


def closed_work(prompt: int, output: int, *, users: int, count: int = 64) -> wl.Workload:
    tokens = np.full(count, prompt, dtype=np.int64), np.full(count, output, dtype=np.int64)
    return wl.Workload(*tokens, arrival_s=None, concurrency=users)


def test_ascend_card_of_112_gib_runs_vllm_ascends_256_sequences_and_2048_tokens() -> None:
    """vllm-ascend cannot report device memory to vLLM (platform.py:206-213 @182b75ea), so a 112 GiB 950PR
    gets the small defaults; the old simulator ran it with vLLM's >= 70 GiB defaults (1024 / 8192)."""
    dep = vllm_deployment("ascend-950pr")
    assert dep.hardware.memory_capacity_bytes >= 70 * 2**30  # a card vLLM on CUDA would call large
    cfg = run.default_config(dep, workload=closed_work(256, 128, users=8))
    facts = vllm_scheduler.scheduler_defaults(
        versions.VERSIONS["vllm-ascend-main"], device_total_bytes=dep.hardware.device_total_bytes
    )
    assert (cfg.max_batch, cfg.max_batched_tokens) == (facts.max_num_seqs, facts.max_num_batched_tokens)
    assert (cfg.max_batch, cfg.max_batched_tokens) == (256, 2048)


def test_cuda_card_keeps_vllms_size_dependent_defaults() -> None:
    large = run.default_config(vllm_deployment("nvidia-h200"), workload=closed_work(256, 128, users=8))
    small = run.default_config(vllm_deployment("nvidia-l40s"), workload=closed_work(256, 128, users=8))
    assert (large.max_batch, large.max_batched_tokens) == (1024, 8192)
    assert (small.max_batch, small.max_batched_tokens) == (256, 2048)


def test_mindie_keeps_its_planned_prefill_budget() -> None:
    """MindIE prefills a prompt in one pass: its simulated budget is the plan's maxPrefillTokens."""
    dep = inputs.to_deployment(
        inputs.PlanRequest(model="qwen3-8b", card="ascend-950pr", dtype="bf16", ctx="4k")
    )
    cfg = run.default_config(dep, workload=closed_work(256, 128, users=8))
    assert cfg.max_prefill_tokens == dep.max_prefill_tokens == 8192


@pytest.mark.parametrize("users", [300])
def test_serve_on_vllm_ascend_caps_the_running_batch_at_the_engines_default(users: int) -> None:
    """300 users on a 112 GiB 950PR: the running batch stops at vllm-ascend's max_num_seqs 256 (the pool
    holds more), the rest queue; 16 prompts of 128 tokens fill the 2048-token budget of a step."""
    result = runner.invoke(
        app,
        ["serve", "-m", "qwen3-8b", "--card", "ascend-950pr", "--engine", "vllm", "--dtype", "bf16",
         "--input-tokens", "128", "--output-tokens", "512", "--concurrency", str(users), "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["simulated"]["max_batch_reached"] == 256
