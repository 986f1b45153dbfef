"""Decode attention (q_len = 1, GQA, bf16) for every SDPA backend torch accepts, and causal prefill attention.

For each (q heads, kv heads, head_dim) x batch x ctx: torch SDPA with its own dispatch ("default"), then each
backend forced (flash, efficient, cudnn; math only at small sizes). Layouts: "gqa" = enable_gqa=True on
(B, Hkv, S, D) K/V (what our reference and a serving engine do); "repeat" = K/V pre-expanded to Hq heads
(what transformers' own "sdpa" attention does when it passes a mask: repeat_kv, then SDPA without
enable_gqa; only the kernel is timed here, not the repeat copy). The backend the default dispatch picks is
read from torch._fused_sdp_choice. Each call is captured in a CUDA graph over several rotated K/V copies
(so small shapes are not served from L2) and timed with events; medians.
"""

from __future__ import annotations

import math
import time
from typing import Any

from lab.harness.ref_common import sdpa_context

HEADS = ((32, 8, 128), (64, 8, 128), (16, 8, 128), (24, 4, 256), (8, 2, 256))
BATCHES = (1, 4, 16, 32, 64, 128)
CONTEXTS = (8192, 2048, 32768, 512, 16384)  # most informative first (budget cut)
ROTATE_BYTES = 256 * 2**20  # K/V bytes touched per graph replay at least (L2 is 60 MB)
MAX_KV_BYTES = 20 * 2**30
PICK = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable", -1: "error"}


def default_choice(torch: Any, q: Any, k: Any, v: Any, *, causal: bool, gqa: bool) -> str:
    """The backend torch's SDPA dispatch picks for these inputs (torch._fused_sdp_choice)."""
    try:
        idx = int(torch._fused_sdp_choice(q, k, v, None, 0.0, causal, scale=None, enable_gqa=gqa))
    except Exception as exc:
        return f"unknown ({type(exc).__name__}: {str(exc)[:80]})"
    return PICK.get(idx, str(idx))


def time_backend(
    torch: Any, backend: str, qs: list[Any], kvs: list[tuple[Any, Any]], *, gqa: bool, causal: bool = False
) -> dict[str, Any]:
    """Seconds per attention call of one backend over rotated inputs (graph replay, event timed)."""
    from lab.harness.ref_common import device_time, graph_of

    sdpa = torch.nn.functional.scaled_dot_product_attention
    outs = [None] * len(qs)

    def run() -> None:
        with sdpa_context(backend):
            for i, (q, (k, v)) in enumerate(zip(qs, kvs, strict=True)):
                outs[i] = sdpa(q, k, v, is_causal=causal, enable_gqa=gqa)

    try:
        run()
        torch.cuda.synchronize()
    except RuntimeError as exc:
        return {"ok": False, "error": str(exc).splitlines()[0][:200]}
    try:
        replay, graphed = graph_of(torch, run), True
    except RuntimeError as exc:
        torch.cuda.synchronize()
        replay, graphed = run, False
        err = str(exc).splitlines()[0][:120]
    timing = device_time(torch, replay, min_s=0.03)
    row = {
        "ok": True,
        "graph": graphed,
        "s_per_call": timing["median_s"] / len(qs),
        "spread": timing["spread"],
        "reps": timing["reps"],
        "calls_per_replay": len(qs),
    }
    if not graphed:
        row["graph_error"] = err
    return row


def check_correct(
    torch: Any, backend: str, q: Any, k: Any, v: Any, *, gqa: bool, causal: bool
) -> float | None:
    """Relative error of one backend against float32 math with repeated heads (None if refused)."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    rep = q.shape[1] // k.shape[1]
    ref = sdpa(
        q.float(), k.float().repeat_interleave(rep, 1), v.float().repeat_interleave(rep, 1), is_causal=causal
    )
    try:
        with sdpa_context(backend):
            if gqa:
                out = sdpa(q, k, v, is_causal=causal, enable_gqa=True)
            else:
                out = sdpa(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), is_causal=causal)
    except RuntimeError:
        return None
    err = float((out.float() - ref).norm() / ref.norm())
    if not math.isfinite(err):
        raise RuntimeError(f"{backend}: non-finite attention output")
    return err


def decode_point(
    torch: Any, heads: tuple[int, int, int], batch: int, ctx: int, *, repeat: bool
) -> list[dict]:
    """All backends (and layouts) at one decode shape."""
    hq, hkv, hd = heads
    kv_bytes = 2 * batch * hkv * ctx * hd * 2
    copies = max(1, min(32, math.ceil(ROTATE_BYTES / kv_bytes)))
    qs = [torch.randn(batch, hq, 1, hd, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    kvs = [
        tuple(torch.randn(batch, hkv, ctx, hd, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        for _ in range(copies)
    ]
    base = {"hq": hq, "hkv": hkv, "head_dim": hd, "batch": batch, "ctx": ctx, "kv_bytes": kv_bytes}
    pick = default_choice(torch, qs[0], *kvs[0], causal=False, gqa=True)
    rows = []
    small = batch <= 8 and ctx <= 2048
    for backend in ("default", "flash", "efficient", "cudnn") + (("math",) if small else ()):
        row = time_backend(torch, backend, qs, kvs, gqa=True)
        rows.append({**base, "layout": "gqa", "backend": backend, "default_pick": pick, **row})
    if repeat and kv_bytes * hq // hkv <= MAX_KV_BYTES:
        rep = hq // hkv
        del kvs
        kvs = [
            tuple(torch.randn(batch, hq, ctx, hd, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            for _ in range(max(1, copies // rep))
        ]
        qs = qs[: len(kvs)]
        pick_r = default_choice(torch, qs[0], *kvs[0], causal=False, gqa=False)
        for backend in ("default", "flash", "efficient", "cudnn"):
            row = time_backend(torch, backend, qs, kvs, gqa=False)
            rows.append({**base, "layout": "repeat", "backend": backend, "default_pick": pick_r, **row})
    return rows


def decode_grid(torch: Any, *, budget_s: float, log: Any) -> dict[str, Any]:
    """The whole decode grid within budget_s; correctness of each backend checked once per head shape."""
    start, rows, checks = time.perf_counter(), [], []
    for heads in HEADS:
        q = torch.randn(4, heads[0], 1, heads[2], device="cuda", dtype=torch.bfloat16)
        k, v = (
            torch.randn(4, heads[1], 1000, heads[2], device="cuda", dtype=torch.bfloat16) for _ in range(2)
        )
        for backend in ("default", "flash", "efficient", "cudnn", "math"):
            for gqa in (True, False):
                err = check_correct(torch, backend, q, k, v, gqa=gqa, causal=False)
                checks.append({"heads": heads, "backend": backend, "gqa": gqa, "rel_err": err})
    for ctx in CONTEXTS:
        for heads in HEADS:
            for batch in BATCHES:
                if 2 * batch * heads[1] * ctx * heads[2] * 2 > MAX_KV_BYTES:
                    continue
                if time.perf_counter() - start > budget_s:
                    log(f"[attn] budget spent at ctx {ctx} {heads} b{batch}")
                    return {"rows": rows, "checks": checks, "complete": False}
                try:
                    rows += decode_point(torch, heads, batch, ctx, repeat=batch <= 64 and ctx <= 8192)
                except torch.OutOfMemoryError:
                    log(f"[attn] OOM at {heads} b{batch} ctx{ctx}")
                torch.cuda.empty_cache()
        log(f"[attn] ctx {ctx} done, {len(rows)} rows, {time.perf_counter() - start:.0f} s")
    return {"rows": rows, "checks": checks, "complete": True}


def prefill_grid(torch: Any, *, budget_s: float, log: Any) -> list[dict[str, Any]]:
    """Causal self-attention of one sequence (q_len = kv_len = L), GQA, per backend."""
    start, rows = time.perf_counter(), []
    for heads in ((32, 8, 128), (64, 8, 128), (16, 8, 128), (24, 4, 256), (8, 2, 256)):
        hq, hkv, hd = heads
        for length in (1024, 2048, 4096, 8192, 16384, 32768):
            if time.perf_counter() - start > budget_s:
                return rows
            q = torch.randn(1, hq, length, hd, device="cuda", dtype=torch.bfloat16)
            k, v = (torch.randn(1, hkv, length, hd, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            pick = default_choice(torch, q, k, v, causal=True, gqa=True)
            flops = 4 * hq * hd * length * length / 2  # QK^T and PV, causal half
            for backend in ("default", "flash", "efficient", "cudnn"):
                row = time_backend(torch, backend, [q], [(k, v)], gqa=True, causal=True)
                if row.get("ok"):
                    row["tflops"] = flops / row["s_per_call"] / 1e12
                rows.append(
                    {
                        "hq": hq,
                        "hkv": hkv,
                        "head_dim": hd,
                        "length": length,
                        "backend": backend,
                        "default_pick": pick,
                        **row,
                    }
                )
            del q, k, v
        log(f"[attn-prefill] {heads} done")
    return rows
