"""Single-request prefill (TTFT) reference, prefill GEMM shape efficiency, and a per-layer prefill breakdown.

TTFT: one sequence of L prompt tokens through transformers' model (random weights, bf16), use_cache=False,
logits_to_keep=1 (last-token logits only, as engines do), eager (no graph: launches overlap with long
kernels), event-timed, median of a few after one warm-up. Attention: SDPA enable_gqa causal, torch's own
dispatch (the registered ATTN_NAME with backend "default"); GDN layers through what transformers resolved
(fla chunk kernels when importable).

GEMM table: x[M, K] @ W[K, N] bf16 for each projection of each model at tp=1, M = 1k .. 32k tokens.
Breakdown: torch.profiler over one prefill pass, kernels grouped by category (gemm / attention / gdn / conv /
norm_elementwise / copy / other), totals and per layer.
"""

from __future__ import annotations

import time
from typing import Any

from lab.harness.ref_common import (
    build_model,
    device_time,
    is_hybrid,
    load_card,
    profile_kernels,
    summarise_kernels,
)

LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)


def projections(card: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """(K, N) of each prefill matmul of one layer at tp=1 (plus the lm_head on one row is not a GEMM)."""
    h, hd = card["hidden_size"], card["head_dim"]
    hq, hkv, inter = card["num_attention_heads"], card["num_key_value_heads"], card["intermediate_size"]
    gate = 2 if is_hybrid(card) else 1  # Qwen3.5 full attention: q_proj also emits the output gate
    out = {
        "qkv": (h, (gate * hq + 2 * hkv) * hd),
        "o": (hq * hd, h),
        "gate_up": (h, 2 * inter),
        "down": (inter, h),
    }
    if is_hybrid(card):
        kd = card["linear_num_key_heads"] * card["linear_key_head_dim"]
        vd = card["linear_num_value_heads"] * card["linear_value_head_dim"]
        out["gdn_in_qkv"] = (h, 2 * kd + vd)
        out["gdn_in_z"] = (h, vd)
        out["gdn_out"] = (vd, h)
    return out


def gemm_table(torch: Any, models: list[str], *, budget_s: float, log: Any) -> list[dict[str, Any]]:
    """Achieved TFLOP/s of each projection at each M (x @ W.T as nn.Linear does)."""
    start, rows, seen = time.perf_counter(), [], set()
    for model_id in models:
        for name, (k, n) in projections(load_card(model_id)).items():
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
            for m in LENGTHS:
                if (m, k, n) in seen:
                    rows.append({"model": model_id, "proj": name, "M": m, "K": k, "N": n, "dup": True})
                    continue
                if time.perf_counter() - start > budget_s:
                    return rows
                seen.add((m, k, n))
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                t = device_time(
                    torch, lambda x=x, w=w: torch.nn.functional.linear(x, w), min_s=0.02, max_reps=50
                )
                rows.append(
                    {
                        "model": model_id,
                        "proj": name,
                        "M": m,
                        "K": k,
                        "N": n,
                        "s": t["median_s"],
                        "tflops": 2 * m * k * n / t["median_s"] / 1e12,
                        "spread": t["spread"],
                    }
                )
                del x
        log(f"[gemm] {model_id} done ({len(rows)} rows)")
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t = device_time(torch, lambda: x @ x, min_s=0.05)
    rows.append(
        {
            "model": "square",
            "proj": "8192^3",
            "M": 8192,
            "K": 8192,
            "N": 8192,
            "s": t["median_s"],
            "tflops": 2 * 8192**3 / t["median_s"] / 1e12,
        }
    )
    return rows


def ttft(
    torch: Any, models: list[str], *, budget_s: float, log: Any, breakdown_len: int = 8192, reps: int = 3
) -> dict[str, Any]:
    """TTFT per model x prompt length, plus one profiled pass per model at breakdown_len."""
    start, rows, breakdowns = time.perf_counter(), [], []
    for model_id in models:
        card = load_card(model_id)
        model = build_model(torch, card)
        torch.cuda.reset_peak_memory_stats()
        vocab = card["vocab_size"]
        for length in LENGTHS:
            if time.perf_counter() - start > budget_s:
                log(f"[ttft] budget spent at {model_id} {length}")
                break
            ids = torch.randint(0, vocab, (1, length), device="cuda")
            out: dict[str, Any] = {}

            def fwd(ids: Any = ids, out: dict[str, Any] = out, model: Any = model) -> None:
                with torch.no_grad():
                    out["logits"] = model(input_ids=ids, use_cache=False, logits_to_keep=1).logits

            try:
                t = device_time(torch, fwd, min_s=0.0, max_reps=reps)
            except torch.OutOfMemoryError:
                log(f"[ttft] OOM {model_id} {length}")
                break
            logits = out["logits"]
            rows.append(
                {
                    "model": model_id,
                    "prompt_tokens": length,
                    "ttft_s": t["median_s"],
                    "min_s": t["min_s"],
                    "reps": t["reps"],
                    "logits_shape": list(logits.shape),
                    "finite": bool(torch.isfinite(logits).all()),
                    "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
                }
            )
            log(
                f"  [ttft] {model_id} L={length:6d} {t['median_s'] * 1e3:9.2f} ms finite={rows[-1]['finite']}"
            )
            if breakdown_len in (length, 0):
                kernels = profile_kernels(torch, fwd)
                prof = summarise_kernels(kernels)
                prof["top"] = top_kernels(kernels)
                breakdowns.append(
                    {"model": model_id, "prompt_tokens": length, "layers": card["num_hidden_layers"], **prof}
                )
            torch.cuda.reset_peak_memory_stats()
        fwd = out = logits = None  # drop every reference to the model before the next one is built
        del model
        torch.cuda.empty_cache()
    return {"rows": rows, "breakdowns": breakdowns}


def top_kernels(rows: list[dict[str, Any]], n: int = 25) -> list[dict[str, Any]]:
    """The n kernel names with the most device time, aggregated over calls (for auditing the categories)."""
    agg: dict[str, dict[str, Any]] = {}
    for r in rows:
        a = agg.setdefault(r["name"], {"name": r["name"], "cat": r["cat"], "n": 0, "us": 0.0})
        a["n"] += 1
        a["us"] += r["us"]
    return sorted(agg.values(), key=lambda a: -a["us"])[:n]
