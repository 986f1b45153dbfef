"""fp32 as a weight dtype kvplan plans (issue 23): 4-byte weights, activations and KV, matmuls at the card's
stated fp32 peak, a one-line refusal where the card states none or the engine cannot serve fp32."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from planner import capacity, catalog, memory
from planner.dtypes import StorageDType, weight_scheme
from planner.errors import PlanInputError
from planner.inputs import parse_kv_dtype
from planner.perf import roofline
from tests import helpers

QWEN3_06B_PARAMS = 596_049_920  # tests/test_memory.py: exact count, tied embeddings counted once


def fp32_deployment(card: str = "ascend-910b3", **kw: object):  # type: ignore[no-untyped-def]
    """qwen3-0.6b at fp32 (weights, activations, KV) on `card`, transformers, ctx 4096, uncalibrated."""
    fields = {"kv_dtype": StorageDType.fp32, "engine": "transformers", "calibrated": False, **kw}
    return helpers.deployment("qwen3-0.6b", card, scheme="fp32", **fields)


def test_fp32_weights_take_four_bytes_per_parameter() -> None:
    card = catalog.load_model("qwen3-0.6b")
    got = memory.weight_bytes_per_device(
        card, scheme=weight_scheme("fp32"), activation_dtype=StorageDType.fp32, tp=1
    )
    assert got == QWEN3_06B_PARAMS * 4  # = 2_384_199_680 B: 4 bytes x every parameter, embeddings included


def test_fp32_activations_and_kv_follow_the_weights() -> None:
    dep = fp32_deployment()
    assert dep.activation_dtype is StorageDType.fp32
    # Qwen3-0.6B: 2 (K, V) x 28 layers x 8 KV heads x 128 head_dim x 4 bytes = 229_376 B per token
    assert memory.kv_cache_bytes_per_token(dep.model, kv_dtype=dep.kv_dtype, tp=1) == 229_376
    assert weight_scheme("float32").name == "fp32"  # HF's torch_dtype spelling
    assert parse_kv_dtype(None, default=StorageDType.fp32) is StorageDType.fp32  # auto: the model dtype


def test_fp32_decode_step_is_memory_bound() -> None:
    """One decode step of qwen3-0.6b at batch 1 streams the 4-byte weights: at least 4 x 596,049,920 B /
    1600 GB/s = 1.49 ms on the 910B3's datasheet bandwidth, while its 2 x params FLOP at the fp32 peak
    (83 TFLOP/s) take 1.19e9 / 83e12 = 14 us: the step is memory-bound by two orders of magnitude."""
    dep = fp32_deployment()
    ledger = roofline.decode_ledger(dep, batch=1, ctx_tokens=1024)
    bandwidth_bytes_per_s = dep.hardware.memory_bandwidth_bytes_per_s
    assert dep.hardware.peak_tflop_per_s["fp32"] == 83
    assert ledger.hbm_bytes >= QWEN3_06B_PARAMS * 4
    assert ledger.time_s >= QWEN3_06B_PARAMS * 4 / bandwidth_bytes_per_s  # >= 1.49 ms
    assert ledger.flop / dep.hardware.peak_flop_per_s("fp32") < ledger.hbm_bytes / bandwidth_bytes_per_s / 50
    bf16 = helpers.deployment("qwen3-0.6b", "ascend-910b3", engine="transformers", calibrated=False)
    # weights and KV both double: the bytes a step streams are ~2x bf16's
    ratio = ledger.hbm_bytes / roofline.decode_ledger(bf16, batch=1, ctx_tokens=1024).hbm_bytes
    assert ratio == pytest.approx(2.0, rel=0.01)


def test_a_card_without_an_fp32_peak_refuses_in_one_line() -> None:
    dep = fp32_deployment("ascend-910c")
    with pytest.raises(
        PlanInputError,
        match=r"^--dtype: fp32 matmuls need the card's fp32 peak, which the ascend-910c profile does not "
        r"state \(got fp32, peaks stated for bf16, fp16, int8\); add peak_tflop_per_s\.fp32",
    ):
        capacity.check_supported(dep)


def test_explicit_fp32_kv_needs_fp32_weights() -> None:
    with pytest.raises(PlanInputError, match=r"^--kv-dtype: unknown KV dtype \(got 'fp32', .*--dtype fp32\)"):
        parse_kv_dtype("fp32", default=StorageDType.bf16)
    assert parse_kv_dtype("fp32", default=StorageDType.fp32) is StorageDType.fp32


@pytest.mark.parametrize(
    ("engine", "message"),
    [
        ("vllm", r"--dtype: vllm-ascend cannot serve fp32 on ascend-910b3 \(got fp32, expected bf16 or fp16"),
        ("mindie", r"--dtype: MindIE serves no fp32 weights \(got fp32, expected bf16, fp16"),
        ("sglang", r"--dtype: SGLang on ascend-910b3 serves no fp32 weights \(got fp32"),
    ],
)
def test_ascend_serving_engines_refuse_fp32(engine: str, message: str) -> None:
    result = helpers.kvplan(f"-m qwen3-0.6b --card ascend-910b3 --dtype fp32 --engine {engine}", code=2)
    assert len(result.output.strip().splitlines()) == 1
    assert re.search(message, result.output)


def test_transformers_plans_fp32_from_the_cli() -> None:
    result = helpers.kvplan("-m qwen3-0.6b --card ascend-910b3 --dtype fp32 --engine transformers")
    assert "weights fp32, KV fp32" in " ".join(result.output.split())  # the header, however it wraps


def test_vllm_prints_dtype_float32_where_fp32_is_served(tmp_path: Path) -> None:
    """On a card whose profile states an fp32 peak and whose vLLM serves fp32 (not vllm-ascend), the launch
    command upcasts the 16-bit checkpoint with --dtype float32."""
    raw = catalog.load_card("nvidia-h100").model_dump(mode="json")
    raw["peak_tflop_per_s"]["fp32"] = 67  # a test profile: the value only has to exist
    raw["default_coefficients"]["compute_fraction"]["fp32"] = 0.6
    raw["measured"] = None
    card = tmp_path / "h100-fp32.yaml"
    card.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = helpers.kvplan("vllm -m qwen3-0.6b --dtype fp32 --card", card)
    assert "--dtype float32" in result.output and "--kv-cache-dtype auto" in result.output
