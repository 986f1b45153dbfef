"""Roofline ledger: golden numbers with derivations, physics invariants as property tests, errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import catalog, memory
from planner.deployment import Deployment
from planner.errors import PlanInputError
from planner.perf import roofline
from planner.perf.opcost import expected_experts_touched
from planner.perf.opweights import op_weights
from planner.schema import HardwareProfile
from tests import helpers
from tests.helpers import deployment_950pr

# ascend-950pr default coefficients (hwprofiles/ascend-950pr.yaml, uncalibrated):
BW = 1600e9  # memory_bandwidth_gb_per_s 1600 -> B/s
HBM_BW = BW * 0.75  # weight_read_bandwidth_fraction
KV_BW = BW * 0.6  # kv_read_bandwidth_fraction
BF16_FLOP = 500e12 * 0.6  # peak_tflop_per_s.bf16 * compute_fraction.bf16
KERNEL_S = 8e-6  # kernel_overhead_us
STEP_S = 500e-6  # step_overhead_us


def deployment(model_id: str, **kw: object) -> Deployment:
    return deployment_950pr(model_id, scheme="bf16", **kw)


def op(ledger: roofline.Ledger, name: str) -> roofline.Op:
    return next(o for o in ledger.ops if o.name == name)


# --- golden ledger: Llama-3.1-8B, bf16 weights and KV, tp=1, batch 1, ctx 1024 ---
# Exact arithmetic, so floats are compared at rel=1e-12 (only rounding of the float division remains).
LLAMA = {"model_id": "llama-3.1-8b"}


def test_golden_llama_qkv_proj() -> None:
    ledger = roofline.decode_ledger(deployment(**LLAMA), batch=1, ctx_tokens=1024)
    row = op(ledger, "attn.qkv_proj")
    # weights: 32 layers * 4096 * (4096 q + 1024 k + 1024 v) * 2 B = 1_610_612_736
    # activations, 1 token: 32 * [(4096+4096) + 2 * (4096+1024)] * 2 B = 1_179_648
    assert row.bytes == 1_610_612_736 + 1_179_648
    assert row.flop == 2 * 32 * 4096 * 6144  # 2 FLOP per weight element per token = 1_610_612_736
    assert row.transfer_s == pytest.approx(1_611_792_384 / HBM_BW, rel=1e-12)  # 1.343160 ms
    assert row.overhead_s == pytest.approx(32 * 1 * KERNEL_S, rel=1e-12)  # 1 fused QKV kernel per layer
    assert row.time_s == pytest.approx(1_611_792_384 / HBM_BW + 32 * KERNEL_S, rel=1e-12)  # 1.599160 ms
    assert row.bound == "memory"


def test_golden_llama_attention() -> None:
    ledger = roofline.decode_ledger(deployment(**LLAMA), batch=1, ctx_tokens=1024)
    row = op(ledger, "attn.core")
    # KV per token: 2 * 32 layers * 8 kv heads * 128 * 2 B = 131_072; read 1024 paged tokens + write 1
    assert row.bytes == 1025 * 131_072  # 134_348_800
    # FLOP: attended keys 1024 + (1 + 1) / 2 = 1025; per key 2 * 32 heads * (128 + 128) * 32 layers = 524_288
    assert row.flop == 1025 * 524_288  # 537_395_200
    assert row.transfer_s == pytest.approx(134_348_800 / KV_BW, rel=1e-12)  # 0.139947 ms
    assert row.overhead_s == pytest.approx(32 * 3 * KERNEL_S, rel=1e-12)  # 0.768 ms: launches dominate
    assert row.bound == "overhead"


def test_golden_llama_mlp_lm_head_and_total() -> None:
    ledger = roofline.decode_ledger(deployment(**LLAMA), batch=1, ctx_tokens=1024)
    # gate_up: 32 * 4096 * 2 * 14336 * 2 B = 7_516_192_768,
    # + activations 32 * (4096 + 28672) * 2 B = 2_097_152
    assert op(ledger, "mlp.gate_up").bytes == 7_516_192_768 + 2_097_152
    # lm_head: 128256 * 4096 * 2 B = 1_050_673_152, + 1 row of (4096 in + 128256 logits) * 2 B = 264_704
    assert op(ledger, "lm_head").bytes == 1_050_673_152 + 264_704
    assert op(ledger, "step.overhead").time_s == pytest.approx(STEP_S, rel=1e-12)
    assert ledger.time_s == pytest.approx(sum(o.time_s for o in ledger.ops), rel=1e-12)
    # 15.01 GB of decoder + head weights at 1.2 TB/s = 12.51 ms, KV 0.134 GB at 0.96 TB/s = 0.14 ms,
    # 323 launches (10 per layer * 32 + embedding 1 + lm_head 2) * 8 us = 2.58 ms, step 0.5 ms: 15.73 ms.
    # rel=0.005: the hand sum ignores the few MB of activations and norm weights.
    assert sum(o.kernels for o in ledger.ops) == 323
    assert ledger.time_s == pytest.approx(15.73e-3, rel=0.005)


@pytest.mark.parametrize("model_id", catalog.model_ids())
@pytest.mark.parametrize("mtp", [0, 1])
def test_every_weight_is_streamed_by_exactly_one_op(model_id: str, mtp: int) -> None:
    """Per-op weight bytes add up to memory.weight_bytes_per_device; the embedding table is gathered (not
    streamed) unless tied, when the lm_head streams it. Exact integers."""
    card = catalog.load_model(model_id)
    dep = deployment(model_id, weight_scheme_name="w4a16", tp=2, mtp_tokens=mtp if card.mtp_layers else 0)
    total = memory.weight_bytes_per_device(
        card,
        scheme=dep.weight_scheme,
        activation_dtype=dep.activation_dtype,
        tp=2,
        include_mtp=dep.include_mtp,
    )
    embedding = -(-card.vocab_size // 2) * card.hidden_size * 2
    streamed = sum(op_weights(dep).weight_bytes.values())
    assert streamed == total - (0 if card.tie_word_embeddings else embedding)


def test_golden_moe_expected_experts() -> None:
    # Qwen3-30B-A3B: E = 128, k = 8. 1 token touches exactly 8; 8 tokens 128 * (1 - (120/128)**8) = 51.62
    assert float(expected_experts_touched(128, top_k=8, tokens=1.0)) == pytest.approx(8.0, rel=1e-12)
    assert float(expected_experts_touched(128, top_k=8, tokens=8.0)) == pytest.approx(51.6200, rel=1e-5)


def test_seed_qwen3_27b_prediction_is_between_floor_and_measurement() -> None:
    """Seed 000: Qwen3-27B FP8 on a 950PR, 256-token prompt, 15.8 tok/s = 63 ms per token (measured).

    The datasheet floor is 27.26 GB of streamed weights / 1.6 TB/s = 17.0 ms; the uncalibrated roofline must
    sit between the two (it is optimistic until calibrated: it predicts ~29 ms).
    """
    dep = deployment("qwen3.5-27b", weight_scheme_name="fp8")
    step_s = roofline.decode_step_s(dep, batch=1, ctx_tokens=256 + 64)
    floor_s = roofline.decode_ledger(dep, batch=1, ctx_tokens=320).hbm_bytes / BW
    assert floor_s == pytest.approx(17.0e-3, rel=0.02)
    assert floor_s < step_s < 63e-3


def test_prefill_chunks_and_ttft() -> None:
    assert roofline.prefill_chunks(20_000, max_prefill_tokens=8192) == ([8192, 8192, 3616], [0, 8192, 16384])
    dep = deployment("llama-3.1-8b")
    ledger = roofline.prefill_ledger(dep, prompt_tokens=20_000)
    assert ledger.chunks == 3
    assert op(ledger, "step.overhead").time_s == pytest.approx(3 * STEP_S, rel=1e-12)
    # causal attention FLOP: sum over chunks of c * (p + (c + 1) / 2) * 524_288 = T (T + 1) / 2 * 524_288
    assert op(ledger, "attn.core").flop == pytest.approx(20_000 * 20_001 / 2 * 524_288, rel=1e-12)
    assert op(ledger, "mlp.gate_up").bound == "compute"
    assert roofline.ttft_s(dep, prompt_tokens=20_000) == ledger.time_s


def test_missing_dtype_peak_raises() -> None:
    raw = catalog.load_card("ascend-950pr").model_dump()
    raw["peak_tflop_per_s"] = {"bf16": 500, "fp16": 500}
    raw["native_dtypes"] = ["bf16", "fp16"]
    card = HardwareProfile.model_validate(raw)
    dep = helpers.deployment("llama-3.1-8b", card, scheme="fp8", ctx_tokens=1024)
    with pytest.raises(
        PlanInputError, match=r"^ascend-950pr: no peak_tflop_per_s\.fp8 .*expected a fp8 entry"
    ):
        roofline.decode_step_s(dep, batch=1, ctx_tokens=1024)


# --- physics invariants ---
MODEL_IDS = catalog.model_ids()
SCHEMES = ["bf16", "fp8", "int8", "w8a16", "w4a16"]
PEAK_FLOP = max(catalog.load_card("ascend-950pr").peak_tflop_per_s.values()) * 1e12

deployments = st.builds(
    lambda model_id, scheme, tp, mtp: deployment(
        model_id,
        weight_scheme_name=scheme,
        tp=tp,
        mtp_tokens=mtp if catalog.load_model(model_id).mtp_layers else 0,
        mtp_acceptance_fraction=0.8,
    ),
    st.sampled_from(MODEL_IDS),
    st.sampled_from(SCHEMES),
    st.sampled_from([1, 2, 4, 8]),
    st.integers(0, 3),
)
batches = st.integers(1, 1024)
contexts = st.integers(1, 1 << 18)


@settings(max_examples=60, deadline=None)
@given(dep=deployments, batch=batches, ctx=contexts)
def test_decode_time_above_both_roofs(dep: Deployment, batch: int, ctx: int) -> None:
    ledger = roofline.decode_ledger(dep, batch=batch, ctx_tokens=ctx)
    assert ledger.time_s >= ledger.hbm_bytes / BW
    assert ledger.time_s >= ledger.flop / PEAK_FLOP
    assert ledger.time_s == pytest.approx(roofline.decode_step_s(dep, batch=batch, ctx_tokens=ctx), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    dep=deployments,
    batch=batches,
    ctx=contexts,
    more_batch=st.integers(0, 512),
    more_ctx=st.integers(0, 1 << 16),
)
def test_decode_time_monotone_in_batch_and_ctx(
    dep: Deployment, batch: int, ctx: int, more_batch: int, more_ctx: int
) -> None:
    base = roofline.decode_step_s(dep, batch=batch, ctx_tokens=ctx)
    assert roofline.decode_step_s(dep, batch=batch + more_batch, ctx_tokens=ctx) >= base
    assert roofline.decode_step_s(dep, batch=batch, ctx_tokens=ctx + more_ctx) >= base


@settings(max_examples=40, deadline=None)
@given(
    model_id=st.sampled_from(MODEL_IDS),
    scheme=st.sampled_from(SCHEMES),
    tp=st.sampled_from([1, 2, 4]),
    batch=batches,
    ctx=contexts,
)
def test_tp_reduces_per_device_bytes(model_id: str, scheme: str, tp: int, batch: int, ctx: int) -> None:
    narrow = roofline.decode_ledger(
        deployment(model_id, weight_scheme_name=scheme, tp=tp), batch=batch, ctx_tokens=ctx
    )
    wide = roofline.decode_ledger(
        deployment(model_id, weight_scheme_name=scheme, tp=2 * tp), batch=batch, ctx_tokens=ctx
    )
    assert wide.hbm_bytes <= narrow.hbm_bytes
    assert wide.link_bytes > 0


@settings(max_examples=30, deadline=None)
@given(
    model_id=st.sampled_from(["qwen3.5-27b", "qwen3.5-0.8b", "deepseek-v3", "qwen3-next-80b-a3b"]),
    draft=st.integers(1, 3),
    batch=batches,
    ctx=contexts,
)
def test_mtp_step_costs_more_than_plain_step(model_id: str, draft: int, batch: int, ctx: int) -> None:
    plain = roofline.decode_step_s(deployment(model_id), batch=batch, ctx_tokens=ctx)
    assert roofline.decode_step_s(deployment(model_id, mtp_tokens=draft), batch=batch, ctx_tokens=ctx) > plain


@settings(max_examples=30, deadline=None)
@given(dep=deployments, prompt=st.integers(1, 1 << 17), more=st.integers(0, 1 << 14))
def test_ttft_monotone_in_prompt(dep: Deployment, prompt: int, more: int) -> None:
    assert roofline.ttft_s(dep, prompt_tokens=prompt + more) >= roofline.ttft_s(dep, prompt_tokens=prompt)


@pytest.mark.parametrize(
    "dep",
    [
        helpers.with_pass_overheads(helpers.deployment("llama-3.1-8b", "ascend-950pr", calibrated=False)),
        # measured eager launches of the transformers engine: the host floor (host.wait) is charged
        helpers.deployment("qwen3-8b", "nvidia-h200", calibrated=True, engine="transformers"),
    ],
    ids=["overheads", "host-floor"],
)
def test_prefill_pass_grid_is_the_ledger_per_chunk(dep: Deployment) -> None:
    """One implementation of a prefill pass's seconds: the grid's passes sum to the itemised ledger (TTFT)."""
    dep = dep.model_copy(update={"max_prefill_tokens": 1024})
    passes_s = roofline.prefill_pass_s_grid(
        dep, step=roofline.prefill_step(dep, prompt_tokens=2500, cached_tokens=0)
    )
    assert passes_s.shape == (3,)  # 1024 + 1024 + 452 tokens
    ledger = roofline.prefill_ledger(dep, prompt_tokens=2500)
    charged = {o.name: o.time_s for o in ledger.ops}
    assert charged.get("host.wait", 0.0) > 0 or charged["step.overhead"] > 3 * 900e-6
    assert float(passes_s.sum()) == pytest.approx(ledger.time_s, rel=1e-12)
    assert float(passes_s.sum()) == pytest.approx(roofline.ttft_s(dep, prompt_tokens=2500), rel=1e-12)
