"""Prefill compute tables for the H200 profile from run 5's microbenchmarks (CPU, no torch).

    python3 -m lab.derive.prefill_tables_from_run5            # print what would change
    python3 -m lab.derive.prefill_tables_from_run5 --write    # rewrite hwprofiles/nvidia-h200.yaml

Input: lab/runs/h200-run5/prefill.json, only its microbenchmark parts (ref_prefill.py /
ref_attention.py on one H200, 2026-12-01); its TTFT points are held out and never read here.
- gemm_call2: bf16 torch.matmul of every projection shape of the four models (and an 8192^3 square) at
  M = 1k..32k tokens, event-timed median. Each row -> GemmEfficiency(tokens=M, weight_elements=N*K,
  fraction = tflops / datasheet bf16 peak).
- attn_prefill_call2: causal GQA SDPA, one sequence, backend `default` (torch's own dispatch: cuDNN for every
  shape). Each accepted row -> PrefillAttentionRate(q_heads, head_dim, tokens=length, tflop_per_s), FLOP
  counted as 4 * hq * head_dim * length^2 / 2 (the planner's causal count).

and lab/runs/h200-run5/prefill_layers.json (lab/harness/ref_prefill_layers.py: ONE decoder layer of
each model at a time, torch.profiler kernel time by category): each row -> PrefillLayerCost(engine =
transformers, kind, tokens, us = the layer's kernel time outside GEMMs and attention, eager_us = the layer
call's event-timed wall, elements_per_token = planner.perf.prefill.layer_elements_per_token at tp=1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from calibration.profile_writer import profile_with_coefficients, write_if_asked
from planner import catalog
from planner.deployment import Deployment
from planner.dtypes import StorageDType
from planner.perf import prefill, roofline
from planner.schema import GemmEfficiency, HardwareProfile, PrefillAttentionRate, PrefillLayerCost

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "lab" / "runs" / "h200-run5" / "prefill.json"
LAYERS = ROOT / "lab" / "runs" / "h200-run5" / "prefill_layers.json"
LAYER_KINDS = {"dense": "attention", "full_attention": "attention", "linear_attention": "linear_attention"}
TIMED_ELSEWHERE = ("gemm", "attention")  # categories the GEMM and prefill attention tables time
PROFILE = ROOT / "hwprofiles" / "nvidia-h200.yaml"
NOTE = (
    "gemm_efficiency_table and prefill_attention_table from lab/runs/h200-run5/prefill.json "
    "(gemm_call2, attn_prefill_call2 default = cuDNN) by lab.derive.prefill_tables_from_run5"
)
LAYER_NOTE = (
    "prefill_layer_table (transformers eager, one decoder layer per model, non-GEMM non-attention kernels) "
    "from lab/runs/h200-run5/prefill_layers.json by lab.derive.prefill_tables_from_run5"
)


def gemm_table(rows: list[dict[str, Any]], *, peak_tflop_per_s: float) -> list[GemmEfficiency]:
    """Formula: fraction = min(1, tflops / peak_bf16) per measured (M, N*K); untimed `dup` rows skipped."""
    return [
        GemmEfficiency(
            tokens=int(r["M"]),
            weight_elements=float(r["N"]) * float(r["K"]),
            fraction=round(min(1.0, float(r["tflops"]) / peak_tflop_per_s), 5),
        )
        for r in rows
        if "tflops" in r  # rows marked `dup` repeat a shape timed under another projection's name
    ]


def attention_table(rows: list[dict[str, Any]]) -> list[PrefillAttentionRate]:
    """The accepted `default`-backend rows as rates (TFLOP/s as measured)."""
    return [
        PrefillAttentionRate(
            q_heads=int(r["hq"]),
            head_dim=int(r["head_dim"]),
            tokens=int(r["length"]),
            tflop_per_s=round(float(r["tflops"]), 2),
        )
        for r in rows
        if r["backend"] == "default" and r.get("ok")
    ]


def layer_elements(model_id: str, kind: str, hw: HardwareProfile) -> int:
    """planner.perf.prefill.layer_elements_per_token of one layer of `kind` of the model (tp=1, bf16)."""
    card, _ = catalog.resolve_model(model_id)
    dep = Deployment(
        model=card, hardware=hw, weight_scheme_name="bf16", kv_dtype=StorageDType("bf16"), tp=1, ctx_tokens=1
    )
    return round(prefill.layer_elements_per_token(roofline.geometry(dep), kind=kind))


def layer_table(rows: list[dict[str, Any]], *, hw: HardwareProfile) -> list[PrefillLayerCost]:
    """Formula: us = total kernel us of the layer - its GEMM and attention kernel us (per row)."""
    out = []
    for r in rows:
        kind = LAYER_KINDS[r["kind"]]
        timed = sum(r["by_cat"].get(cat, {}).get("us", 0.0) for cat in TIMED_ELSEWHERE)
        out.append(
            PrefillLayerCost(
                engine="transformers",
                kind=kind,  # type: ignore[arg-type]
                elements_per_token=layer_elements(r["model"], kind, hw),
                tokens=int(r["tokens"]),
                us=round(float(r["total_us"]) - timed, 1),
                eager_us=round(float(r["eager_s"]) * 1e6, 1),
            )
        )
    return out


def updated_profile() -> tuple[str, HardwareProfile]:
    """(YAML text, validated profile) of the shipped H200 profile with the prefill tables set."""
    raw = json.loads(RAW.read_text(encoding="utf-8"))
    hw = catalog.load_item(PROFILE, HardwareProfile, check_stem=False)
    assert hw.measured is not None, f"{PROFILE}: no measured block"
    gemm = gemm_table(raw["gemm_call2"], peak_tflop_per_s=hw.peak_tflop_per_s["bf16"])
    attention = attention_table(raw["attn_prefill_call2"])
    layers = layer_table(json.loads(LAYERS.read_text(encoding="utf-8"))["rows"], hw=hw)
    updates = {
        "gemm_efficiency_table": gemm,
        "prefill_attention_table": attention,
        "prefill_layer_table": layers,
    }
    return profile_with_coefficients(PROFILE, hw.measured, updates, notes=(NOTE, LAYER_NOTE))


def main() -> None:
    text, profile = updated_profile()
    assert profile.measured is not None
    coeff = profile.measured.coefficients
    print(
        f"gemm rows: {len(coeff.gemm_efficiency_table or [])}; "
        f"prefill attention rows: {len(coeff.prefill_attention_table or [])}; "
        f"prefill layer rows: {len(coeff.prefill_layer_table or [])}"
    )
    write_if_asked(PROFILE, text)


if __name__ == "__main__":
    main()
