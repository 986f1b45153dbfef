"""vLLM's int8 KV cache: vllm-ascend's C8 comes with an msModelSlim checkpoint quantized with C8 (its
quant_model_description.json says kv_cache_type C8, whatever the weight type), never with a 16-bit one. A
defect report (h53) found `kvplan vllm --dtype fp8 --kv-dtype int8` sizing 56 sequences on int8 KV with no
word that an HF FP8 checkpoint gets 16-bit KV (31 fit); a review (h58) found a refusal of every fp8 / w8a16 /
w4a16 pair too strict (msModelSlim writes C8 beside those): quantized weights are taken with the note, 16-bit
ones refused in one line by the plan, `kvplan vllm` and `kvplan serve` alike."""

from __future__ import annotations

import pytest

from planner import capacity, inputs
from planner.engines.vllm import batch as vllm_batch
from planner.errors import PlanInputError
from tests.helpers import kvplan

FP8_INT8 = "-m qwen3-27b --dtype fp8 --ctx 32k --kv-dtype int8"


@pytest.mark.parametrize(
    ("dtype", "ok"),
    [("int8", True), ("w4a8", True), ("w4a4", True), ("fp8", True), ("w4a16", True), ("bf16", False)],
)
def test_vllm_ascend_int8_kv_only_with_a_c8_weight_scheme(dtype: str, ok: bool) -> None:
    request = inputs.PlanRequest(model="qwen3-8b", dtype=dtype, kv_dtype="int8", ctx="4k", engine="vllm")
    dep = inputs.to_deployment(request)
    if ok:
        assert vllm_batch.int8_kv_refusal(dep) is None
        return
    with pytest.raises(
        PlanInputError,
        match=rf"^--kv-dtype: vllm-ascend has INT8 KV \(C8\) only from an msModelSlim-quantized checkpoint "
        rf"whose quant_model_description.json says kv_cache_type C8 \(got int8 with --dtype {dtype},",
    ):
        capacity.check_supported(dep)


def test_plan_vllm_and_serve_agree_on_the_refusal_and_the_note() -> None:
    bf16 = FP8_INT8.replace("fp8", "bf16")
    for words in (
        f"vllm {bf16} --weights-path /x",
        f"{bf16} --engine vllm",
        f"serve {bf16} --engine vllm --input-tokens 1k --output-tokens 1k",
    ):
        out = kvplan(words, code=2).output
        assert "--kv-dtype: vllm-ascend has INT8 KV (C8) only from an msModelSlim-quantized checkpoint" in out
        assert "got int8 with --dtype bf16" in out and len(out.strip().splitlines()) == 1, words
    # fp8 weights: sized on C8 with the note naming what a checkpoint without C8 gets
    taken = kvplan(f"vllm {FP8_INT8} --weights-path /x")
    assert "--max-num-seqs 56 " in taken.stdout and "kv_cache_type C8" in taken.output
    assert "gets 16-bit KV and fewer sequences than planned" in taken.output
    # 16-bit KV on the same FP8 checkpoint: the batch vllm-ascend runs without C8
    assert "--max-num-seqs 31 " in kvplan("vllm -m qwen3-27b --dtype fp8 --ctx 32k --weights-path /x").stdout


def test_vllm_off_ascend_has_no_int8_kv() -> None:
    out = kvplan("-m qwen3-8b --card nvidia-h100 --engine vllm --dtype int8 --kv-dtype int8", code=2).output
    assert (
        "--kv-dtype: vLLM's --kv-cache-dtype has no int8 on nvidia-h100 (got int8, expected auto or fp8"
        in out
    )
