"""Speed under parallel layouts (planner/perf/links.py, the moe.dispatch / pp.send ledger terms)."""

from __future__ import annotations

import pytest

from planner.deployment import Deployment
from planner.inputs import PlanRequest, to_deployment
from planner.perf import roofline

V3 = dict(model="deepseek-v3", card="ascend-910c", dtype="int8", ctx="4k")


def ops(dep, batch: int) -> dict[str, roofline.Op]:
    return {op.name: op for op in roofline.decode_ledger(dep, batch=batch, ctx_tokens=4096).ops}


def balanced(dep: Deployment) -> Deployment:
    """`dep` with its card's default expert_imbalance_factor set to 1 (every expert gets the same rows)."""
    hw = dep.hardware
    even = hw.default_coefficients.model_copy(update={"expert_imbalance_factor": 1.0})
    return dep.model_copy(update={"hardware": hw.model_copy(update={"default_coefficients": even})})


def test_tp_only_ledger_has_no_dispatch_or_pipeline_term() -> None:
    names = ops(to_deployment(PlanRequest(**V3, tp=16)), 8)
    assert "moe.dispatch" not in names and "pp.send" not in names and "tp.allreduce" in names


def test_dispatch_bytes_follow_the_formula() -> None:
    """2 * L_moe * (n / tp) * k * H * b * (ep - 1) / ep * u: 58 MoE layers, n = 20, tp 8, k 8, H 7168,
    bf16 activations (2 bytes), ep 16, u = 1.2 (assumed imbalance)."""
    dep = to_deployment(PlanRequest(**V3, tp=8, dp=2, ep=16))
    expected = 2 * 58 * (20 / 8) * 8 * 7168 * 2 * (15 / 16) * 1.2
    assert ops(dep, 20)["moe.dispatch"].bytes == pytest.approx(expected, rel=1e-12)


def test_dispatch_across_nodes_is_slower_than_inside_one() -> None:
    """EP 32 over two A3 nodes (16 dies each) vs the same layout on one 32-device node: RoCE (25 GB/s,
    assumed) carries the off-node share instead of the 196 GB/s UB link."""
    two_nodes = to_deployment(PlanRequest(**V3, tp=8, dp=4, ep=32))
    one_node = to_deployment(PlanRequest(**V3, tp=8, dp=4, ep=32, devices_per_node=32))
    slow, fast = ops(two_nodes, 16)["moe.dispatch"], ops(one_node, 16)["moe.dispatch"]
    assert slow.bytes == fast.bytes
    # off-node share f = (32 - 16) / 31; time ratio = max((1 - f) / 196, f / 25) / (1 / 196) = f * 196 / 25
    assert slow.transfer_s / fast.transfer_s == pytest.approx(16 / 31 * 196 / 25, rel=1e-9)


def test_tp_allreduce_over_nodes_uses_the_network() -> None:
    """tp 16 on 910B4 nodes of 8 crosses RoCE; declared as one 16-device node it stays on HCCS."""
    spanning = to_deployment(PlanRequest(model="qwen3-32b", card="ascend-910b4", tp=16, dp=1, ep=1, nodes=2))
    inside = to_deployment(PlanRequest(model="qwen3-32b", card="ascend-910b4", tp=16, devices_per_node=16))
    slow = roofline.decode_ledger(spanning, batch=8, ctx_tokens=4096)
    fast = roofline.decode_ledger(inside, batch=8, ctx_tokens=4096)
    slow_op, fast_op = (next(o for o in led.ops if o.name == "tp.allreduce") for led in (slow, fast))
    assert slow_op.transfer_s > fast_op.transfer_s


def test_expert_imbalance_is_a_calibratable_coefficient() -> None:
    dep = to_deployment(PlanRequest(**V3, tp=8, dp=2, ep=16))
    skewed, even = ops(dep, 20), ops(balanced(dep), 20)
    assert even["moe.experts"].flop * 1.2 == pytest.approx(skewed["moe.experts"].flop, rel=1e-12)
    assert even["moe.dispatch"].bytes * 1.2 == pytest.approx(skewed["moe.dispatch"].bytes, rel=1e-12)


def test_ep_rank_computes_its_share_of_rows() -> None:
    """FLOP of the experts per rank: whole experts under EP (moe_tp 1) on n*k/tp rows ~ the TP-only rank's
    n*k rows of experts split tp ways (same FLOP when balanced): tp 8 dp 1 ep 8 vs tp 8."""
    tp_only = to_deployment(PlanRequest(**V3, tp=8))
    ep = to_deployment(PlanRequest(**V3, tp=8, ep=8))
    assert ops(balanced(ep), 16)["moe.experts"].flop == pytest.approx(
        ops(tp_only, 16)["moe.experts"].flop, rel=1e-9
    )


def test_pipeline_stages_add_hand_offs_and_a_bubble_at_small_batch() -> None:
    """batch 1 on 2 stages: one microbatch passes both stages (the whole model) plus one hand-off, so the
    step is the tp-only step at batch 1 plus the pp.send term."""
    one = to_deployment(PlanRequest(model="qwen3-32b", card="ascend-910b4", tp=2, engine="vllm"))
    two = to_deployment(PlanRequest(model="qwen3-32b", card="ascend-910b4", tp=2, pp=2, engine="vllm"))
    base = roofline.decode_ledger(one, batch=1, ctx_tokens=4096)
    staged = roofline.decode_ledger(two, batch=1, ctx_tokens=4096)
    send = next(o for o in staged.ops if o.name == "pp.send")
    assert staged.time_s == pytest.approx(base.time_s + send.time_s, rel=1e-9)
    # batch 8 on 2 stages: microbatches of 4, each the whole model at 4
    at_four = roofline.decode_step_s(one, batch=4, ctx_tokens=4096)
    assert roofline.decode_step_s(two, batch=8, ctx_tokens=4096) > at_four


def test_vllm_expert_parallel_moe_ends_in_an_all_gather() -> None:
    """vllm-ascend's EP MoE block all-gathers the TP ranks' token slices instead of all-reducing: per token,
    (2 L - L_moe / 2) hidden vectors cross the link, not 2 L (DeepSeek-V3: 61 layers, 58 MoE). MindIE and
    a TP-sharded MoE keep two all-reduces per layer."""
    layers, moe = 61, 58
    base = {**V3, "tp": 8, "dp": 2}
    ep_vllm = ops(to_deployment(PlanRequest(**base, ep=16, engine="vllm")), 8)["tp.allreduce"]
    tp_vllm = ops(to_deployment(PlanRequest(**base, ep=1, engine="vllm")), 8)["tp.allreduce"]
    ep_mindie = ops(to_deployment(PlanRequest(**base, ep=16, engine="mindie")), 8)["tp.allreduce"]
    assert ep_vllm.bytes / tp_vllm.bytes == pytest.approx((2 * layers - moe / 2) / (2 * layers), rel=1e-12)
    assert ep_mindie.bytes == tp_vllm.bytes
