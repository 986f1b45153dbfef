"""planner.engines.vllm and `kvplan vllm`: the same plan as vllm serve arguments."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from planner import inputs
from planner.cli import app
from planner.engines import common
from planner.engines import vllm as vllm_args
from planner.engines.mindie import config as mindie
from planner.errors import DoesNotFitError, PlanInputError
from planner.perf import plan as perf_plan
from planner.results import Plan

runner = CliRunner()


def build(request: inputs.PlanRequest, options: mindie.MindieOptions) -> tuple[Plan, vllm_args.VllmArgs]:
    dep = inputs.to_deployment(request)
    lengths = common.resolve_lengths(dep.ctx_tokens, block_size_tokens=dep.block_size_tokens, options=options)
    dep = dep.model_copy(update={"max_prefill_tokens": lengths.max_prefill_tokens})
    plan = perf_plan.build_plan(dep, with_performance=False)
    return plan, vllm_args.vllm_args(plan, lengths=lengths, options=options)


MISSION = inputs.PlanRequest(model="qwen3-27b", card="ascend-950pr", dtype="fp8", tp=2, ctx="32k")


def test_mission_arguments() -> None:
    plan, result = build(
        MISSION, mindie.MindieOptions(weights_path="/data/models/qwen3-27b", model_name="qwen3-27b")
    )
    args = dict(result.args)
    assert args == {
        "--max-model-len": "32768",
        "--max-num-seqs": str(plan.recommendation.max_batch_size),
        "--max-num-batched-tokens": "24576",  # = MindIE maxPrefillTokens = the longest prompt (32k - 8k out)
        "--gpu-memory-utilization": "0.8",  # NPU_MEMORY_FRACTION, not npuMemSize
        "--block-size": "128",
        "--kv-cache-dtype": "auto",
        "--tensor-parallel-size": "2",
        "--served-model-name": "qwen3-27b",
    }
    assert result.model == "/data/models/qwen3-27b"
    assert 0 < result.min_gpu_memory_utilization <= 0.8
    assert any("not npuMemSize" in note for note in result.notes)


def test_min_utilization_holds_the_batch_and_one_hundredth_less_does_not() -> None:
    plan, result = build(MISSION, mindie.MindieOptions())
    util = result.min_gpu_memory_utilization
    batch = plan.recommendation.max_batch_size
    at_util, _ = build(dataclasses.replace(MISSION, memory_fraction=util), mindie.MindieOptions())
    assert at_util.recommendation.max_batch_size >= batch
    below = dataclasses.replace(MISSION, memory_fraction=round(util - 0.01, 2))
    try:
        smaller, _ = build(below, mindie.MindieOptions())
    except DoesNotFitError:
        return
    assert smaller.recommendation.max_batch_size < batch


@pytest.mark.parametrize(("kv", "expected", "note"), [("fp8", "fp8", None), ("int8", "auto", "C8")])
def test_kv_cache_dtype(kv: str, expected: str, note: str | None) -> None:
    request = inputs.PlanRequest(model="qwen3-8b", card="ascend-950pr", dtype="fp8", kv_dtype=kv, ctx="8k")
    _, result = build(request, mindie.MindieOptions())
    assert dict(result.args)["--kv-cache-dtype"] == expected
    if note:
        assert any(note in n for n in result.notes)


def test_block_size_must_be_a_vllm_choice() -> None:
    request = inputs.PlanRequest(model="qwen3-8b", card="ascend-910b2", block_size=96, ctx="8k")
    with pytest.raises(
        PlanInputError,
        match=r"^--block-size: vLLM has no such block size \(got 96, expected one of "
        r"1, 8, 16, 32, 64, 128\)$",
    ):
        build(request, mindie.MindieOptions())


def test_prefix_cache_and_command_rendering() -> None:
    _, result = build(MISSION, mindie.MindieOptions(weights_path="/models/my model", prefix_cache=True))
    command = vllm_args.render_command(result)
    assert command.splitlines()[0] == "vllm serve '/models/my model' \\"
    assert command.splitlines()[-1] == "  --enable-prefix-caching"
    assert "  --tensor-parallel-size 2 \\" in command


def test_cli_vllm() -> None:
    result = runner.invoke(
        app, ["vllm", "--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8", "--tp", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "vllm serve qwen3.5-27b" in result.output
    assert "--max-model-len 32768" in result.output
    payload = json.loads(runner.invoke(app, ["vllm", "--model", "qwen3-8b", "--json"]).output)
    assert dict(payload["vllm"]["args"])["--max-num-seqs"] == str(
        payload["plan"]["recommendation"]["max_batch_size"]
    )


def test_cli_vllm_errors() -> None:
    result = runner.invoke(app, ["vllm", "--model", "qwen3-8b", "--block-size", "96"])
    assert result.exit_code == 2
    assert "kvplan: error: --block-size: vLLM has no such block size (got 96" in result.output
    result = runner.invoke(app, ["vllm", "--model", "qwen3-27b", "--memory-gib", "8"])
    assert result.exit_code == 3
