"""Prefill cost of one decoder layer by kernel category (the layer's non-matmul remainder), on the device.

    python3 -m lab.harness.ref_prefill_layers --out DIR

For each model card and prompt length L: transformers' model at the card's geometry cut to a few layers
(dense: 1; Qwen3.5: 4 = three Gated DeltaNet layers + one full-attention layer), random bf16 weights, one
sequence. The exact inputs of each decoder layer are captured from one forward pass (forward pre-hooks),
then ONE layer is called alone: event-timed (eager, median) and profiled with torch.profiler, kernels
grouped by lab.harness.ref_common.kernel_category (gemm / attention / gdn / conv / norm_elementwise / copy).
Attention: GQA SDPA causal, torch's own dispatch (ref_common.register_attention "default"); GDN: what
transformers resolved (fla chunk kernels when importable, torch depthwise conv1d).

This is a per-layer microbenchmark (like ref_gdn.py for decode): it never runs the whole model, and the
end-to-end TTFTs of lab/runs/h200-run5/prefill.json stay held out.

lab/runs/h200-run5/prefill_layers.json (2026-12-01, one H200, torch 2.11 / transformers 5.17 /
fla 0.6.0) came from two calls of this same logic sent inline: call A (all models, fla not on the path: its
Qwen3.5 rows ran transformers' torch chunk rule and are kept apart as rows_torch_gdn) and call B (the Qwen3.5
models with the fla wheels). lab/derive/prefill_tables_from_run5.py turns the rows into prefill_layer_table.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from pathlib import Path
from typing import Any

from lab.harness.ref_common import (
    build_model,
    device_time,
    is_hybrid,
    load_card,
    profile_kernels,
    register_attention,
    summarise_kernels,
    versions,
)

MODELS = ("qwen3.5-27b", "qwen3-8b", "qwen3-32b", "qwen3.5-0.8b", "qwen3-0.6b", "llama-3.1-8b")
LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)


def layer_calls(torch: Any, model: Any, length: int, vocab: int) -> list[tuple[Any, tuple, dict]]:
    """(layer, args, kwargs) of every decoder layer, captured from one forward pass of `length` tokens."""
    captured: list[tuple[Any, tuple, dict]] = []

    def hook(module: Any, args: tuple, kwargs: dict) -> None:
        captured.append((module, args, dict(kwargs)))

    handles = [layer.register_forward_pre_hook(hook, with_kwargs=True) for layer in model.model.layers]
    ids = torch.randint(0, vocab, (1, length), device="cuda")
    try:
        with torch.no_grad():
            model(input_ids=ids, use_cache=False, logits_to_keep=1)
    finally:
        for handle in handles:
            handle.remove()
    return captured


def layer_kind(card: dict[str, Any], layer: Any) -> str:
    """full_attention / linear_attention for Qwen3.5 layers; dense for the others."""
    if not is_hybrid(card):
        return "dense"
    return "linear_attention" if hasattr(layer, "linear_attn") else "full_attention"


def measure_layer(torch: Any, call: tuple[Any, tuple, dict]) -> dict[str, Any]:
    """Eager time and kernel profile of one decoder layer call."""
    layer, args, kwargs = call

    def fwd() -> None:
        with torch.no_grad():
            layer(*args, **kwargs)

    t = device_time(torch, fwd, min_s=0.05, max_reps=20)
    kernels = profile_kernels(torch, fwd)
    prof = summarise_kernels(kernels)
    agg: dict[str, dict[str, Any]] = {}
    for k in kernels:
        a = agg.setdefault(k["name"], {"name": k["name"][:90], "cat": k["cat"], "n": 0, "us": 0.0})
        a["n"] += 1
        a["us"] += k["us"]
    prof["top"] = sorted(agg.values(), key=lambda a: -a["us"])[:12]
    return {"eager_s": t["median_s"], "spread": t["spread"], **prof}


def run_model(torch: Any, model_id: str, *, deadline: float, log: Any) -> list[dict[str, Any]]:
    """Every (layer kind, length) of one model until the deadline."""
    card = dict(load_card(model_id))
    card["num_hidden_layers"] = 4 if is_hybrid(card) else 1
    model = build_model(torch, card)
    rows = []
    for length in LENGTHS:
        if time.perf_counter() > deadline:
            log(f"[layers] deadline at {model_id} {length}")
            break
        try:
            calls = layer_calls(torch, model, length, card["vocab_size"])
            seen: set[str] = set()
            for call in calls:
                kind = layer_kind(card, call[0])
                if kind in seen:
                    continue
                seen.add(kind)
                row = {"model": model_id, "kind": kind, "tokens": length, **measure_layer(torch, call)}
                rows.append(row)
                cats = {c: round(v["us"]) for c, v in row["by_cat"].items()}
                log(f"  [layers] {model_id} {kind} L={length} eager {row['eager_s'] * 1e3:.2f} ms {cats}")
            del calls
        except torch.OutOfMemoryError:
            log(f"[layers] OOM {model_id} {length}")
            break
        torch.cuda.empty_cache()
    del model
    torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=300.0)
    args = parser.parse_args()
    import torch

    def log(msg: str) -> None:
        print(msg, flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    register_attention(torch, "default")
    result: dict[str, Any] = {"versions": versions(torch), "rows": [], "errors": {}}
    log(f"[layers] {result['versions']}")
    deadline = time.perf_counter() + args.budget_s
    for model_id in MODELS:
        try:
            result["rows"] += run_model(torch, model_id, deadline=deadline, log=log)
        except Exception as exc:
            result["errors"][model_id] = traceback.format_exc()[-2000:]
            log(f"[layers] {model_id} FAILED: {type(exc).__name__}: {str(exc)[:300]}")
        torch.cuda.empty_cache()
        (args.out / "prefill_layers.json").write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
