"""Run-5 H200 reference driver: decode attention per backend, dense + hybrid decode, GDN per layer, prefill.

    python -m lab.harness.ref_run5 --out DIR [--parts attn,dense,variants,attn_prefill,gemm,hybrid,gdn,ttft]
                                    [--smoke]

Each part writes its own file under --out as soon as it finishes (attn_decode.json, dense_decode.csv,
hybrid_decode.csv, gdn.json, prefill.json, meta.json) and a failure in one part is recorded in meta.json
without stopping the others. --smoke shrinks every grid to a couple of points (a harness check).
See lab/runs/h200-run5/README.md for what was run.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
import traceback
from pathlib import Path
from typing import Any

from lab.harness import ref_common

DENSE = ("qwen3-0.6b", "qwen3-8b", "qwen3-32b")
HYBRID = ("qwen3.5-0.8b", "qwen3.5-27b")


def log(msg: str) -> None:
    """Print with flush (the device tool returns the tail of stdout)."""
    print(msg, flush=True)


def dense_points(smoke: bool) -> list[tuple[int, int]]:
    """(batch, ctx): the 5 x 3 grid of the earlier runs plus 16k / 32k at batch 1, 8, 32."""
    if smoke:
        return [(1, 512), (32, 2048)]
    grid = [(b, c) for c in (512, 2048, 8192) for b in (1, 8, 32, 64, 128)]
    return grid + [(b, c) for c in (16384, 32768) for b in (1, 8, 32)]


def hybrid_points(smoke: bool) -> list[tuple[int, int]]:
    """(batch, ctx) for the Qwen3.5-shaped models."""
    if smoke:
        return [(1, 512), (16, 8192)]
    return [(b, c) for c in (512, 2048, 8192, 32768) for b in (1, 4, 16, 32, 64)]


def write_json(path: Path, obj: Any) -> None:
    """JSON with a tmp-then-rename write."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str), encoding="utf-8")
    tmp.replace(path)


def part_decode(
    torch: Any, out: Path, name: str, jobs: list[tuple[str, list, str, float]], meta: dict
) -> None:
    """Run e2e decode jobs (model, points, backend, budget) into out/<name>.csv."""
    from lab.harness import ref_decode

    with open(out / f"{name}.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=ref_decode.CSV_FIELDS)
        writer.writeheader()
        for model_id, points, backend, budget in jobs:
            ref_common.register_attention(torch, "default" if backend == "hf_sdpa" else backend)
            try:
                info = ref_decode.run_model(
                    torch,
                    model_id,
                    points,
                    backend=backend,
                    budget_s=budget,
                    writer=writer,
                    log=log,
                    attn_pick="",
                )
            except Exception as exc:
                info = {"model": model_id, "backend": backend, "error": traceback.format_exc()[-1500:]}
                log(f"[decode] {model_id} {backend} failed: {type(exc).__name__}: {str(exc)[:300]}")
                torch.cuda.empty_cache()
            meta.setdefault(name, []).append(info)
            handle.flush()


PREFILL_MODELS = ("qwen3-8b", "qwen3.5-0.8b", "qwen3.5-27b", "qwen3-32b")


def part_attn(torch: Any, out: Path, smoke: bool, meta: dict, part: str) -> None:
    """Decode attention over every SDPA backend."""
    from lab.harness import ref_attention as ra

    if smoke:
        ra.HEADS, ra.BATCHES, ra.CONTEXTS = ra.HEADS[:1] + ra.HEADS[3:4], (1, 64), (512, 8192)
    budget = 45.0 if smoke else 190.0
    write_json(out / "attn_decode.json", ra.decode_grid(torch, budget_s=budget, log=log))


def part_attn_prefill(torch: Any, out: Path, smoke: bool, meta: dict, part: str) -> None:
    """Causal prefill attention per backend."""
    from lab.harness import ref_attention as ra

    meta["attn_prefill"] = ra.prefill_grid(torch, budget_s=14.0 if smoke else 65.0, log=log)


def part_gemm(torch: Any, out: Path, smoke: bool, meta: dict, part: str) -> None:
    """Prefill GEMM shape-efficiency table."""
    from lab.harness import ref_prefill as rp

    models = list(DENSE[1:] + HYBRID)
    meta["gemm"] = rp.gemm_table(
        torch, models[:1] if smoke else models, budget_s=11.0 if smoke else 45.0, log=log
    )


def part_dense(torch: Any, out: Path, smoke: bool, meta: dict, part: str) -> None:
    """Dense Qwen3 decode, SDPA default dispatch."""
    jobs = [(m, dense_points(smoke), "default", 21.0 if smoke else 85.0) for m in DENSE]
    part_decode(torch, out, "dense_decode", jobs, meta)


def part_variants(torch: Any, out: Path, smoke: bool, meta: dict, part: str) -> None:
    """The same decode with FlashAttention forced, and with transformers' native sdpa (mask + repeat_kv)."""
    corner = [(b, c) for c in (2048, 8192) for b in (1, 32, 64, 128)]
    small = [(b, c) for c in (512, 2048, 8192) for b in (1, 8, 32, 64)]
    budget = 11.0 if smoke else 45.0
    jobs = [
        ("qwen3-8b", corner[:2] if smoke else corner, "flash", budget),
        ("qwen3-32b", corner[:2] if smoke else corner, "flash", budget),
        ("qwen3-8b", small[:2] if smoke else small, "hf_sdpa", budget),
    ]
    part_decode(torch, out, "variant_decode", jobs, meta)


def part_hybrid(torch: Any, out: Path, smoke: bool, meta: dict, part: str) -> None:
    """Qwen3.5-shaped hybrid decode."""
    jobs = [(m, hybrid_points(smoke), "default", 36.5 if smoke else 130.0) for m in HYBRID]
    part_decode(torch, out, "hybrid_decode", jobs, meta)


def part_gdn(torch: Any, out: Path, smoke: bool, meta: dict, part: str) -> None:
    """GDN decode per layer ("gdn": both hybrid models; "gdn_big": the 27B shape only)."""
    from lab.harness import ref_gdn

    if smoke:
        ref_gdn.BATCHES = (1, 64)
    models = list(HYBRID) if part == "gdn" else list(HYBRID[1:])
    write_json(out / f"{part}.json", ref_gdn.run(torch, models, budget_s=20.5 if smoke else 80.0, log=log))


def part_ttft(torch: Any, out: Path, smoke: bool, meta: dict, part: str) -> None:
    """TTFT ("ttft": 3 reps, kernel breakdown at 8k; "ttft_prof": 1 rep, breakdown at every length)."""
    from lab.harness import ref_prefill as rp

    if smoke:
        rp.LENGTHS = (1024, 8192)
    models = list(PREFILL_MODELS[:2] if smoke else PREFILL_MODELS)
    if part == "ttft":
        res = rp.ttft(torch, models, budget_s=47.0 if smoke else 200.0, log=log)
        meta["ttft"], meta["prefill_breakdown"] = res["rows"], res["breakdowns"]
    else:
        res = rp.ttft(torch, models, budget_s=200.0, log=log, breakdown_len=0, reps=1)
        meta["ttft_prof"], meta["prefill_breakdown_all"] = res["rows"], res["breakdowns"]


PARTS = {
    "attn": part_attn,
    "attn_prefill": part_attn_prefill,
    "gemm": part_gemm,
    "dense": part_dense,
    "variants": part_variants,
    "hybrid": part_hybrid,
    "gdn": part_gdn,
    "gdn_big": part_gdn,
    "ttft": part_ttft,
    "ttft_prof": part_ttft,
}


def run_part(torch: Any, part: str, out: Path, smoke: bool, meta: dict) -> None:
    """One named part (budgets in seconds are those of run 5; --smoke uses about a seventh)."""
    if part not in PARTS:
        raise SystemExit(f"--parts: unknown part {part!r} (known: {', '.join(PARTS)})")
    PARTS[part](torch, out, smoke, meta, part)


def summary(meta: dict, out: Path) -> None:
    """The short table printed last."""
    log("=== summary ===")
    for key, val in meta.get("part_s", {}).items():
        log(f"part {key}: {val}")
    path = out / "attn_decode.json"
    if path.exists():
        rows = json.loads(path.read_text())["rows"]
        index = {
            (r["hq"], r["hkv"], r["head_dim"], r["batch"], r["ctx"], r["layout"], r["backend"]): r
            for r in rows
        }
        log("decode attn (gqa) us: hq/hkv/d b ctx | default(pick) flash efficient cudnn")
        for (hq, hkv, hd, b, c, lay, be), r in sorted(index.items()):
            if lay != "gqa" or be != "default" or b not in (1, 32, 128) or c not in (2048, 8192, 32768):
                continue
            cells = []
            for name in ("default", "flash", "efficient", "cudnn"):
                x = index.get((hq, hkv, hd, b, c, "gqa", name), {})
                cells.append(f"{x['s_per_call'] * 1e6:8.1f}" if x.get("ok") else "     n/a")
            log(f"{hq}/{hkv}/{hd} b{b} ctx{c} | {cells[0]}({r['default_pick']}) {' '.join(cells[1:])}")
    for row in meta.get("ttft", []):
        log(f"ttft {row['model']} L={row['prompt_tokens']} {row['ttft_s'] * 1e3:.1f} ms")


def main() -> None:
    """Parse args, run the parts in order, write meta.json after each."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--parts", default="attn,dense,variants,attn_prefill,gemm,hybrid,gdn,ttft")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    ref_common.register_attention(torch, "default")
    meta: dict[str, Any] = {
        "versions": ref_common.versions(torch),
        "smoke": args.smoke,
        "parts": args.parts,
        "part_s": {},
        "errors": {},
    }
    try:
        from lab.harness.ref_decode import gdn_impl

        meta["versions"]["gdn_impl"] = gdn_impl()
    except Exception as exc:
        meta["versions"]["gdn_impl"] = f"error {type(exc).__name__}: {exc}"[:300]
    log(f"[run5] {meta['versions']}")
    for part in args.parts.split(","):
        t0 = time.perf_counter()
        try:
            run_part(torch, part, args.out, args.smoke, meta)
        except Exception as exc:
            meta["errors"][part] = traceback.format_exc()[-3000:]
            log(f"[run5] part {part} FAILED: {type(exc).__name__}: {str(exc)[:400]}")
        meta["part_s"][part] = round(time.perf_counter() - t0, 1)
        log(f"[run5] part {part} took {meta['part_s'][part]} s")
        torch.cuda.empty_cache()
        write_json(args.out / "meta.json", meta)
    summary(meta, args.out)


if __name__ == "__main__":
    main()
