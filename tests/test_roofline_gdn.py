"""Gated DeltaNet decode cost per engine: state passes and the measured transformers + fla kernel count."""

from __future__ import annotations

import numpy as np
import pytest

from planner.deployment import Deployment
from planner.perf import opcost, prefill, roofline
from planner.perf.kernels import op_kernels
from tests.helpers import deployment


def _dep(engine: str, model: str = "qwen3.5-27b") -> Deployment:
    return deployment(model, engine=engine)


def _gdn_bytes(dep: Deployment, batch: float) -> float:
    step = roofline.decode_step(dep, batch=np.asarray(batch), ctx_tokens=np.asarray(2048.0))
    term = opcost.gdn_update_term(roofline.geometry(dep), step)
    return float(term.bytes)


def test_transformers_reads_and_writes_the_state_twice() -> None:
    passes = {
        engine: roofline.engine_kernels(_dep(engine)).state_passes for engine in ("transformers", "vllm")
    }
    assert passes == {"transformers": 4, "vllm": 2}
    geo = roofline.geometry(_dep("transformers"))
    for engine in ("transformers", "vllm"):
        dep = _dep(engine)
        per_sequence = _gdn_bytes(dep, 65.0) - _gdn_bytes(dep, 1.0)
        # linear in batch: 64 more sequences cost 64 * passes * state bytes per sequence
        assert per_sequence == pytest.approx(64 * passes[engine] * geo.state_bytes_per_sequence)


def test_transformers_gdn_layer_kernel_counts_are_the_measured_ones() -> None:
    eager, fused = roofline.engine_kernels(_dep("transformers")), roofline.engine_kernels(_dep("vllm"))
    launches = sum(op_kernels(eager, op).launches for op in ("gdn.in_proj", "gdn.update", "gdn.out_proj"))
    assert launches == 34  # 5 matmul calls + 29 others per layer (h200-run5 gdn_*.json at batch >= 2)
    assert op_kernels(eager, "gdn.update").launches > op_kernels(fused, "gdn.update").launches


def test_gdn_layer_cost_grows_with_batch_and_dominates_fused() -> None:
    slow, fused = _dep("transformers"), _dep("vllm")
    t1 = roofline.decode_step_s(slow, batch=1, ctx_tokens=2048)
    t64 = roofline.decode_step_s(slow, batch=64, ctx_tokens=2048)
    assert t64 > t1
    assert t1 > roofline.decode_step_s(fused, batch=1, ctx_tokens=2048)


@pytest.mark.parametrize("draft", [1, 3])
def test_speculative_verify_writes_one_state_snapshot_per_position(draft: int) -> None:
    plain, spec = _dep("vllm"), _dep("vllm").model_copy(update={"mtp_tokens": draft})
    assert spec.include_mtp
    geo = roofline.geometry(plain)
    extra = _gdn_bytes(spec, 8.0) - _gdn_bytes(plain, 8.0)
    # one read + (1 + k) writes: k more state passes per sequence than a plain decode step
    assert extra == pytest.approx(8 * draft * geo.state_bytes_per_sequence)


def test_prefill_writes_the_state_once_even_with_mtp() -> None:
    dep = _dep("vllm").model_copy(update={"mtp_tokens": 3})
    step = prefill.prefill_step(dep, prompt_tokens=1024, cached_tokens=0)
    assert step.state_writes == 1
