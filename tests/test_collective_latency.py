"""The fitted per-collective latency (allreduce_latency_us): what a decode step charges for it, where the fit
may move it, and which collectives pay it (hand-worked cases)."""

from __future__ import annotations

import numpy as np
import pytest

from planner import catalog, inputs
from planner.fit import features, step_rows
from planner.perf import fitted_params, roofline


def _dep(tp: int, *, card: str = "ascend-910b3", model: str = "qwen3-14b"):
    request = inputs.PlanRequest(model=model, card=card, dtype="bf16", ctx="8192", engine="vllm", tp=tp)
    return inputs.to_deployment(request)


@pytest.mark.parametrize(("tp", "collectives"), [(1, 0), (2, 80)])
def test_each_collective_pays_the_latency_once_per_layer(tp: int, collectives: int) -> None:
    """Qwen3-14B (40 layers) at tp = 2: two all-reduces per layer (after attention, after the MLP) = 80 per
    decode step, so raising the latency from 20 to 200 us adds 80 x 180 us = 14.4 ms to the step; tp = 1
    runs no collective and does not move. The fit's cached features charge the same."""
    dep = _dep(tp)
    base = dep.hardware.coefficients()
    slow = base.model_copy(update={"allreduce_latency_us": 200.0})
    fast = base.model_copy(update={"allreduce_latency_us": 20.0})
    steps = [
        roofline.decode_step_s(step_rows.at_coefficients(dep, c), batch=12, ctx_tokens=650)
        for c in (slow, fast)
    ]
    assert steps[0] - steps[1] == pytest.approx(collectives * 180e-6, rel=1e-9, abs=1e-12)
    timer = features.FeatureTimer(dep, slow)
    assert timer.decode_step_s(batch=12, ctx_tokens=650) == pytest.approx(steps[0], rel=1e-9)


def test_a_tp_moe_without_expert_parallel_pays_two_collectives_per_layer() -> None:
    """Qwen3-30B-A3B (48 MoE layers) on vllm-ascend at tp = 4 without --enable-expert-parallel: vLLM's
    Qwen3MoeSparseMoeBlock builds FusedMoE(reduce_results=False) and all-reduces its output once when tp > 1
    (vllm model_executor/models/qwen3_moe.py @002456df, the model vllm-ascend e511ddd6 of 2025-07-03 ran
    unchanged); o_proj's RowParallelLinear all-reduces too, and without DP the all-gather finalize does
    nothing (vllm-ascend 182b75ea ops/fused_moe/prepare_finalize.py _finalize_with_dp_group). So 2 x 48 = 96
    collectives, no dispatch / combine: 20 -> 200 us adds 96 x 180 us = 17.28 ms to a step."""
    dep = _dep(4, model="qwen3-30b-a3b")
    base = dep.hardware.coefficients()
    steps = [
        roofline.decode_step_s(
            step_rows.at_coefficients(dep, base.model_copy(update={"allreduce_latency_us": us})),
            batch=3,
            ctx_tokens=200,
        )
        for us in (200.0, 20.0)
    ]
    assert steps[0] - steps[1] == pytest.approx(96 * 180e-6, rel=1e-9)


def test_the_fit_moves_the_latency_only_where_the_profile_says_how_far() -> None:
    """910B3 states allreduce_latency_prior_factor 10: the prior is 20 us x/ 10. A profile without the factor
    holds the latency at its own value (x/ 1.001), so its other terms fit as before."""
    index = fitted_params.PARAM_NAMES.index("allreduce_latency_us")
    b3 = catalog.load_card("ascend-910b3").default_coefficients
    centre, sigma = fitted_params.prior(b3, measured=False)
    assert np.exp(centre[index]) == pytest.approx(b3.allreduce_latency_us)
    assert sigma[index] == pytest.approx(np.log(10.0))
    c = catalog.load_card("ascend-910c").default_coefficients
    assert c.allreduce_latency_prior_factor is None
    assert fitted_params.prior(c, measured=False)[1][index] == pytest.approx(np.log(1.001))


def test_a_collective_that_leaves_the_node_keeps_the_datasheet_latency() -> None:
    """910B3 nodes hold 8 NPUs: a tp = 16 all-reduce crosses RoCE and pays the profile's inter-node latency
    (30 us), not the fitted in-node one; tp = 8 stays inside the node."""
    inside, across = (roofline.rates(_dep(tp, model="qwen3-235b-a22b")).link_rates for tp in (8, 16))
    assert "link" in inside.node_resources and "link" not in across.node_resources
    assert across.tp[1] == pytest.approx(30e-6)


def test_rows_of_an_engine_with_device_launched_collectives_hold_the_latency() -> None:
    """MindIE's ATB models run in-node collectives on LCCL (launched from the device), vllm-ascend's on HCCL
    through the host: on MindIE rows the 910B3 fit holds the latency at 20 us even though the card states a
    width, on vllm-ascend rows it may move x/ 10."""
    from planner.engines import registry

    assert registry.device_launched_collectives({"mindie"})
    assert not registry.device_launched_collectives({"vllm"})
    index = fitted_params.PARAM_NAMES.index("allreduce_latency_us")
    b3 = catalog.load_card("ascend-910b3").default_coefficients
    held = fitted_params.prior(b3, measured=False, hold_collective_latency=True)[1][index]
    assert held == pytest.approx(fitted_params.PRIOR_SIGMA_HELD)
