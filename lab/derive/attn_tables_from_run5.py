"""Per-kernel decode-attention tables for the H200 profile from run 5's SDPA-backend grid (CPU, no torch).

    python3 -m lab.derive.attn_tables_from_run5            # print what would change
X

Input: lab/runs/h200-run5/attn_decode.json (ref_attention.py on one H200, 2026-12-01; q_len 1, GQA
layout via enable_gqa, CUDA graph, event-timed median). Each accepted (`ok`) `gqa` row of backend `cudnn` /
`flash` becomes one AttentionRate: gb_per_s = kv_bytes (K + V read) / s_per_call / 1e9.
Kernel choice: attention_kernels.transformers[head_dim] = the backend torch's own SDPA dispatch picked for
that head_dim (`default_pick`, read by torch._fused_sdp_choice at run time; the most common pick per head_dim)
— transformers calls GQA SDPA without a mask in the reference harness, so it runs what torch picks.
Other engines (mindie, vllm) are left without a choice: they keep the single `attention_table`.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from calibration.profile_writer import profile_with_coefficients, write_if_asked
from planner import catalog
from planner.schema import AttentionRate, HardwareProfile

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "lab" / "runs" / "h200-run5" / "attn_decode.json"
PROFILE = ROOT / "hwprofiles" / "nvidia-h200.yaml"
KERNELS = ("cudnn", "flash")
NOTE = (
    "attention_tables (cudnn, flash) and attention_kernels from lab/runs/h200-run5/attn_decode.json "
    "by lab.derive.attn_tables_from_run5 (torch 2.11 SDPA default dispatch = cudnn for every decode shape)"
)


def rate(row: dict[str, object]) -> AttentionRate:
    """One measured row as a rate. Formula: gb_per_s = kv_bytes / s_per_call / 1e9 (K and V read once)."""
    return AttentionRate(
        batch=int(str(row["batch"])),
        kv_heads=int(str(row["hkv"])),
        head_dim=int(str(row["head_dim"])),
        ctx_tokens=int(str(row["ctx"])),
        gb_per_s=float(str(row["kv_bytes"])) / float(str(row["s_per_call"])) / 1e9,
    )


def tables(rows: list[dict[str, object]]) -> dict[str, list[AttentionRate]]:
    """Kernel name -> its accepted GQA-layout rows as rates."""
    ok = [r for r in rows if r["layout"] == "gqa" and r["ok"]]
    return {k: [rate(r) for r in ok if r["backend"] == k] for k in KERNELS}


def default_picks(rows: list[dict[str, object]]) -> dict[int, str]:
    """head_dim -> the backend torch's default SDPA dispatch chose most often at that head_dim."""
    picks: dict[int, Counter[str]] = {}
    for r in rows:
        if r["layout"] == "gqa" and r["backend"] == "default" and r["ok"]:
            picks.setdefault(int(str(r["head_dim"])), Counter())[str(r["default_pick"])] += 1
    return {d: c.most_common(1)[0][0] for d, c in sorted(picks.items())}


def updated_profile() -> tuple[str, HardwareProfile]:
    """(YAML text, validated profile) of the shipped H200 profile with the per-kernel tables set."""
    rows = json.loads(RAW.read_text(encoding="utf-8"))["rows"]
    hw = catalog.load_item(PROFILE, HardwareProfile, check_stem=False)
    assert hw.measured is not None, f"{PROFILE}: no measured block"
    updates = {"attention_tables": tables(rows), "attention_kernels": {"transformers": default_picks(rows)}}
    return profile_with_coefficients(PROFILE, hw.measured, updates, notes=(NOTE,))


def gdn_counts() -> list[str]:
    """Per model: median matmul calls and other kernels per GDN layer (batch >= 2) from gdn_*.json.

    Matmul calls = gemm-category kernels less cuBLAS split-K reduce helpers (one call launches both).
    """
    out = []
    for name in ("gdn_call2.json", "gdn_27b_call3.json"):
        for row in json.loads((RAW.parent / name).read_text(encoding="utf-8")):
            if row["impl"] != "resolved" or row["batch"] < 2:
                continue
            names = [k[0] for k in row["layer0_kernels"]]
            gemm = int(row["by_category_per_layer"]["gemm"]["n"])
            calls = gemm - sum("splitKreduce" in n for n in names)
            other = int(row["kernels_per_layer"]) - gemm
            out.append(f"{row['model']} b{row['batch']}: matmul calls {calls}, other kernels {other}")
    return out


def main() -> None:
    if "--gdn" in sys.argv:
        print("\n".join(gdn_counts()))
        return
    text, profile = updated_profile()
    assert profile.measured is not None
    coeff = profile.measured.coefficients
    sizes = {k: len(v) for k, v in (coeff.attention_tables or {}).items()}
    print(f"tables: {sizes}; kernels: {coeff.attention_kernels}")
    write_if_asked(PROFILE, text)


if __name__ == "__main__":
    main()
