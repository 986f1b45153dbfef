"""Where a batch-1 decode step's time goes: kernel time by category and the gaps between kernels.

    python -m lab.harness.ref_decode_gaps --out FILE [--models qwen3-0.6b,qwen3-8b,qwen3.5-0.8b]
        [--points 1x2048,8x2048]

The run-5 decode step (lab.harness.ref_decode.Step: transformers' modules, StaticCache, SDPA default dispatch,
CUDA graph) replayed under torch.profiler: every kernel of one replay with its device time, grouped by
category (lab.harness.ref_common.kernel_category); gap = graph replay time (events, median) - summed kernel
time. A diagnostic of the end-to-end harness, not a microbenchmark: nothing in a profile is set from it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lab.harness import ref_decode
from lab.harness.ref_common import (
    build_model,
    device_time,
    graph_of,
    load_card,
    profile_kernels,
    register_attention,
    summarise_kernels,
    versions,
)


def gap_point(torch: Any, model: Any, *, batch: int, ctx: int) -> dict[str, Any]:
    """Graph time, kernels and gaps of one decode step."""
    cache = ref_decode.cache_for(model.config, ctx)
    step = ref_decode.Step(torch, model, cache, batch=batch, ctx=ctx)
    with torch.no_grad():
        step()
        torch.cuda.synchronize()
        _, _, step.counters = ref_decode.cache_parts(cache)
        replay = graph_of(torch, step)
        timing = device_time(torch, replay, min_s=0.25, max_reps=100)
        kernels = profile_kernels(torch, replay)
    prof = summarise_kernels(kernels)
    small = [k for k in kernels if k["cat"] not in ("gemm", "attention", "gdn")]
    return {
        "batch": batch,
        "ctx": ctx,
        "graph_s": timing["median_s"],
        "spread": timing["spread"],
        "kernels": prof["kernels"],
        "kernel_sum_s": prof["total_us"] / 1e6,
        "gap_s": timing["median_s"] - prof["total_us"] / 1e6,
        "by_cat": prof["by_cat"],
        "small_kernels": len(small),
        "small_kernel_mean_us": sum(k["us"] for k in small) / max(1, len(small)),
        "first_layer": [(k["name"][:70], k["cat"], round(k["us"], 2)) for k in kernels[:80]],
    }


def main() -> None:
    """Profile each model's points; write one JSON file."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default="qwen3-0.6b,qwen3-8b,qwen3.5-0.8b")
    parser.add_argument("--points", default="1x2048,8x2048")
    args = parser.parse_args()
    import torch

    register_attention(torch, "default")
    result: dict[str, Any] = {"versions": versions(torch), "rows": []}
    points = [tuple(int(v) for v in p.split("x")) for p in args.points.split(",")]
    for model_id in args.models.split(","):
        model = build_model(torch, load_card(model_id))
        for batch, ctx in points:
            row = {"model": model_id, **gap_point(torch, model, batch=batch, ctx=ctx)}
            result["rows"].append(row)
            print(
                f"[gaps] {model_id} b={batch} ctx={ctx}: graph {row['graph_s'] * 1e3:.3f} ms, kernels "
                f"{row['kernels']} sum {row['kernel_sum_s'] * 1e3:.3f} ms, gap {row['gap_s'] * 1e3:.3f} ms; "
                f"small {row['small_kernels']} x {row['small_kernel_mean_us']:.2f} us; "
                + ", ".join(f"{c} {v['n']}/{v['us'] / 1e3:.2f}ms" for c, v in row["by_cat"].items()),
                flush=True,
            )
        del model
        torch.cuda.empty_cache()
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
