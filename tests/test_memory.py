"""Golden numbers for the memory model; every expected value shows its derivation."""

from __future__ import annotations

import pytest

from planner import catalog, memory, params
from planner.dtypes import StorageDType, weight_scheme
from planner.params import Linear

BF16 = StorageDType.bf16


def model(model_id: str):
    return catalog.load_model(model_id)


@pytest.mark.parametrize(
    ("model_id", "tp", "expected"),
    [
        ("qwen3-32b", 1, 2 * 64 * 8 * 128 * 2),  # 262_144: 64 layers, 8 KV heads of 128, bf16
        ("qwen3-32b", 2, 2 * 64 * 4 * 128 * 2),  # 4 KV heads per rank
        ("llama-3.1-8b", 1, 2 * 32 * 8 * 128 * 2),  # 131_072
        ("llama-3.1-8b", 8, 2 * 32 * 1 * 128 * 2),  # 16_384: one head per rank
        ("llama-3.1-8b", 16, 2 * 32 * 1 * 128 * 2),  # 16_384: heads replicated (MindIE rule), not 0.5
        ("qwen3.5-27b", 1, 2 * 16 * 4 * 256 * 2),  # 65_536: only the 16 full-attention layers cache KV
        ("qwen3-next-80b-a3b", 1, 2 * 12 * 2 * 256 * 2),  # 24_576: 12 full layers of 48
        ("qwen3.5-0.8b", 1, 2 * 6 * 2 * 256 * 2),  # 12_288: 6 full layers of 24
        ("deepseek-v3", 1, 61 * (512 + 64) * 2),  # 70_272: MLA latent + rope key, one per layer
        ("deepseek-v3", 8, 61 * (512 + 64) * 2),  # the latent is replicated on every rank
    ],
)
def test_kv_bytes_per_token_golden(model_id: str, tp: int, expected: int) -> None:
    assert memory.kv_cache_bytes_per_token(model(model_id), kv_dtype=BF16, tp=tp) == expected


def test_kv_bytes_int8_and_mtp_extra_layer() -> None:
    card = model("qwen3-32b")
    assert memory.kv_cache_bytes_per_token(card, kv_dtype=StorageDType.int8, tp=1) == 2 * 64 * 8 * 128 * 1
    # MindIE's allocator adds one layer when MTP is on: 2 * 65 * 8 * 128 * 2
    assert memory.kv_cache_bytes_per_token(card, kv_dtype=BF16, tp=1, mtp=True) == 2 * 65 * 8 * 128 * 2


def test_linear_state_qwen35_27b() -> None:
    # Per GDN layer: conv (4-1) * (2*16*128 + 48*128) channels * 2 B = 61_440 B,
    # recurrent 48 heads * 128 * 128 * 4 B (float32 mamba_ssm_dtype) = 3_145_728 B; 48 layers.
    expected = 48 * (3 * (2 * 16 * 128 + 48 * 128) * 2 + 48 * 128 * 128 * 4)
    assert expected == 153_944_064
    assert memory.linear_state_bytes_per_sequence(model("qwen3.5-27b"), conv_dtype=BF16, tp=1) == expected


def test_linear_state_splits_heads_across_tp() -> None:
    card = model("qwen3.5-27b")
    # tp=2: 5120 conv channels and 24 value heads per rank
    expected = 48 * (3 * 5120 * 2 + 24 * 128 * 128 * 4)
    assert memory.linear_state_bytes_per_sequence(card, conv_dtype=BF16, tp=2) == expected


def test_dense_models_have_no_state() -> None:
    assert memory.linear_state_bytes_per_sequence(model("qwen3-32b"), conv_dtype=BF16, tp=1) == 0


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("qwen3-0.6b", 596_049_920),  # Keras preset count; tied embeddings counted once
        ("llama-3.1-8b", 8_030_261_248),  # Meta's published exact count
        ("llama-3.1-70b", 70_553_706_496),
    ],
)
def test_exact_parameter_counts(model_id: str, expected: int) -> None:
    assert params.parameter_count(model(model_id)) == expected


@pytest.mark.parametrize(
    ("model_id", "billions", "rel"),
    [
        ("qwen3-32b", 32.8, 0.01),
        ("qwen3-30b-a3b", 30.5, 0.01),
        ("qwen3-235b-a22b", 235.0, 0.01),
        ("deepseek-v3", 671.0, 0.01),
        ("qwen3-next-80b-a3b", 80.0, 0.01),
    ],
)
def test_published_parameter_counts(model_id: str, billions: float, rel: float) -> None:
    # Published sizes are rounded to 3 significant digits, hence rel=1 %.
    assert params.parameter_count(model(model_id)) == pytest.approx(billions * 1e9, rel=rel)


def test_active_parameters_qwen3_30b_a3b() -> None:
    # Qwen publishes 3.3 B activated parameters (8 of 128 experts).
    assert params.active_parameter_count(model("qwen3-30b-a3b")) == pytest.approx(3.3e9, rel=0.02)


def test_bf16_weight_bytes_are_two_per_parameter() -> None:
    card = model("qwen3-0.6b")
    got = memory.weight_bytes_per_device(card, scheme=weight_scheme("bf16"), activation_dtype=BF16, tp=1)
    assert got == 596_049_920 * 2


def test_fp8_weights_keep_embeddings_in_bf16_and_add_scales() -> None:
    card = model("qwen3-32b")
    tensors = params.model_tensors(card, tp=1)
    linear_elements = sum(t.elements for t in tensors if isinstance(t, Linear))
    out_channels = sum(t.out_features * t.count for t in tensors if isinstance(t, Linear))
    plain_elements = sum(t.elements for t in tensors if not isinstance(t, Linear))
    # 1 B per quantized weight + 4 B fp32 scale per output channel + 2 B per unquantized element
    expected = linear_elements + 4 * out_channels + 2 * plain_elements
    got = memory.weight_bytes_per_device(card, scheme=weight_scheme("fp8"), activation_dtype=BF16, tp=1)
    assert got == expected


def test_w4a16_group_scales() -> None:
    linear = Linear("x", "mlp", in_features=4096, out_features=1024, count=2)
    # 4096*1024*4/8 = 2_097_152 B of data + 1024 channels * 32 groups * 4 B = 131_072 B, twice
    assert memory.linear_weight_bytes(linear, scheme=weight_scheme("w4a16")) == 2 * (2_097_152 + 131_072)


def test_w4a8_packs_routed_experts_in_int4_and_the_rest_as_w8a8() -> None:
    """msModelSlim W4A8 dynamic: routed experts int4 with a per-channel fp32 scale + offset; every other
    matmul W8A8 (vllm-ascend registers W4A8_DYNAMIC for MoE layers only); int8 matmuls on int8 units."""
    scheme = weight_scheme("w4a8")
    experts = Linear("x", "moe_experts", in_features=100, out_features=10, count=1)
    assert memory.linear_weight_bytes(experts, scheme=scheme) == 500 + 10 * 8
    for part in ("mlp", "attention", "moe_shared", "linear_attention", "lm_head"):
        other = Linear("x", part, in_features=100, out_features=10, count=1)
        assert memory.linear_weight_bytes(other, scheme=scheme) == memory.linear_weight_bytes(
            other, scheme=weight_scheme("int8")
        )
    assert (scheme.compute_dtype, scheme.requires_native) == ("int8", "int8")


def test_w4a16_moe_packs_routed_experts_in_int4_group_32_and_keeps_the_rest_16_bit() -> None:
    """Kimi-K2's native INT4 as vllm-ascend holds it: routed experts int4, group 32, a bf16 scale and the
    all-zero bf16 offset its fused MoE operator requires (4 B a group); attention, shared experts, dense MLP
    and lm_head unquantized, as the checkpoint's ignore list says."""
    scheme = weight_scheme("w4a16-moe")
    experts = Linear("x", "moe_experts", in_features=7168, out_features=2048, count=3)
    # 7168 * 2048 * 4 / 8 = 7_340_032 B of int4 + 2048 channels * 224 groups * 4 B = 1_835_008 B, 3 times
    assert memory.linear_weight_bytes(experts, scheme=scheme) == 3 * (7_340_032 + 1_835_008)
    for part in ("mlp", "attention", "moe_shared", "lm_head"):
        other = Linear("x", part, in_features=7168, out_features=2048, count=1)
        assert memory.linear_weight_bytes(other, scheme=scheme) == 7168 * 2048 * 2
    assert weight_scheme("w4a16-experts") == scheme  # its alias


def test_kimi_native_int4_on_the_devices_against_uniform_w4a16() -> None:
    """Kimi-K2.5's text model in its released layout as vllm-ascend holds it: 657.6 GB by the card's shapes
    (594.2 GB of it on disk: the zero offsets are made at load); uniform w4a16 (every matmul int4, group 128)
    would count 549.0 GB, 6.8 GB a die less on a 16-die A3 node."""
    card = model("kimi-k2.5")

    def total_gb(name: str) -> float:
        return (
            memory.weight_bytes_per_device(card, scheme=weight_scheme(name), activation_dtype=BF16, tp=1)
            / 1e9
        )

    assert total_gb("w4a16-moe") == pytest.approx(657.6, abs=0.1)
    assert total_gb("w4a16") == pytest.approx(549.0, abs=0.1)


def test_w4a4_packs_every_linear_in_int4_with_a_per_channel_scale_and_offset() -> None:
    """msModelSlim W4A4 flatquant (vllm-ascend W4A4_FLATQUANT_DYNAMIC, "linear" layers): every matmul int4
    with an fp32 scale and an fp32 offset per output channel; timed on int8 units (no int4 peak stated)."""
    scheme = weight_scheme("w4a4")
    for part in ("moe_experts", "mlp", "attention", "lm_head"):
        linear = Linear("x", part, in_features=100, out_features=10, count=1)
        # 100 * 10 * 4 / 8 = 500 B of int4 + 10 channels * (4 B scale + 4 B offset)
        assert memory.linear_weight_bytes(linear, scheme=scheme) == 500 + 10 * 8
    assert (scheme.compute_dtype, scheme.requires_native) == ("int8", "int8")


def test_int8_w8a8_scale_overhead() -> None:
    linear = Linear("x", "mlp", in_features=100, out_features=10, count=1)
    # 1000 B of int8 + 10 channels * (8 B deq_scale + 4 B quant_bias)
    assert memory.linear_weight_bytes(linear, scheme=weight_scheme("int8")) == 1000 + 120


def test_tp_shards_weights_but_replicates_norms() -> None:
    card = model("qwen3-32b")
    bf16 = weight_scheme("bf16")
    one = memory.weight_bytes_per_device(card, scheme=bf16, activation_dtype=BF16, tp=1)
    two = memory.weight_bytes_per_device(card, scheme=bf16, activation_dtype=BF16, tp=2)
    assert one / 2 < two < one / 2 * 1.001  # only norms (a few MB) stay replicated


def test_paged_rounding_and_budget_arithmetic() -> None:
    assert memory.paged_tokens(1, block_size_tokens=128) == 128
    assert memory.paged_tokens(128, block_size_tokens=128) == 128
    assert memory.paged_tokens(129, block_size_tokens=128) == 256
    per_seq = memory.sequence_bytes(1000, kv_bytes_per_token=10, state_bytes=5, block_size_tokens=128)
    assert per_seq == 1024 * 10 + 5
    assert memory.max_concurrent_sequences(10 * per_seq + per_seq - 1, per_sequence_bytes=per_seq) == 10
    assert memory.max_concurrent_sequences(-5, per_sequence_bytes=per_seq) == 0


def test_max_seq_len_at_batch_whole_blocks() -> None:
    # budget for 4 sequences of 10 blocks of 128 tokens at 2 B/token, plus 7 B state each
    budget = 4 * (10 * 128 * 2 + 7) + 3
    assert (
        memory.max_seq_len_at_batch(
            budget, batch=4, kv_bytes_per_token=2, state_bytes=7, block_size_tokens=128
        )
        == 1280
    )


def test_activation_estimate_scales_with_prefill_tokens() -> None:
    card = model("qwen3-32b")
    one = memory.activation_bytes_per_device(card, max_prefill_tokens=4096, activation_dtype=BF16, tp=1)
    two = memory.activation_bytes_per_device(card, max_prefill_tokens=8192, activation_dtype=BF16, tp=1)
    # 8192 tokens * (2*5120 + 3*25600) elements * 2 B: MLP gate_up + act is the widest op
    assert two == 2 * one == 8192 * (2 * 5120 + 3 * 25600) * 2
