"""Issue 12: one max batch per engine. For the same flags, `kvplan --engine E`, E's config command
(`kvplan mindie`'s maxBatchSize, `kvplan vllm`'s --max-num-seqs, `kvplan sglang`'s --max-running-requests),
`kvplan serve --engine E` (its memory-bound concurrency) and the dashboard's plan (dashboard.view.plan_for,
the view-model the page shows, and its MindIE download) give the same number, or all refuse with the same
exit code. No command is given --max-prefill-tokens: each sizes the activation peak with the one default
(deployment.default_max_prefill_tokens).
MindIE's maxBatchSize never exceeds the requests its predicted blocks hold.

Tiers (issue 24): two structural tests (each engine's batch rule and the memory plan are patched, and every
command must follow) run in the fast tier; a sampled property test over the catalogue (20 examples) is
`slow`. Together they replace the 724-case cross-product (406 s)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dashboard import view
from planner import capacity, catalog, deployment
from planner.cli import app
from planner.engines import registry
from planner.engines.vllm import pool as vllm_pool
from planner.errors import KvplanError
from planner.inputs import PlanRequest
from planner.kinds import ENGINES

runner = CliRunner()
# Engines kvplan writes no config for (registry.config_words is None): plan, serve and the dashboard only.
NO_CONFIG_COMMAND = ("transformers",)
CTX_TOKENS = 32768
CTX = "32k"
TPS = ("1", "8")
# Models that fit 8 x 950PR in bf16 at 32k (the grid must compare numbers there, not only refusals).
FIT_ON_8_950PR = (
    "qwen3-8b",
    "qwen3-32b",
    "qwen3.5-27b",
    "llama-3.1-70b",
    "qwen3-next-80b-a3b",
    "qwen3-235b-a22b",
)


def config_batch(engine: str, common: list[str]) -> tuple[int, int | None, dict]:
    """(exit code, batch the config command writes, its JSON payload); transformers has no config command."""
    extra = ["--weights-path", "/w"]  # vllm: no repo is printed for weights it does not know
    result = runner.invoke(app, [engine, *common, *extra, "--json"])
    if result.exit_code:
        return result.exit_code, None, {}
    payload = json.loads(result.output)
    if engine == "vllm":
        return 0, int(dict(payload["vllm"]["args"])["--max-num-seqs"]), payload
    if engine == "sglang":  # --max-running-requests = the plan's batch x dp (dp 1 here)
        return 0, int(dict(payload["sglang"]["args"])["--max-running-requests"]), payload
    schedule = payload["mindie"]["config"]["BackendConfig"]["ScheduleConfig"]
    return 0, int(schedule["maxBatchSize"]), payload


def serve_batch(
    engine: str, model: str, card: str, tp: str, dtype: str = "bf16", ctx: str = CTX
) -> tuple[int, int | None]:
    """`kvplan serve` with the default input/output split of --ctx: its memory-bound concurrency."""
    ctx_tokens = CTX_TOKENS if ctx == CTX else int(ctx)
    output = deployment.default_output_tokens(ctx_tokens, block_size_tokens=128)
    flags = ["--model", model, "--card", card, "--tp", tp, "--engine", engine, "--dtype", dtype]
    lengths = ["--input-tokens", str(ctx_tokens - output), "--output-tokens", str(output)]
    result = runner.invoke(app, ["serve", *flags, *lengths, "--json"])
    if result.exit_code:
        return result.exit_code, None
    return 0, int(json.loads(result.output)["estimate"]["concurrency"])


def dashboard_batch(
    engine: str, model: str, card: str, tp: str, dtype: str = "bf16", ctx: str = CTX
) -> tuple[int, int | None, int | None]:
    """(exit code, the dashboard's max batch, the running cap its engine's download writes or None:
    MindIE's maxBatchSize, or --max-num-seqs of the vllm-ascend command)."""
    request = PlanRequest(model=model, card=card, ctx=ctx, tp=int(tp), engine=engine, dtype=dtype)
    try:
        dep, plan = view.plan_for(request)
    except KvplanError as exc:
        return exc.exit_code, None, None
    download = None
    if engine == "mindie":
        text, _ = view.mindie_config_text(dep, weights_path="/w")
        download = json.loads(text)["BackendConfig"]["ScheduleConfig"]["maxBatchSize"]
    if engine == "vllm":
        command, _ = view.vllm_command_text(dep, weights_path="/w")
        download = int(re.search(r"--max-num-seqs (\d+)", command).group(1))
    return 0, plan.recommendation.max_batch_size, download


def answers_for(
    model: str, card: str, engine: str, tp: str, dtype: str = "bf16", ctx: str = CTX
) -> dict[str, tuple[int, int | None]]:
    """Every command's (exit code, max batch) for one deployment at --ctx (32k unless given); also checks
    that MindIE's written maxBatchSize is what its blocks hold and what the dashboard's download writes."""
    common = ["--model", model, "--card", card, "--ctx", ctx, "--tp", tp, "--dtype", dtype]
    planned = runner.invoke(app, [*common, "--engine", engine, "--json"])
    plan_batch = None if planned.exit_code else json.loads(planned.output)["recommendation"]["max_batch_size"]
    dash_code, dash_batch, download = dashboard_batch(engine, model, card, tp, dtype, ctx)
    answers = {
        "plan": (planned.exit_code, plan_batch),
        "serve": serve_batch(engine, model, card, tp, dtype, ctx),
        "dashboard": (dash_code, dash_batch),
    }
    if engine not in NO_CONFIG_COMMAND:
        code, batch, payload = config_batch(engine, common)
        answers[engine] = (code, batch)
        if engine == "mindie" and not code:
            assert batch <= payload["mindie"]["prediction"]["concurrency"]
        if engine in ("mindie", "vllm") and not code:
            assert download == batch  # the dashboard's download writes what the config command writes
    return answers


def plan_batch(engine: str) -> int:
    """The plan's max batch for qwen3-8b on one 950PR at 32k (a number well above 2)."""
    flags = ["--model", "qwen3-8b", "--card", "ascend-950pr", "--ctx", CTX, "--engine", engine, "--json"]
    result = runner.invoke(app, flags)
    assert result.exit_code == 0, result.output[-300:]
    return int(json.loads(result.output)["recommendation"]["max_batch_size"])


def one_less_batch(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    """Make the engine's one batch rule answer one less: registry.max_batch_grid (the one "how many
    sequences fit" implementation; capacity.max_batch_size reads one cell), and for vLLM
    engines/vllm/pool.deployment_pool, whose floor(max_concurrency) is both the plan's batch
    (engines/vllm/batch.py) and `kvplan vllm`'s --max-num-seqs (engines/vllm/args.py)."""
    if engine == "vllm":
        pool_of = vllm_pool.deployment_pool

        def smaller_pool(*args, **kwargs) -> vllm_pool.VllmPool:
            built = pool_of(*args, **kwargs)
            return built.model_copy(update={"max_concurrency": built.max_concurrency - 1})

        monkeypatch.setattr(vllm_pool, "deployment_pool", smaller_pool)
        return
    grid_of = registry.max_batch_grid
    monkeypatch.setattr(registry, "max_batch_grid", lambda *args, **kwargs: grid_of(*args, **kwargs) - 1)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_command_takes_its_batch_from_the_one_rule(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Structural: with the engine's batch rule made to answer one less, every command (plan, serve, the
    config command, the dashboard and its MindIE download) answers exactly one less. A command that sized
    its batch by another path (issue 12's bug) keeps the old number and fails here, whatever the model,
    card or tp; test_sampled_deployments_agree checks the flags and defaults the commands pass."""
    batch = plan_batch(engine)
    assert batch > 2
    one_less_batch(monkeypatch, engine)
    answers = answers_for("qwen3-8b", "ascend-950pr", engine, "1")
    assert answers == {command: (0, batch - 1) for command in answers}, answers


@pytest.mark.parametrize("engine", ENGINES)
def test_every_command_reads_the_one_memory_plan(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Structural: with capacity.memory_breakdown's KV budget halved, every command answers the same
    smaller batch: none sizes the KV budget by a path of its own."""
    batch = plan_batch(engine)
    breakdown_of = capacity.memory_breakdown

    def half_budget(*args, **kwargs):
        mem = breakdown_of(*args, **kwargs)
        return mem.model_copy(update={"kv_budget_bytes": mem.kv_budget_bytes // 2})

    monkeypatch.setattr(capacity, "memory_breakdown", half_budget)
    answers = answers_for("qwen3-8b", "ascend-950pr", engine, "1")
    assert len(set(answers.values())) == 1, answers
    code, halved = answers["plan"]
    assert code == 0 and halved is not None and halved < batch, (batch, answers)


@pytest.mark.slow
@settings(max_examples=20, derandomize=True, deadline=None, database=None)
@given(
    model=st.sampled_from(catalog.model_ids()),
    card=st.sampled_from(catalog.card_ids()),
    engine=st.sampled_from(ENGINES),
    tp=st.sampled_from(TPS),
)
def test_sampled_deployments_agree(model: str, card: str, engine: str, tp: str) -> None:
    """Property over the catalogue (every model x card x engine x tp 1/8 at 32k, sampled, the same 20
    examples every run): every command gives the same max batch, or all refuse with the same exit code.
    It replaced the 720-case cross-product; the structural test above covers a command taking its own path,
    this one the flags and defaults each command passes to the one function."""
    answers = answers_for(model, card, engine, tp)
    assert len(set(answers.values())) == 1, (model, card, engine, tp, answers)


@pytest.mark.parametrize("model", FIT_ON_8_950PR)
def test_the_agreement_compares_numbers_on_8_950pr(model: str) -> None:
    """The models above plan a number (not a refusal) on 8 x 950PR at 32k, so agreement there compares
    numbers; kept from the cross-product, which asserted it for every engine."""
    for engine in ENGINES:
        flags = ["--model", model, "--card", "ascend-950pr", "--ctx", CTX, "--tp", "8", "--engine", engine]
        result = runner.invoke(app, [*flags, "--json"])
        assert result.exit_code == 0, (engine, result.output[-300:])


def test_the_mission_case_agrees() -> None:
    """The README's mission (Qwen3-27B, 32k, fp8 on the 950PR): plan and mindie size the same memory."""
    flags = ["--model", "qwen3-27b", "--ctx", CTX, "--dtype", "fp8"]
    plan = json.loads(runner.invoke(app, [*flags, "--json"]).output)
    code, batch, payload = config_batch("mindie", flags)
    assert code == 0 and plan["recommendation"]["max_batch_size"] == batch
    assert batch <= payload["mindie"]["prediction"]["concurrency"]
    assert plan["memory"] == payload["plan"]["memory"]


@pytest.mark.parametrize("ctx", ["128", "200", "256", "384", "1000"])
@pytest.mark.parametrize(
    ("model", "card", "dtype"), [("qwen3-27b", "ascend-950pr", "fp8"), ("qwen3-32b", "ascend-910b3", "int8")]
)
def test_mindie_commands_agree_at_contexts_off_the_block_grid(
    ctx: str, model: str, card: str, dtype: str
) -> None:
    """Contexts whose default split (out = ctx/4, under a block below 4 x 128) straddles blocks: the plan,
    `kvplan mindie`, serve and the dashboard size MindIE's one block rule (pool.blocks_per_sequence:
    ceil((in + out) / block), the block manager's), not the docs' ceil(in / block) + ceil(out / block),
    which `kvplan mindie` gives in a note. The defect: 343 planned, 287 written for qwen3-27b at 384."""
    answers = answers_for(model, card, "mindie", "1", dtype, ctx)
    assert len(set(answers.values())) == 1, (model, ctx, answers)
    code, batch = answers["plan"]
    assert code == 0 and batch is not None and batch >= 1, answers


def test_mindie_notes_the_documented_batch_rule() -> None:
    """qwen3-27b fp8 at 384 (288 in + 96 out): 3 blocks a request held, 4 by the docs' rule; the config
    keeps the plan's 343 and a note gives the docs' 287 and the block manager's source."""
    flags = ["--model", "qwen3-27b", "--dtype", "fp8", "--ctx", "384", "--weights-path", "/w", "--json"]
    payload = json.loads(runner.invoke(app, ["mindie", *flags]).output)
    prediction = payload["mindie"]["prediction"]
    written = payload["mindie"]["config"]["BackendConfig"]["ScheduleConfig"]["maxBatchSize"]
    assert (prediction["blocks_per_request"], written) == (3, 343)
    assert prediction["documented_concurrency"] == prediction["npu_block_num"] // 4 == 287
    note = next(n for n in payload["mindie"]["notes"] if "MindIE's docs size it" in n)
    assert "= 287" in note and "self_attn_block_manager.cpp" in note


@pytest.mark.parametrize(("ctx", "blocks"), [("384", 4), ("383", 3)])
def test_mindie_mtp_keeps_its_lookahead_slots_in_the_block_rule(ctx: str, blocks: int) -> None:
    """With --mtp 1 MindIE keeps gamma = max(n, 2n - 2) = 1 free slot ahead of a decoding sequence
    (pool.lookahead_slots): 384 tokens take ceil(385 / 128) = 4 blocks, 383 take 3. The plan and
    `kvplan mindie` size the same batch on it, within the blocks (was 3 blocks)."""
    flags = ["--model", "qwen3-27b", "--dtype", "fp8", "--ctx", ctx, "--mtp", "1"]
    plan = json.loads(runner.invoke(app, [*flags, "--json"]).output)
    code, batch, payload = config_batch("mindie", flags)
    prediction = payload["mindie"]["prediction"]
    assert code == 0 and prediction["blocks_per_request"] == blocks
    assert batch == plan["recommendation"]["max_batch_size"] <= prediction["npu_block_num"] // blocks


def test_default_prefill_is_what_the_configs_write() -> None:
    """The plan's activation peak is sized with max(8192, ctx - ctx/4): unchanged at short contexts."""
    assert deployment.default_max_prefill_tokens(4096, block_size_tokens=128) == 8192
    assert deployment.default_max_prefill_tokens(CTX_TOKENS, block_size_tokens=128) == 24576
    short = runner.invoke(app, ["--model", "qwen3-8b", "--json"])
    explicit = runner.invoke(app, ["--model", "qwen3-8b", "--max-prefill-tokens", "8192", "--json"])
    assert json.loads(short.output)["memory"] == json.loads(explicit.output)["memory"]


def test_mindie_refuses_fp8_kv_cache() -> None:
    for command in (["mindie", "--weights-path", "/w"], ["--engine", "mindie"]):
        result = runner.invoke(app, [*command, "--model", "qwen3-8b", "--kv-dtype", "fp8"])
        assert result.exit_code == 2
        assert "MindIE has no FP8 KV cache" in result.output and "int8 (C8" in result.output


def test_mindie_batch_never_exceeds_its_blocks_with_explicit_lengths() -> None:
    """An explicit npuMemSize in whole GiB holds fewer requests than the ctx-sized plan: the written
    maxBatchSize is lowered to what the blocks hold. (Lengths that straddle blocks, 1025 + 975, no longer
    count a block more: the block manager holds ceil(2000 / 128) = 16, as the plan.)"""
    flags = ["--model", "qwen3-8b", "--ctx", "2000", "--weights-path", "/w", "--npu-mem-size", "explicit"]
    lengths = ["--max-input-tokens", "1025", "--max-output-tokens", "975"]
    result = runner.invoke(app, ["mindie", *flags, *lengths, "--json"])
    payload = json.loads(result.output)
    written = payload["mindie"]["config"]["BackendConfig"]["ScheduleConfig"]["maxBatchSize"]
    held = payload["mindie"]["prediction"]["concurrency"]
    assert written == held < payload["plan"]["recommendation"]["max_batch_size"]
    assert any(note.startswith(f"maxBatchSize {held}, not the plan's") for note in payload["mindie"]["notes"])


@pytest.mark.parametrize("engine", ["vllm", "mindie"])
@pytest.mark.parametrize("variant", sorted(catalog.variant_map()))
def test_every_card_variant_agrees(variant: str, engine: str) -> None:
    """Issue 28: on every card variant (SKU), `kvplan vllm` / `kvplan mindie`, the plan, `kvplan serve` and
    the dashboard give the same max batch (vLLM's from the engine's start-up arithmetic, MindIE's from its
    blocks), and it is a number, not a refusal (qwen3-8b at 32k fits every variant's memory)."""
    dtype = "fp16" if variant.startswith("atlas-300i") else "bf16"  # 310P has no BF16
    answers = answers_for("qwen3-8b", variant, engine, "1", dtype)
    assert len(set(answers.values())) == 1, (variant, engine, answers)
    code, batch = answers["plan"]
    assert code == 0 and batch is not None and batch >= 1, (variant, engine, answers)


@pytest.mark.parametrize("engine", ["mindie", "vllm"])
def test_dp_plan_prints_the_fields_its_config_command_writes(engine: str) -> None:
    """With --dp 2 the plan's engine line gives one DP group's batch (MindIE maxBatchSize and vLLM
    --max-num-seqs are per DP group: what `kvplan mindie` / `kvplan vllm` write), not the instance's 2x,
    and MindIE's npuMemSize leaves out the linear-attention states of the sequences one device holds: a
    dense hybrid model at dp 2 keeps dp 1's per-device memory, so dp 1's npuMemSize and blocks."""
    flags = ["--model", "qwen3-27b", "--ctx", CTX, "--dtype", "fp8", "--engine", engine]
    plan = json.loads(runner.invoke(app, [*flags, "--dp", "2", "--json"]).output)
    code, batch, payload = config_batch(engine, [*flags[:-2], "--dp", "2"])
    fields = plan["engine_config"]["fields"]
    written = fields["maxBatchSize" if engine == "mindie" else "--max-num-seqs"]
    assert code == 0 and int(written) == batch == plan["recommendation"]["max_batch_size"] // 2
    if engine == "mindie":
        single = json.loads(runner.invoke(app, [*flags, "--json"]).output)["engine_config"]["fields"]
        npu_mem = payload["mindie"]["config"]["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0][
            "npuMemSize"
        ]
        assert fields["npuMemSize"] == single["npuMemSize"] == f"{npu_mem} (GiB: explicit)"
        assert batch <= payload["mindie"]["prediction"]["concurrency"]
