"""Per-kernel decode-attention tables: which table an engine's decode uses, and the old single field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner import catalog
from planner.perf import roofline
from planner.perf.attention import attention_kernel, attention_table_for
from planner.schema import AttentionRate, PerfCoefficients
from tests.helpers import deployment

H200 = catalog.load_card("nvidia-h200")
BASE = H200.coefficients(calibrated=False)  # datasheet defaults: no tables


def _rate(head_dim: int, gb_per_s: float) -> AttentionRate:
    return AttentionRate(batch=4, kv_heads=8, head_dim=head_dim, ctx_tokens=1024, gb_per_s=gb_per_s)


def _coeff(**update: object) -> PerfCoefficients:
    data = BASE.model_dump()
    data.update(update)
    return PerfCoefficients.model_validate(data)


OLD = [_rate(128, 100.0)]
TABLES = {"fast": [_rate(128, 900.0), _rate(256, 700.0)], "slow": [_rate(128, 300.0)]}


def test_engine_and_head_dim_pick_the_kernel_nearest_head_dim() -> None:
    coeff = _coeff(
        attention_table=OLD, attention_tables=TABLES, attention_kernels={"vllm": {128: "slow", 256: "fast"}}
    )
    assert attention_kernel(coeff, engine="vllm", head_dim=128) == "slow"
    assert attention_kernel(coeff, engine="vllm", head_dim=250) == "fast"  # nearest listed head_dim: 256
    assert attention_kernel(coeff, engine="mindie", head_dim=128) is None
    # the fast table keeps only its points at the head_dim nearest the model's
    assert attention_table_for(coeff, engine="vllm", head_dim=256) == [TABLES["fast"][1]]
    assert attention_table_for(coeff, engine="vllm", head_dim=128) == TABLES["slow"]


def test_old_single_table_still_read_when_no_choice() -> None:
    coeff = _coeff(attention_table=OLD)  # a profile written before attention_tables existed
    assert coeff.attention_tables is None
    assert attention_table_for(coeff, engine="transformers", head_dim=128) == OLD
    listed = _coeff(attention_table=OLD, attention_tables=TABLES, attention_kernels={"vllm": {128: "fast"}})
    assert attention_table_for(listed, engine="mindie", head_dim=128) == OLD


def test_kernel_without_table_is_rejected() -> None:
    with pytest.raises(ValidationError, match=r"attention_kernels\.vllm\.128 names kernel 'nope'"):
        _coeff(attention_tables=TABLES, attention_kernels={"vllm": {128: "nope"}})


def test_shipped_profile_times_transformers_with_cudnn_faster_than_flash() -> None:
    measured = H200.coefficients(calibrated=True)
    assert measured.attention_kernels is not None and measured.attention_tables is not None
    assert measured.attention_kernels["transformers"][128] == "cudnn"
    dep = deployment("qwen3-8b", H200, ctx_tokens=8192, engine="transformers")
    flash = H200.model_copy(
        update={
            "measured": H200.measured.model_copy(  # type: ignore[union-attr]
                update={
                    "coefficients": measured.model_copy(
                        update={"attention_kernels": {"transformers": {128: "flash"}}}
                    )
                }
            )
        }
    )
    cudnn_s = roofline.decode_step_s(dep, batch=64, ctx_tokens=8192)
    flash_s = roofline.decode_step_s(dep.model_copy(update={"hardware": flash}), batch=64, ctx_tokens=8192)
    # run 5 measured flash / default = 1.6-1.8 on the attention kernel in this corner; the step is slower
    assert flash_s > 1.2 * cudnn_s
