"""planner.engines.vllm.args and `kvplan vllm`: the same plan as vllm serve arguments."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from planner import capacity, catalog, inputs, records
from planner.cli import app, configs
from planner.deployment import Deployment
from planner.engines import common
from planner.engines.mindie import config as mindie
from planner.engines.vllm import args as vllm_args
from planner.engines.vllm import pool as vllm_pool
from planner.engines.vllm import startup as vllm_startup
from planner.errors import DoesNotFitError, PlanInputError
from planner.plan import compose as perf_plan
from planner.results import Plan

runner = CliRunner()


def build(
    request: inputs.PlanRequest, options: mindie.MindieOptions, *, available_kv_bytes: int | None = None
) -> tuple[Plan, vllm_args.VllmArgs]:
    """Plan and vllm args as `kvplan vllm` builds them (engine vllm, the engine's default
    --max-num-batched-tokens); a quantized plan without --weights-path gets /w (no repo is known for most).
    available_kv_bytes: cut this budget instead of the plan's (the worked cases' pool arithmetic)."""
    if options.weights_path is None and request.dtype not in ("bf16", "fp16"):
        options = options.model_copy(update={"weights_path": "/w"})
    dep, lengths = configs.prepare(records.replace(request, engine="vllm"), options)
    plan = perf_plan.build_plan(dep, with_performance=False)
    if available_kv_bytes is not None:
        memory = plan.memory.model_copy(update={"kv_budget_bytes": available_kv_bytes})
        plan = plan.model_copy(update={"memory": memory})
    return plan, vllm_args.vllm_args(plan, dep, lengths=lengths, options=options)


# The issue-12 worked cases (tests/golden/engines/vllm_cases.json) were computed on a 128 GiB 950PR.
MISSION = inputs.PlanRequest(model="qwen3-27b", card="ascend-950pr-128g", dtype="fp8", tp=2, ctx="32k")
GOLDEN = Path(__file__).parent / "golden" / "engines" / "vllm_cases.json"
ISSUE_CASES = {c["id"]: c for c in json.loads(GOLDEN.read_text())["cases"] if "issue-budget" in c["id"]}


def test_mission_arguments() -> None:
    plan, result = build(
        MISSION, mindie.MindieOptions(weights_path="/data/models/qwen3-27b", model_name="qwen3-27b")
    )
    args = dict(result.args)
    assert args == {
        "--max-model-len": "32768",
        "--max-num-seqs": str(math.floor(result.pool.max_concurrency)),  # vLLM's accounting, not MindIE's
        "--max-num-batched-tokens": "2048",  # vllm-ascend's default (not MindIE's maxPrefillTokens 24576)
        "--gpu-memory-utilization": "0.92",  # vLLM's default (config/cache.py:68), `kvplan vllm`'s fraction
        "--kv-cache-dtype": "auto",  # no --block-size: vLLM computes it for this hybrid model
        "--tensor-parallel-size": "2",
        "--served-model-name": "qwen3-27b",
    }
    assert result.model == "/data/models/qwen3-27b"
    assert result.pool.kv_cache_size_tokens < plan.memory.kv_budget_bytes
    assert 0 < result.min_gpu_memory_utilization <= 0.92
    assert any("--max-num-batched-tokens 2048 is the engine's own default" in note for note in result.notes)
    assert any("issue #7393" in note for note in result.notes)


@pytest.mark.parametrize(("prefix", "mtp"), [(False, 0), (True, 0), (False, 1), (False, 3)])
def test_mission_log_lines_match_the_worked_cases(prefix: bool, mtp: int) -> None:
    """`kvplan vllm` on the issue-12 inputs prints the concurrency of the vllm-ascend goldens."""
    source = "issue-budget-with-mtp-weights" if mtp else "issue-budget"
    case = ISSUE_CASES[f"qwen3.5-27b-tp2-950pr-32k-ascend-pc{int(prefix)}-mtp{mtp}-{source}"]
    request = records.replace(MISSION, mtp=mtp)
    available = case["inputs"]["available_kv_bytes"]  # the worked case's budget, cut by `kvplan vllm`
    _, result = build(
        request, mindie.MindieOptions(prefix_cache=prefix, mtp=mtp), available_kv_bytes=available
    )
    expected = case["expected"]
    assert result.pool.num_blocks == expected["num_blocks"]
    assert result.log_lines == [
        f"GPU KV cache size: {expected['kv_cache_size_tokens']:,} tokens",
        f"Maximum concurrency for 32,768 tokens per request: {expected['max_concurrency']:.2f}x",
    ]
    assert result.max_num_seqs == math.floor(expected["max_concurrency"])
    spec = dict(result.args).get("--speculative-config")
    assert spec == (
        None if not mtp else json.dumps({"method": "mtp", "num_speculative_tokens": mtp}).replace(" ", "")
    )


def test_min_utilization_holds_the_batch_and_one_hundredth_less_does_not() -> None:
    request = records.replace(MISSION, memory_fraction=0.9)
    _, result = build(request, mindie.MindieOptions())
    util = result.min_gpu_memory_utilization
    batch = result.max_num_seqs
    _, at_util = build(records.replace(MISSION, memory_fraction=util), mindie.MindieOptions())
    assert at_util.pool.max_concurrency >= batch
    below = records.replace(MISSION, memory_fraction=round(util - 0.01, 2))
    try:
        _, smaller = build(below, mindie.MindieOptions())
    except DoesNotFitError:
        return
    assert smaller.pool.max_concurrency < batch


@pytest.mark.parametrize(
    ("card", "dtype", "kv", "expected", "note"),
    # int8 KV (C8) comes with an msModelSlim W8A8 checkpoint (an FP8 one is refused: tests/test_vllm_c8.py)
    [("nvidia-h200", "fp8", "fp8", "fp8", None), ("ascend-950pr", "int8", "int8", "auto", "C8")],
)
def test_kv_cache_dtype(card: str, dtype: str, kv: str, expected: str, note: str | None) -> None:
    request = inputs.PlanRequest(
        model="qwen3-8b", card=card, dtype=dtype, kv_dtype=kv, ctx="8k", engine="vllm"
    )
    _, result = build(request, mindie.MindieOptions())
    assert dict(result.args)["--kv-cache-dtype"] == expected
    if note:
        assert any(note in n for n in result.notes)


@pytest.mark.parametrize("model", ["qwen3-8b", "qwen3.5-27b"])
def test_vllm_ascend_refuses_fp8_kv_for_gqa_and_gdn(model: str) -> None:
    """vllm-ascend has no FP8 KV path for GQA / GDN attention (attention_v1.py:1975-2007 @182b75ea)."""
    request = inputs.PlanRequest(model=model, card="ascend-950pr", dtype="fp8", kv_dtype="fp8", engine="vllm")
    with pytest.raises(
        PlanInputError, match=r"^--kv-dtype: vllm-ascend has no FP8 KV cache for (GQA|HYBRID)"
    ):
        build(request, mindie.MindieOptions())


@pytest.mark.parametrize(("card", "expected"), [("ascend-910b2", "128"), ("nvidia-h200", "96")])
def test_block_size_rule(card: str, expected: str) -> None:
    """vllm-ascend forces 128 (prefix caching / chunked prefill on); CUDA vLLM takes any positive int."""
    request = inputs.PlanRequest(model="qwen3-8b", card=card, block_size=96, ctx="8k")
    _, result = build(request, mindie.MindieOptions())
    assert dict(result.args)["--block-size"] == expected
    assert result.pool.block_size_tokens == int(expected)
    assert any("forces 128" in n for n in result.notes) == (expected == "128")


def test_hf_id_only_when_its_weights_are_the_plans() -> None:
    """A bf16 plan prints the card's repo; a quantized plan prints the tutorial checkpoint or refuses."""
    bf16 = records.replace(MISSION, dtype="bf16")
    _, result = build(bf16, mindie.MindieOptions())
    assert result.model == catalog.load_model("qwen3.5-27b").source.hf_repo
    assert "--quantization" not in dict(result.args)
    w8a8 = inputs.PlanRequest(model="qwen3-32b", card="ascend-910b3", dtype="int8", tp=4, ctx="8k")
    dep = inputs.to_deployment(w8a8)
    plan = perf_plan.build_plan(dep, with_performance=False)
    lengths = common.resolve_lengths(
        dep.ctx_tokens, block_size_tokens=dep.block_size_tokens, options=mindie.MindieOptions()
    )
    result = vllm_args.vllm_args(plan, dep, lengths=lengths, options=mindie.MindieOptions())
    assert result.model == "vllm-ascend/Qwen3-32B-W8A8"  # Qwen3-32B-Int8-A2.yaml nightly config @67b1ac5e
    assert dict(result.args)["--quantization"] == "ascend"
    with pytest.raises(
        PlanInputError, match=r"^--weights-path: kvplan knows no fp8 checkpoint of qwen3.5-27b"
    ):
        vllm_args.served_checkpoint(*build_plan_only(MISSION), mindie.MindieOptions())


def build_plan_only(request: inputs.PlanRequest) -> tuple[Plan, Deployment]:
    dep = inputs.to_deployment(request)
    return perf_plan.build_plan(dep, with_performance=False), dep


def test_deepseek_r1_prints_r1_not_v3() -> None:
    """R1 has its own card: bf16/fp8 plans print deepseek-ai/DeepSeek-R1 (FP8 weights) only for fp8."""
    plan, dep = build_plan_only(
        inputs.PlanRequest(model="deepseek-r1", card="ascend-950pr", dtype="fp8", tp=16, ctx="16k")
    )
    assert vllm_args.served_checkpoint(plan, dep, mindie.MindieOptions()) == ("deepseek-ai/DeepSeek-R1", None)
    plan, dep = build_plan_only(
        inputs.PlanRequest(model="deepseek-r1-0528", card="ascend-910c", dtype="int8", tp=16, ctx="16k")
    )
    repo, quantization = vllm_args.served_checkpoint(plan, dep, mindie.MindieOptions())
    assert (repo, quantization) == ("vllm-ascend/DeepSeek-R1-0528-W8A8", "ascend")


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
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith("kvplan: error: --weights-path: kvplan knows no fp8 checkpoint")
    result = runner.invoke(
        app, ["vllm", "--model", "qwen3-27b", "--ctx", "32k", "--dtype", "bf16", "--tp", "2"]
    )
    assert result.exit_code == 0, result.output
    assert f"vllm serve {catalog.load_model('qwen3.5-27b').source.hf_repo}" in result.output
    assert "--max-model-len 32768" in result.output
    assert "#   Maximum concurrency for 32,768 tokens per request: " in result.output
    payload = json.loads(runner.invoke(app, ["vllm", "--model", "qwen3-8b", "--json"]).output)
    assert dict(payload["vllm"]["args"])["--max-num-seqs"] == str(payload["vllm"]["max_num_seqs"])


def test_cli_vllm_errors() -> None:
    result = runner.invoke(app, ["vllm", "--model", "qwen3-27b", "--memory-gib", "8"])
    assert result.exit_code == 3


def test_pool_without_one_full_request_does_not_fit() -> None:
    """vLLM refuses to start when one max-model-len request does not fit: exit 3, one line."""
    _, result = build(MISSION, mindie.MindieOptions())
    tiny = result.pool.model_copy(
        update={"num_blocks": result.pool.blocks_per_request - 1, "max_concurrency": 0.96}
    )
    with pytest.raises(DoesNotFitError, match=r"^--ctx: vLLM's KV pool holds 0\.96 requests of 32768 tokens"):
        vllm_args.max_num_seqs(tiny)


@pytest.mark.parametrize("card", ["ascend-950pr", "nvidia-h200", "atlas-300i-duo"])
@pytest.mark.parametrize("model", ["qwen3.5-27b", "qwen3-32b", "qwen3-next-80b-a3b", "qwen3-0.6b"])
def test_plan_with_engine_vllm_gives_kvplan_vllm_batch(model: str, card: str) -> None:
    """`kvplan --engine vllm` and `kvplan vllm` answer max batch with the engine's own start-up arithmetic:
    one budget per engine (issue 28). The vLLM plan's KV budget is what the engine computes at start-up
    (startup.plan_budget), not MindIE's; both engines load the same weights; the terms are taken at the
    --max-num-seqs they print (the dummy sampler's rows), and what `kvplan vllm` says the engine logs is the
    pool of those terms."""
    dtype = "fp16" if card == "atlas-300i-duo" else "fp8"
    tp = 1 if model == "qwen3-0.6b" else 4
    request = inputs.PlanRequest(model=model, card=card, dtype=dtype, tp=tp, ctx="32k", engine="vllm")
    options = mindie.MindieOptions(weights_path="/w")
    try:
        dep, lengths = configs.prepare(request, options)
        plan = perf_plan.build_plan(dep, with_performance=False)
    except (DoesNotFitError, PlanInputError):
        return
    result = vllm_args.vllm_args(plan, dep, lengths=lengths, options=options)
    assert plan.recommendation.max_batch_size == result.max_num_seqs
    terms = vllm_startup.plan_terms(
        dep,
        gpu_memory_utilization=dep.memory_fraction,
        max_num_batched_tokens=int(dict(result.args)["--max-num-batched-tokens"]),
        max_num_seqs=result.max_num_seqs,
        weights_bytes=plan.memory.weights_bytes,
    )
    assert plan.memory.kv_budget_bytes == terms.available_kv_bytes  # the engine's arithmetic, at its flags
    assert terms.halved == (card == "atlas-300i-duo")  # NPUWorker310 halves what is left (310P)
    assert any("halved for workspace" in line for line in result.startup_lines) == terms.halved
    engine_pool = vllm_pool.deployment_pool(
        dep, available_bytes=terms.available_kv_bytes, max_model_len=32768
    )
    assert result.log_lines == vllm_pool.log_lines(engine_pool)
    assert math.floor(engine_pool.max_concurrency) == result.max_num_seqs
    mindie_dep = dep.model_copy(update={"engine": "mindie"})
    mindie_plan = perf_plan.build_plan(mindie_dep, with_performance=False)
    assert mindie_plan.memory.weights_bytes == plan.memory.weights_bytes  # same checkpoint, two budgets


def test_user_max_num_batched_tokens_is_kept_and_sizes_the_profile() -> None:
    """--max-prefill-tokens given: printed as --max-num-batched-tokens and the activation profiled at it."""
    request = inputs.PlanRequest(model="qwen3-32b", card="ascend-910b3", dtype="bf16", tp=4, ctx="8k")
    _, default = build(request, mindie.MindieOptions())
    _, given = build(request, mindie.MindieOptions(max_prefill_tokens=16384))
    assert dict(default.args)["--max-num-batched-tokens"] == "2048"
    assert dict(given.args)["--max-num-batched-tokens"] == "16384"
    assert given.pool.num_blocks < default.pool.num_blocks  # a larger activation peak leaves less KV
    assert not any("engine's own default" in note for note in given.notes)


def test_vllm_grid_cell_at_any_ctx_is_the_plan_at_that_ctx() -> None:
    """The sweep / heatmap grid (one memory plan, many ctx) answers at each ctx what the plan at that ctx
    answers, though the engine's dummy sampler (--max-num-seqs rows) differs per ctx; qwen3-0.6b on 4 x 950PR
    is where the sampler matters most (batches in the hundreds to thousands)."""
    ctxs = [1024, 2048, 4096, 8192, 32768]
    base = inputs.PlanRequest(model="qwen3-0.6b", card="ascend-950pr", tp=4, ctx="32k", engine="vllm")
    dep = inputs.to_deployment(base)
    grid = capacity.max_batch_grid(dep, capacity.memory_breakdown(dep), ctx_tokens=np.asarray(ctxs))
    for ctx, cell in zip(ctxs, grid, strict=True):
        at = inputs.to_deployment(records.replace(base, ctx=str(ctx)))
        assert int(cell) == capacity.max_batch_size(at, capacity.memory_breakdown(at)), ctx


def test_max_num_seqs_is_capped_at_max_num_batched_tokens() -> None:
    """vLLM refuses max_num_batched_tokens < max_num_seqs (vllm/config/scheduler.py:250-261): a pool holding
    more than 2048 1k-token requests plans 2048 with the default tokens, more with --max-prefill-tokens."""
    request = inputs.PlanRequest(model="qwen3-0.6b", card="ascend-950pr", tp=4, ctx="1k")
    plan, result = build(request, mindie.MindieOptions())
    assert math.floor(result.pool.max_concurrency) > 2048
    assert result.max_num_seqs == plan.recommendation.max_batch_size == 2048
    assert any("capped at --max-num-batched-tokens 2048" in note for note in result.notes)
    _, wider = build(request, mindie.MindieOptions(max_prefill_tokens=8192))
    assert wider.max_num_seqs == math.floor(wider.pool.max_concurrency) > 2048


def test_pipeline_stages_print_no_utilisation_they_cannot_compute() -> None:
    """With --pp > 1 the pool per stage is not modelled: the command's --max-num-seqs is the plan's batch per
    DP engine (capped at --max-num-batched-tokens), and no "needs --gpu-memory-utilization >= x" is printed
    from the whole-model pool (it said 1.75 for qwen3-30b-a3b tp4 pp2 dp2)."""
    flags = ["vllm", "--model", "qwen3-30b-a3b", "--tp", "4", "--pp", "2", "--dp", "2", "--ctx", "4k"]
    out = runner.invoke(app, [*flags, "--dtype", "int8"], terminal_width=400).output
    assert "--max-num-seqs 2048 \\" in out
    assert "needs --gpu-memory-utilization >=" not in out and "needs at least" not in out
    assert "not computed with --pp > 1 (the pool per pipeline stage is not modelled)" in out
    single = runner.invoke(
        app, ["vllm", "--model", "qwen3-32b", "--card", "ascend-910b3", "--tp", "4"]
    ).output
    assert "needs --gpu-memory-utilization >=" in single


@pytest.mark.parametrize(
    ("typed", "repo"),
    [
        ("kimi-k2-thinking", "moonshotai/Kimi-K2-Thinking"),
        ("kimi-k2.5", "moonshotai/Kimi-K2.5"),
        ("kimi-k2.6", "moonshotai/Kimi-K2.6"),
    ],
)
def test_kimi_native_int4_prints_the_release_the_user_named(typed: str, repo: str) -> None:
    """The three Kimi releases share one card; each ships its own native-INT4 repo (w4a16-moe), read by
    vLLM from the checkpoint's own quantization_config (no --quantization); uniform w4a16 names none."""
    request = inputs.PlanRequest(model=typed, card="ascend-910c", dtype="w4a16-moe", tp=16, ep=16, ctx="8k")
    assert vllm_args.served_checkpoint(*build_plan_only(request), mindie.MindieOptions()) == (repo, None)
    uniform = records.replace(request, dtype="w4a16")
    with pytest.raises(PlanInputError, match=r"^--weights-path: kvplan knows no w4a16 checkpoint"):
        vllm_args.served_checkpoint(*build_plan_only(uniform), mindie.MindieOptions())


@pytest.mark.parametrize(
    ("card", "dtype", "printed"),
    [
        ("atlas-300i-duo", "auto", "float16"),  # the 300I Duo runs float16 (vllm-ascend quick_start.md)
        ("atlas-300i-duo", "int8", "float16"),  # its W8A8 activations too
        ("ascend-910b3", "fp16", "float16"),  # fp16 asked for on a bf16 card
        ("ascend-910b3", "auto", None),  # bf16: the checkpoint's own dtype, nothing to say
    ],
)
def test_vllm_dtype_is_printed_when_the_plans_activations_are_not_bfloat16(
    card: str, dtype: str, printed: str | None
) -> None:
    args = ["vllm", "-m", "qwen3-8b", "--card", card, "--dtype", dtype, "--weights-path", "/w/qwen3-8b"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    found = re.findall(r"--dtype (\S+)", result.stdout)
    assert found == ([printed] if printed else [])
