"""Ascend kernels as the serving engines call them, for calibration/microbench.py and moe_bench.py on npu.

    paged decode attention  torch_npu.npu_fused_infer_attention_score over a paged KV cache: BSH query of
                            length 1, key/value caches (blocks, block_size, kv_heads * head_dim), an int32
                            block_table of shuffled blocks and actual_seq_lengths_kv, as MindIE and
                            vllm-ascend call it at decode (block_size 128)
    grouped expert GEMM     torch_npu.npu_grouped_matmul on one routed x (rows sorted by expert) and one
                            expert stack laid out (E, in, out), group_list = int64 cumulative rows per expert
                            (group_list_type 0), split_item 2, group_type 0 (torch._grouped_mm has no NPU
                            kernel)
    W8A16 GEMV              torch_npu.npu_weight_quant_batchmatmul with the engines' weight layout: the
                            checkpoint's int8 (out, in) transposed to (in, out), then cast to FRACTAL_NZ
                            (npu_format_cast(w, 29)) as vllm-ascend does when NZ is on; ND and NZ are both
                            timed, inside a graph when capture works
    GEMM per dtype          bf16 / fp16 matmul, int8 via npu_quant_matmul, fp8 (950 only) via npu_quant_matmul
                            on float8_e4m3fn inputs; the SoC plan (npu_caps) picks the dtypes
    kernels per pass        torch_npu.profiler over one decode_chain pass; device kernels are the rows of
                            ASCEND_PROFILER_OUTPUT/kernel_details.csv

NOT RUN ON ASCEND HARDWARE. Keyword names follow the torch_npu 7.x API pages; the fp8 call form, the NZ
format id and the profiler's output layout are assumptions to check on the first 910B / 950 (see
calibration/README.md, "Ascend: what is assumed").
"""

from __future__ import annotations

import csv
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from calibration.device import square_gemm

BLOCK_SIZE = 128  # [assumed: the KV block size MindIE and vllm-ascend default to on Ascend]
ACL_FORMAT_FRACTAL_NZ = 29  # [assumed: ACL format id of FRACTAL_NZ, as vllm-ascend's utils define it]
INT8_RANGE = 64


def _torch_npu() -> Any:
    import torch_npu  # type: ignore[import-not-found]

    return torch_npu


def paged_attention_fn(
    backend: Any, *, batch: int, ctx: int, heads: tuple[int, int, int]
) -> Callable[[], Any]:
    """One decode-attention call over a paged KV cache of `batch` sequences of `ctx` tokens each."""
    torch, dev, dtype = backend.torch, backend.device, backend.compute_dtype
    hq, hkv, hd = heads
    blocks_per_seq = math.ceil(ctx / BLOCK_SIZE)
    blocks = batch * blocks_per_seq
    key_cache = torch.randn(blocks, BLOCK_SIZE, hkv * hd, device=dev, dtype=dtype)
    value_cache = torch.randn(blocks, BLOCK_SIZE, hkv * hd, device=dev, dtype=dtype)
    # shuffled blocks: a long-running cache hands sequences scattered blocks, not one contiguous run
    block_table = torch.randperm(blocks, device=dev).to(torch.int32).reshape(batch, blocks_per_seq)
    query = torch.randn(batch, 1, hq * hd, device=dev, dtype=dtype)
    lengths = [ctx] * batch
    attend = _torch_npu().npu_fused_infer_attention_score

    def run() -> Any:
        return attend(
            query,
            key_cache,
            value_cache,
            block_table=block_table,
            actual_seq_lengths_kv=lengths,
            num_heads=hq,
            num_key_value_heads=hkv,
            input_layout="BSH",
            scale=hd**-0.5,
            block_size=BLOCK_SIZE,
        )

    return run


def grouped_matmul_fn(backend: Any) -> tuple[Callable[[Any], Any], Callable[[Any, Any, Any], Any]]:
    """(prepare, call): prepare turns an (E, out, in) expert stack into the (E, in, out) layout the engines
    load; call(x, stack, offsets) runs npu_grouped_matmul with int64 cumulative offsets. Raises RuntimeError
    naming the torch_npu version when this build has no npu_grouped_matmul."""
    torch_npu = _torch_npu()
    grouped = getattr(torch_npu, "npu_grouped_matmul", None)
    if grouped is None:
        version = getattr(torch_npu, "__version__", "?")
        raise RuntimeError(f"torch_npu {version} has no npu_grouped_matmul; grouped expert GEMM not measured")
    torch = backend.torch

    def prepare(stack: Any) -> Any:
        return stack.transpose(-2, -1).contiguous()

    def call(x: Any, stack: Any, offsets: Any) -> Any:
        group_list = offsets if offsets.dtype == torch.int64 else offsets.to(torch.int64)
        return grouped([x], [stack], group_list=group_list, split_item=2, group_type=0, group_list_type=0)[0]

    return prepare, call


def w8a16_weights(backend: Any, *, in_f: int, out_f: int, copies: int) -> dict[str, list[Any]]:
    """{"ND": [...], "NZ": [...]} int8 (in, out) weights as the engines lay them out; "NZ" is left out
    (with a note) when npu_format_cast fails on this build."""
    torch, dev = backend.torch, backend.device
    checkpoint = [
        torch.randint(-INT8_RANGE, INT8_RANGE, (out_f, in_f), device=dev, dtype=torch.int8)
        for _ in range(copies)
    ]
    layouts = {"ND": [w.t().contiguous() for w in checkpoint]}
    try:
        cast = _torch_npu().npu_format_cast
        layouts["NZ"] = [cast(w, ACL_FORMAT_FRACTAL_NZ) for w in layouts["ND"]]
    except Exception as exc:  # an old build or a SoC without NZ for int8: time ND only, say so
        backend.notes.append(f"quantized GEMV: FRACTAL_NZ cast failed ({type(exc).__name__}: {exc}); ND only")
    return layouts


def w8a16_rows(suite: Any) -> None:
    """W8A16 decode GEMV (per-channel scale) at the first decode batches, ND and NZ, graph when possible."""
    torch, backend = suite.backend.torch, suite.backend
    in_f, out_f = max(suite.shapes.linears, key=lambda s: s[0] * s[1])
    weight_bytes = in_f * out_f  # int8
    copies = max(1, -(-suite.sizes.rotate_bytes // weight_bytes))
    matmul = _torch_npu().npu_weight_quant_batchmatmul
    scale = torch.randn(out_f, device=backend.device, dtype=backend.compute_dtype)

    def w8a16(x: Any, weight: Any) -> Any:
        return matmul(x, weight, scale)

    for layout, weights in w8a16_weights(backend, in_f=in_f, out_f=out_f, copies=copies).items():
        tags = {"dtype": "w8a16", "layout": layout}
        for batch in suite.sizes.decode_batches[:4]:
            x = torch.randn(batch, in_f, device=backend.device, dtype=backend.compute_dtype)
            suite._record_gemv(w8a16, x, weights, out_f=out_f, weight_bytes=weight_bytes, **tags)


def gemm_variants(backend: Any, n: int) -> dict[str, Callable[[], Callable[[], object]]]:
    """Factories of n x n x n GEMM closures for the dtypes of this SoC's plan; the others are noted."""
    torch = backend.torch
    wanted = backend.caps.gemm_dtypes if backend.caps is not None else ("bf16", "fp16", "int8")

    factories = {
        "bf16": square_gemm(backend, n, torch.bfloat16),
        "fp16": square_gemm(backend, n, torch.float16),
        "int8": lambda: _quant_gemm(backend, n, torch.int8),
        "fp8": lambda: _quant_gemm(backend, n, torch.float8_e4m3fn),
    }
    soc = backend.caps.soc if backend.caps is not None else "this SoC"
    for dtype in factories.keys() - set(wanted):
        backend.notes.append(f"GEMM peak {dtype}: not on {soc}, not measured")
    return {d: factories[d] for d in wanted if d in factories}


def _quant_gemm(backend: Any, n: int, dtype: Any) -> Callable[[], object]:
    """npu_quant_matmul on (n, n) x (n, n) inputs of `dtype` (int8, or float8_e4m3fn on the 950) with a
    per-channel fp32 scale, output in the compute dtype (fp16 on the 310P, which has no bf16 output)."""
    torch, dev = backend.torch, backend.device
    if dtype == torch.int8:
        a = torch.randint(-INT8_RANGE, INT8_RANGE, (n, n), device=dev, dtype=torch.int8)
        b = torch.randint(-INT8_RANGE, INT8_RANGE, (n, n), device=dev, dtype=torch.int8)
    else:
        a, b = (torch.randn(n, n, device=dev).to(dtype) for _ in range(2))
    scale = torch.ones(n, device=dev, dtype=torch.float32)
    quant = _torch_npu().npu_quant_matmul
    out_dtype = backend.compute_dtype
    return lambda: quant(a, b, scale, output_dtype=out_dtype)


def count_device_kernels(backend: Any, fn: Callable[[], object]) -> int:
    """Device kernels launched by one call of fn, from torch_npu.profiler's kernel_details.csv.

    Raises RuntimeError when the profiler wrote no kernel_details.csv (then the caller keeps the constant).
    """
    profiler = _torch_npu().profiler
    fn()  # warm-up outside the profile: first calls compile / cache kernels
    backend.synchronize()
    with tempfile.TemporaryDirectory(prefix="kvplan-npu-prof-") as folder:
        with profiler.profile(
            activities=[profiler.ProfilerActivity.CPU, profiler.ProfilerActivity.NPU],
            on_trace_ready=profiler.tensorboard_trace_handler(folder),
        ):
            fn()
            backend.synchronize()
        tables = sorted(Path(folder).rglob("kernel_details.csv"))
        if not tables:
            raise RuntimeError("torch_npu.profiler wrote no kernel_details.csv")
        with open(tables[0], newline="", encoding="utf-8") as handle:
            return sum(1 for row in csv.DictReader(handle) if row.get("Name"))
