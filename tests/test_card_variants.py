"""Issue 28 parts 1 and 3: card variants (SKUs) with nominal and runtime-visible memory, the engines' KV dtype
support and tensor-parallel divisibility, each refused in one line with its source."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from typer.testing import CliRunner

from dashboard import view
from planner import capacity, catalog, inputs, support
from planner.cli import app
from planner.engines.mindie import pool as mindie_pool
from planner.engines.vllm import batch as vllm_batch
from planner.errors import PlanInputError, UnknownIdError
from planner.schema import HardwareProfile

runner = CliRunner()
VARIANTS = sorted(catalog.variant_map())


def test_default_950pr_is_the_atlas_350_and_the_seed_card_is_one_name_away() -> None:
    default = catalog.resolve_card("ascend-950pr")
    assert default.variant_id == "ascend-950pr-112g" and default.memory_capacity_gib == 112
    seed = catalog.resolve_card("ascend-950pr-64g")
    assert (seed.id, seed.variant_id, seed.memory_capacity_gib) == ("ascend-950pr", "ascend-950pr-64g", 64)
    assert catalog.resolve_card("ascend-950dt").memory_capacity_gib == 96  # vllm-ascend "96GB x 8"


def test_a_variant_keeps_its_chips_fitted_speeds() -> None:
    """Speeds are per die: every 950PR variant resolves to the chip's fitted MindIE profile."""
    for variant in ("ascend-950pr-64g", "ascend-950pr-112g", "ascend-950pr-128g"):
        hw = catalog.resolve_card(variant, engine="mindie")
        assert hw.measured == catalog.fitted_profile("ascend-950pr", "mindie").measured  # type: ignore[union-attr]


def test_unknown_variant_suggests_the_close_ones() -> None:
    with pytest.raises(UnknownIdError, match="ascend-950pr-64g"):
        catalog.resolve_card("ascend-950pr-64")


def test_planner_sizes_from_the_runtime_visible_total() -> None:
    """A 64 GB 910B reports 65 452 113 920 B to vllm-ascend: the KV budget starts from that, not 64 GiB."""
    hw = catalog.load_card("ascend-910b2")
    assert hw.device_total_bytes == 65_452_113_920 < hw.memory_capacity_bytes
    dep = inputs.to_deployment(inputs.PlanRequest(model="qwen3-8b", card="ascend-910b2"))
    mem = capacity.memory_breakdown(dep)
    assert mem.device_capacity_bytes == 65_452_113_920
    assert mem.usable_bytes == int(65_452_113_920 * 0.8)
    b4 = catalog.load_card("ascend-910b4")
    assert b4.device_total_bytes == 31_662_800_896  # 29.49 GiB


def test_memory_gib_override_is_a_custom_size() -> None:
    hw = inputs.apply_overrides(catalog.load_card("ascend-910b2"), memory_gib=48, bandwidth_gbps=None)
    assert (hw.variant, hw.visible_memory_bytes, hw.device_total_bytes) == (None, None, 48 * 2**30)


def test_variant_memory_must_match_the_named_variant() -> None:
    raw = catalog.load_card("ascend-950pr").model_dump()
    with pytest.raises(ValidationError, match="must equal variant ascend-950pr-112g"):
        HardwareProfile.model_validate({**raw, "memory_capacity_gib": 100})
    with pytest.raises(ValidationError, match="visible_memory_bytes must be <= memory_capacity_gib"):
        HardwareProfile.model_validate({**raw, "variant": None, "visible_memory_bytes": 200 * 2**30})
    with pytest.raises(ValidationError, match=r"extra_forbidden|Extra inputs"):
        HardwareProfile.model_validate({**raw, "variants": [{**raw["variants"][0], "hbm": 1}]})


def test_plan_first_line_names_the_variant_and_both_memories() -> None:
    result = runner.invoke(app, ["--model", "qwen3-8b", "--card", "ascend-910b4", "--ctx", "4k"])
    first = result.output.splitlines()[0]
    assert (
        "ascend-910b4-32g" in first and "32.00 GiB nominal" in first and "29.49 GiB runtime-visible" in first
    )
    mission = runner.invoke(app, ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8", "--json"])
    assert json.loads(mission.output)["card_variant"] == "ascend-950pr-112g"


def test_cards_lists_nominal_and_visible_memory() -> None:
    rows = {r["id"]: r for r in json.loads(runner.invoke(app, ["cards", "--json"]).output)}
    assert rows["ascend-910b3-64g"]["visible_memory_bytes"] == 65_452_113_920
    assert rows["ascend-950pr-64g"]["memory_capacity_gib"] == 64 and rows["ascend-950pr-112g"]["default"]
    assert rows["atlas-300i-duo-48g"]["visible_memory_bytes"] == 43_693 * 2**20


@pytest.mark.parametrize(
    ("tp", "failure"),
    [
        (3, "4 KV heads are not divisible by 3"),
        (6, "6 is not a multiple of the 4 KV heads it replicates"),
        (12, "16 linear-attention key heads are not divisible by 12"),
    ],
)
def test_tp_that_cannot_shard_the_heads_is_refused(tp: int, failure: str) -> None:
    """Qwen3.5-27B: 24 query / 4 KV / 16 GDN key / 48 GDN value heads; vLLM's divide() asserts each."""
    for command in ([], ["mindie", "--weights-path", "/w"], ["vllm"]):
        result = runner.invoke(app, [*command, "--model", "qwen3-27b", "--tp", str(tp)])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert result.output.startswith(f"kvplan: error: --tp: {tp} cannot shard qwen3.5-27b")
        assert failure in result.output and "linear-attention key heads" in result.output


@settings(max_examples=60, deadline=None)
@given(kv=st.integers(1, 64), tp=st.integers(1, 64))
def test_kv_head_rule_is_vllms_divide(kv: int, tp: int) -> None:
    """Split when tp < kv (kv % tp), replicate otherwise (tp % kv): QKVParallelLinear's two divide() calls."""
    ok = kv % tp == 0 if tp < kv else tp % kv == 0
    assert (support.kv_head_rule(kv, tp=tp) is None) == ok


@pytest.mark.parametrize(
    ("model", "card", "dtype", "ok"),
    [
        ("llama-3.1-70b", "ascend-910b2", "int8", True),  # documented: W8A8 LLaMA3.1-70B on 800I A2
        ("deepseek-v3", "ascend-910c", "int8", True),  # MLA latent int8 (kvcache_quant_layers)
        ("qwen3-8b", "ascend-910b2", "int8", False),  # not in MindIE's C8 list
        ("llama-3.1-70b", "ascend-950pr", "int8", False),  # not an 800I A2
        ("llama-3.1-70b", "ascend-910b2", "bf16", False),  # C8 comes with a W8A8 checkpoint
    ],
)
def test_mindie_int8_kv_only_where_documented(model: str, card: str, dtype: str, ok: bool) -> None:
    request = inputs.PlanRequest(model=model, card=card, dtype=dtype, kv_dtype="int8", tp=8, ctx="4k")
    dep = inputs.to_deployment(request)
    if ok:
        assert mindie_pool.int8_kv_refusal(dep) is None
        return
    with pytest.raises(
        PlanInputError, match=r"^--kv-dtype: MindIE's int8 KV cache \(C8\) is documented only"
    ):
        capacity.check_supported(dep)


def test_mla_fp8_kv_is_allowed_on_950_with_vllm() -> None:
    request = inputs.PlanRequest(
        model="deepseek-v3", card="ascend-950pr", dtype="fp8", kv_dtype="fp8", tp=8, ctx="4k", engine="vllm"
    )
    assert vllm_batch.fp8_kv_refusal(inputs.to_deployment(request)) is None


def _batches(variant: str, engine: str) -> set[tuple[int, int | None]]:
    dtype = catalog.resolve_card(variant).activation_dtype  # fp16 on the 310P
    common = ["--model", "qwen3-8b", "--card", variant, "--ctx", "32k", "--dtype", dtype]
    planned = runner.invoke(app, [*common, "--engine", engine, "--json"])
    plan = None if planned.exit_code else json.loads(planned.output)["recommendation"]["max_batch_size"]
    config = runner.invoke(app, [engine, *common, "--weights-path", "/w", "--json"])
    written = None
    if not config.exit_code:
        payload = json.loads(config.output)
        written = (
            int(dict(payload["vllm"]["args"])["--max-num-seqs"])
            if engine == "vllm"
            else payload["mindie"]["config"]["BackendConfig"]["ScheduleConfig"]["maxBatchSize"]
        )
    request = inputs.PlanRequest(model="qwen3-8b", card=variant, ctx="32k", dtype=dtype, engine=engine)
    _, dash = view.plan_for(request)
    return {(planned.exit_code, plan), (config.exit_code, written), (0, dash.recommendation.max_batch_size)}


@pytest.mark.parametrize("engine", ["mindie", "vllm"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_plan_configs_and_dashboard_agree_on_every_variant(variant: str, engine: str) -> None:
    batches = _batches(variant, engine)
    assert len(batches) == 1, (variant, engine, batches)
    ((code, batch),) = batches
    assert code == 0 and batch is not None and batch >= 1
