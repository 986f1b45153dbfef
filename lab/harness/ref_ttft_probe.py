"""Why two readings of one TTFT differ: single-request prefill timed with events, wall and host launch time.

    python -m lab.harness.ref_ttft_probe --out FILE [--models qwen3.5-0.8b] [--reps 15]
        [--pre none|decode|ttft8b] [--gc on|off] [--tag NAME]

Same path as lab.harness.ref_prefill.ttft (transformers' model built from the card, random bf16 weights,
use_cache=False, logits_to_keep=1, eager, GQA SDPA with torch's own dispatch, GDN chunk rule from whatever
transformers resolved: fla when importable). Per rep: host_s = time until model(...) returns (launches
queued), wall_s = until the end event has completed, device_s = CUDA events around the call; plus the SM clock
(NVML) before each rep. A host-speed index is taken in the same process: eager launches of a 1-element add_
(host launch cost per kernel) and a pure-Python loop. One profiled pass per point (after its timing; not with
--no-profile) gives the kernel count, the summed kernel time and how many kernels came from the GDN chunk path
(name contains "chunk"); later points of that process then run with the profiler's CUPTI attached.
--pre decode replays CUDA graphs of Qwen3.5-0.8B decode first (as run 5's call 3 did before its TTFTs);
--pre ttft8b times and profiles Qwen3-8B prefill first (call 3 and 4 did); --gc off disables Python's
garbage collector during timing.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

from lab.harness.ref_common import build_model, load_card, profile_kernels, register_attention, versions

LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)


def sm_clock_mhz() -> int | None:
    """Current SM clock from NVML (None when pynvml is absent)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM))
    except Exception:
        return None


def host_index(torch: Any) -> dict[str, float]:
    """Host speed in this process: us per eager 1-element add_ launch, and ns per pure-Python loop step."""
    x = torch.zeros(1, device="cuda")
    for _ in range(200):
        x.add_(1)
    torch.cuda.synchronize()
    n, t0 = 5000, time.perf_counter()
    for _ in range(n):
        x.add_(1)
    launch = (time.perf_counter() - t0) / n
    torch.cuda.synchronize()
    t0, acc = time.perf_counter(), 0
    for i in range(1_000_000):
        acc += i
    loop = (time.perf_counter() - t0) / 1_000_000
    return {"eager_launch_us": launch * 1e6, "python_loop_ns": loop * 1e9}


def time_point(torch: Any, fwd: Any, reps: int) -> dict[str, Any]:
    """Two warm-ups, then reps x (host, wall, device, sm clock)."""
    for _ in range(2):
        fwd()
    torch.cuda.synchronize()
    rows = []
    for _ in range(reps):
        clock = sm_clock_mhz()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        begin.record()
        fwd()
        host = time.perf_counter() - t0
        end.record()
        end.synchronize()
        wall = time.perf_counter() - t0
        device = begin.elapsed_time(end) / 1e3
        rows.append({"host_s": host, "wall_s": wall, "device_s": device, "sm_mhz": clock})
    out: dict[str, Any] = {"reps": rows}
    for key in ("host_s", "wall_s", "device_s"):
        vals = sorted(r[key] for r in rows)
        out[key] = {
            "median": statistics.median(vals),
            "min": vals[0],
            "max": vals[-1],
            "spread": (vals[-1] - vals[0]) / statistics.median(vals),
        }
    return out


def probe_model(
    torch: Any, model_id: str, *, reps: int, lengths: tuple[int, ...], profile: bool = True
) -> list[dict[str, Any]]:
    """Time and profile one model at each prompt length."""
    card = load_card(model_id)
    model = build_model(torch, card)
    rows = []
    for length in lengths:
        ids = torch.randint(0, card["vocab_size"], (1, length), device="cuda")

        def fwd(ids: Any = ids, model: Any = model) -> Any:
            with torch.no_grad():
                return model(input_ids=ids, use_cache=False, logits_to_keep=1).logits

        timing = time_point(torch, fwd, reps)
        kernels = profile_kernels(torch, fwd) if profile else []
        row = {
            "model": model_id,
            "prompt_tokens": length,
            **{k: v for k, v in timing.items() if k != "reps"},
            "samples": timing["reps"],
            "kernels": len(kernels),
            "kernel_sum_s": sum(k["us"] for k in kernels) / 1e6,
            "chunk_kernels": sum(1 for k in kernels if "chunk" in k["name"].lower()),
            "gdn_kernels": sum(1 for k in kernels if k["cat"] == "gdn"),
        }
        rows.append(row)
        print(
            f"[probe] {model_id} L={length:6d} wall {row['wall_s']['median'] * 1e3:8.2f} ms "
            f"(min {row['wall_s']['min'] * 1e3:.2f} max {row['wall_s']['max'] * 1e3:.2f}) host "
            f"{row['host_s']['median'] * 1e3:8.2f} dev {row['device_s']['median'] * 1e3:8.2f} "
            f"kernels {row['kernels']} ksum {row['kernel_sum_s'] * 1e3:.2f} chunk {row['chunk_kernels']}",
            flush=True,
        )
    del model
    torch.cuda.empty_cache()
    return rows


def pre_decode(torch: Any) -> None:
    """Qwen3.5-0.8B decode CUDA graphs at a few points (run 5 call 3 ran its hybrid part first)."""
    from lab.harness import ref_decode

    model = build_model(torch, load_card("qwen3.5-0.8b"))
    for batch, ctx in ((1, 512), (16, 8192), (64, 32768)):
        row = ref_decode.run_point(torch, model, batch=batch, ctx=ctx)
        print(f"[pre] decode b={batch} ctx={ctx} {row['device_step_s'] * 1e3:.3f} ms", flush=True)
    del model
    torch.cuda.empty_cache()


def main() -> None:
    """Run one scenario; write one JSON file."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default="qwen3.5-0.8b")
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--pre", default="none", choices=("none", "decode", "ttft8b"))
    parser.add_argument("--gc", default="on", choices=("on", "off"))
    parser.add_argument("--tag", default="")
    parser.add_argument("--no-profile", action="store_true", help="no profiled pass (CUPTI stays attached)")
    args = parser.parse_args()
    import torch

    register_attention(torch, "default")
    result: dict[str, Any] = {"tag": args.tag, "pre": args.pre, "gc": args.gc, "versions": versions(torch)}
    try:
        from lab.harness.ref_decode import gdn_impl

        result["gdn_impl"] = gdn_impl()
    except Exception as exc:
        result["gdn_impl"] = f"error {type(exc).__name__}: {exc}"[:300]
    result["host_index_start"] = host_index(torch)
    if args.pre == "decode":
        pre_decode(torch)
    elif args.pre == "ttft8b":
        result["pre_rows"] = probe_model(torch, "qwen3-8b", reps=3, lengths=(1024, 8192))
    if args.gc == "off":
        gc.collect()
        gc.disable()
    lengths = tuple(int(x) for x in args.lengths.split(","))
    models = args.models.split(",")
    profile = not args.no_profile
    result["profiled"] = profile
    result["rows"] = [
        r for m in models for r in probe_model(torch, m, reps=args.reps, lengths=lengths, profile=profile)
    ]
    gc.enable()
    result["host_index_end"] = host_index(torch)
    print(f"[probe] host index {result['host_index_start']} -> {result['host_index_end']}", flush=True)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
