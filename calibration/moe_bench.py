"""Grouped expert GEMM microbenchmark: what transformers' MoE decode path runs per layer at decode shapes
(experts_implementation="grouped_mm").

transformers 5.x `grouped_mm_experts_forward` sorts the batch * top_k routed (token, expert) pairs by expert,
counts tokens per expert (histc + cumsum -> offsets) and runs two grouped GEMMs over ALL E experts' stacked
weights, (E, 2 I, H) for gate_up and (E, H, I) for down, through torch.nn.functional.grouped_mm
(torch >= 2.10; torch._grouped_mm before); experts that no token chose get an empty group. Two benchmarks,
per decode batch:

    grouped_gemm   the two grouped GEMMs alone, on routed inputs sorted as transformers sorts them;
                   bytes = touched experts * expert matrix bytes + routed rows * (in + out) * 2
                   -> t = latency + bytes / bw  ->  grouped_matmul_latency_us,
                      grouped_weight_read_bandwidth_fraction (calibration/calibrate.py)
    moe_experts    transformers' own Qwen3MoeExperts forward (grouped_mm implementation: routing kernels and
                   both GEMMs), as provenance: the whole op the roofline's moe.experts term models

Routing is uniform random top-k. Each timing cycles through several routings of the same weight stack so that
consecutive calls read different experts (the real model has different weights per layer, never in L2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

BF16_BYTES = 2
MAX_ROUTINGS = 16


def grouped_mm_fn(torch: Any) -> Callable[..., Any]:
    """torch.nn.functional.grouped_mm when present (torch >= 2.10), else torch._grouped_mm."""
    return getattr(torch.nn.functional, "grouped_mm", None) or torch._grouped_mm


def grouped_call(backend: Any) -> tuple[Callable[[Any], Any], Callable[[Any, Any, Any], Any]]:
    """(prepare, call) for one grouped GEMM: prepare lays an (E, out, in) stack out once, call(x, stack,
    offsets) runs it. npu: torch_npu.npu_grouped_matmul on (E, in, out) stacks (torch's grouped_mm has no
    NPU kernel; calibration/npu_kernels.py); elsewhere torch's grouped_mm on a transposed view."""
    if backend.kind == "npu":
        from calibration import npu_kernels

        return npu_kernels.grouped_matmul_fn(backend)
    grouped = grouped_mm_fn(backend.torch)
    return (lambda stack: stack.transpose(-2, -1)), (lambda x, w, offs: grouped(x, w, offs=offs))


def routings(suite: Any, *, tokens: int, experts: int, top_k: int, count: int) -> list[Any]:
    """`count` random top-k routings of `tokens` tokens over `experts` experts: (tokens, top_k) indices."""
    torch = suite.backend.torch
    return [
        torch.rand(tokens, experts, device=suite.backend.device).topk(top_k, dim=-1).indices
        for _ in range(count)
    ]


def offsets_of(torch: Any, index: Any, *, experts: int) -> tuple[Any, Any]:
    """(permutation sorting the routed pairs by expert, int32 cumulative tokens per expert), computed as
    transformers does (sort, then histc over expert ids, then cumsum)."""
    ids, perm = torch.sort(index.reshape(-1))
    counts = torch.histc(ids.float(), bins=experts, min=0, max=experts - 1)
    return perm, torch.cumsum(counts, dim=0, dtype=torch.int32)


def offsets_for(backend: Any, offsets: Any) -> Any:
    """The offsets as the grouped GEMM wants them: int64 for npu_grouped_matmul's group_list (converted once,
    outside the timed calls), int32 for torch's grouped_mm."""
    return offsets.to(backend.torch.int64) if backend.kind == "npu" else offsets


def routing_plans(suite: Any, *, batch: int) -> tuple[list[tuple[Any, Any]], int, float]:
    """(routings as offsets_of pairs, how many, mean experts each touches) for one decode batch.

    Formula:
        touched_bytes = k * B * 3 * h * i * 2      expert weight bytes one routing reads at most (bf16)
        count         = clamp(ceil(R / touched_bytes), 1, MAX_ROUTINGS)
        k  top_k; B  batch (tokens); h  hidden; i  moe intermediate; R  suite.sizes.rotate_bytes, so the
        routings together stream past the caches; 3: gate, up and down matrices.
    """
    experts, top_k, hidden, inter = suite.shapes.moe
    torch = suite.backend.torch
    touched_bytes = top_k * batch * 3 * hidden * inter * BF16_BYTES
    count = max(1, min(MAX_ROUTINGS, -(-suite.sizes.rotate_bytes // touched_bytes)))
    plans = [
        offsets_of(torch, r, experts=experts)
        for r in routings(suite, tokens=batch, experts=experts, top_k=top_k, count=count)
    ]
    touched = sum(int((torch.diff(offs, prepend=offs[:1] * 0) > 0).sum()) for _, offs in plans) / count
    return plans, count, touched


def grouped_gemm_bench(suite: Any) -> None:
    """Time the gate_up and down grouped GEMMs at every decode batch of the suite's sizes."""
    if suite.shapes.moe is None:
        suite.out.notes.append("grouped GEMM: no MoE shapes (dense --model), not run")
        return
    experts, top_k, hidden, inter = suite.shapes.moe
    prepare, grouped = grouped_call(suite.backend)
    stacks = {
        "gate_up": prepare(suite._randn(experts, 2 * inter, hidden)),
        "down": prepare(suite._randn(experts, hidden, inter)),
    }
    for batch in suite.sizes.moe_batches:
        if not suite.time_left():
            suite.out.notes.append("grouped GEMM: stopped early, time budget spent")
            return
        plans, count, touched = routing_plans(suite, batch=batch)
        for op, weight in stacks.items():
            in_f, out_f = weight.shape[1], weight.shape[2]  # prepared: (E, in, out)
            inputs = [(suite._randn(batch * top_k, in_f), offsets_for(suite.backend, o)) for _, o in plans]

            def run(inputs: list[Any] = inputs, w: Any = weight) -> None:
                for x, offs in inputs:
                    grouped(x, w, offs)

            seconds = [s / count for s in suite._timed(run, graph=suite.backend.kind != "cpu")]
            suite._record(
                "grouped_gemm",
                seconds,
                op=op,
                batch=batch,
                routed=batch * top_k,
                experts=experts,
                touched=touched,
                in_features=in_f,
                out_features=out_f,
                bytes=touched * in_f * out_f * BF16_BYTES + batch * top_k * (in_f + out_f) * BF16_BYTES,
                flop=2 * batch * top_k * in_f * out_f,
            )
    moe_experts_bench(suite)


def transformers_experts(suite: Any) -> Any | None:
    """transformers' Qwen3MoeExperts (grouped_mm implementation) at the suite's MoE shape, or None."""
    try:
        from transformers import Qwen3MoeConfig
        from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeExperts
    except ImportError as exc:
        suite.out.notes.append(f"moe_experts: transformers not importable ({exc}), not run")
        return None
    experts, top_k, hidden, inter = suite.shapes.moe
    config = Qwen3MoeConfig(
        hidden_size=hidden, moe_intermediate_size=inter, num_experts=experts, num_experts_per_tok=top_k
    )
    config._experts_implementation = "grouped_mm"
    torch = suite.backend.torch
    with torch.device(suite.backend.device):
        module = Qwen3MoeExperts(config).to(torch.bfloat16)
    for weight in (module.gate_up_proj, module.down_proj):
        torch.nn.init.normal_(weight, std=0.02)
    return module


def moe_experts_bench(suite: Any) -> None:
    """Time transformers' whole experts forward (routing kernels + grouped GEMMs) at each decode batch."""
    if suite.backend.kind == "npu":
        suite.out.notes.append(
            "moe_experts: transformers' grouped_mm experts call torch's grouped_mm, which has no NPU kernel; "
            "not run on npu (the grouped GEMMs above use torch_npu.npu_grouped_matmul)"
        )
        return
    module = transformers_experts(suite)
    if module is None:
        return
    experts, top_k, hidden, _ = suite.shapes.moe
    torch = suite.backend.torch
    for batch in suite.sizes.moe_batches:
        if not suite.time_left():
            return
        count = 4
        calls = [
            (
                suite._randn(batch, hidden),
                index,
                torch.rand(batch, top_k, device=suite.backend.device).to(torch.bfloat16),
            )
            for index in routings(suite, tokens=batch, experts=experts, top_k=top_k, count=count)
        ]

        def run(calls: list[Any] = calls) -> None:
            with torch.no_grad():
                for x, index, weights in calls:
                    module(x, index, weights)

        seconds = [s / count for s in suite._timed(run, graph=suite.backend.kind != "cpu")]
        suite._record("moe_experts", seconds, batch=batch, routed=batch * top_k, experts=experts)
