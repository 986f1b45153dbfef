"""vLLM's int8 KV cache: vllm-ascend's C8 comes with an msModelSlim W8A8 / W4A8 / W4A4 checkpoint quantized
with C8 (its quant_model_description.json), never with an FP8, AWQ, GPTQ or 16-bit one. A defect report (h53)
found `kvplan vllm --dtype fp8 --kv-dtype int8` sizing --max-num-seqs 56 on int8 KV while vllm-ascend
would allocate 16-bit KV (31 fit): the plan, `kvplan vllm` and `kvplan serve` now refuse it in one line."""

from __future__ import annotations

import pytest

from planner import capacity, inputs
from planner.engines.vllm import batch as vllm_batch
from planner.errors import PlanInputError
from tests.helpers import kvplan

FP8_INT8 = "-m qwen3-27b --dtype fp8 --ctx 32k --kv-dtype int8"


@pytest.mark.parametrize(
    ("dtype", "ok"),
    [("int8", True), ("w4a8", True), ("w4a4", True), ("fp8", False), ("bf16", False), ("w4a16", False)],
)
def test_vllm_ascend_int8_kv_only_with_a_c8_weight_scheme(dtype: str, ok: bool) -> None:
    request = inputs.PlanRequest(model="qwen3-8b", dtype=dtype, kv_dtype="int8", ctx="4k", engine="vllm")
    dep = inputs.to_deployment(request)
    if ok:
        assert vllm_batch.int8_kv_refusal(dep) is None
        return
    with pytest.raises(
        PlanInputError,
        match=rf"^--kv-dtype: vllm-ascend has INT8 KV \(C8\) only with an msModelSlim int8 / w4a8 / w4a4 "
        rf"checkpoint quantized with C8 \(got int8 with --dtype {dtype}, expected --kv-dtype auto, or",
    ):
        capacity.check_supported(dep)


def test_plan_vllm_and_serve_agree_on_the_refusal() -> None:
    for words in (
        f"vllm {FP8_INT8} --weights-path /x",
        f"{FP8_INT8} --engine vllm",
        f"serve {FP8_INT8} --engine vllm --input-tokens 1k --output-tokens 1k",
    ):
        out = kvplan(words, code=2).output
        assert "--kv-dtype: vllm-ascend has INT8 KV (C8) only with" in out, words
        assert "got int8 with --dtype fp8" in out and len(out.strip().splitlines()) == 1, words
    # 16-bit KV on the same FP8 checkpoint: the batch vllm-ascend would really run
    assert "--max-num-seqs 31 " in kvplan("vllm -m qwen3-27b --dtype fp8 --ctx 32k --weights-path /x").stdout


def test_vllm_off_ascend_has_no_int8_kv() -> None:
    out = kvplan("-m qwen3-8b --card nvidia-h100 --engine vllm --dtype int8 --kv-dtype int8", code=2).output
    assert (
        "--kv-dtype: vLLM's --kv-cache-dtype has no int8 on nvidia-h100 (got int8, expected auto or fp8"
        in out
    )
