"""Accuracy tables for lab/notebook.md (figures quoted in docs/accuracy.md) from the committed H200
end-to-end data (runs on CPU, no torch).

    python lab/accuracy/accuracy_table.py            # print the tables
    python lab/accuracy/accuracy_table.py --write    # replace the generated section of lab/notebook.md

Inputs: lab/runs/h200-e2e-decode.csv and h200-e2e-memory.json (from lab/harness/e2e_decode.py on the
device; its `engine` column is transformers, so predictions use the measured transformers kernel table) and
hwprofiles/nvidia-h200.yaml (its measured block from `kvplan calibrate` on the same device).
Those e2e points ran with FlashAttention forced, so they are predicted with the profile's kernel choice
removed (FLASH_HW: decode attention timed by the single `attention_table`, kvplan calibrate's flash
microbenchmark). Run 5 (lab/runs/h200-run5/: dense_decode.csv with torch's default SDPA dispatch,
variant_decode.csv's flash-forced rows, hybrid_decode.csv) is predicted from the shipped profile as is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lab.harness import ttft_pool  # noqa: E402
from planner import catalog, memory  # noqa: E402
from planner.deployment import Deployment  # noqa: E402
from planner.dtypes import StorageDType, weight_scheme  # noqa: E402
from planner.fit import solver  # noqa: E402
from planner.importers import benchpoints  # noqa: E402
from planner.perf import fitted_params, prefill, roofline  # noqa: E402
from planner.schema import HardwareProfile  # noqa: E402

DATA = ROOT / "lab" / "runs"
RUN5 = DATA / "h200-run5"


def _h200_with_kernels(kernels: dict[str, dict[int, str]] | None) -> HardwareProfile:
    """The shipped H200 profile with its measured attention_kernels replaced (None: single table)."""
    hw = catalog.load_card("nvidia-h200")
    assert hw.measured is not None
    coeff = hw.measured.coefficients.model_copy(update={"attention_kernels": kernels})
    return hw.model_copy(update={"measured": hw.measured.model_copy(update={"coefficients": coeff})})


FLASH_HW = _h200_with_kernels(None)  # flash-forced references: kvplan calibrate's flash attention_table
RUN5_FLASH_HW = _h200_with_kernels({"transformers": {128: "flash", 256: "flash"}})
BEGIN, END = "<!-- tables:begin -->", "<!-- tables:end -->"


def _stats(errors: list[float]) -> str:
    arr = np.abs(np.asarray(errors))
    return f"{arr.mean() * 100:.1f} % | {arr.max() * 100:.1f} %"


def per_model_summary(points: list, errors: list[float], title: str) -> list[str]:  # type: ignore[type-arg]
    lines = [f"**{title}**", "", "| model | points | MAPE | worst |", "|---|---:|---:|---:|"]
    models = list(dict.fromkeys(p.model for p in points))
    for model in models:
        errs = [e for p, e in zip(points, errors, strict=True) if p.model == model]
        lines.append(f"| {model} | {len(errs)} | {_stats(errs)} |")
    dense = [e for p, e in zip(points, errors, strict=True) if not catalog.load_model(p.model).is_moe]
    lines.append(f"| **dense models** | {len(dense)} | {_stats(dense)} |")
    lines.append(f"| **all** | {len(errors)} | {_stats(errors)} |")
    return [*lines, ""]


def per_point_table(points: list, columns: dict[str, list[float]]) -> list[str]:  # type: ignore[type-arg]
    names = list(columns)
    lines = [
        "| model | batch | ctx | measured ms | " + " | ".join(names) + " |",
        "|---|---:|---:|---:|" + "---:|" * len(names),
    ]
    for i, p in enumerate(points):
        cells = " | ".join(f"{columns[n][i] * 100:+.1f} %" for n in names)
        lines.append(f"| {p.model} | {p.batch} | {p.ctx_tokens} | {p.decode_step_s * 1e3:.2f} | {cells} |")
    return [*lines, ""]


def fit_transfer(points: list) -> tuple[list[str], dict[str, list[float]]]:  # type: ignore[type-arg]
    dense_models = [m for m in dict.fromkeys(p.model for p in points) if not catalog.load_model(m).is_moe]
    lines = [
        "| fitted on | set by the rows (MAP fit, planner/fit/solver.py) | "
        + " | ".join(f"{m} MAPE / worst" for m in dict.fromkeys(p.model for p in points))
        + " |",
        "|---|---|" + "---|" * len(set(p.model for p in points)),
    ]
    columns: dict[str, list[float]] = {}
    for train_model in dense_models:
        result = solver.fit_coefficients([p for p in points if p.model == train_model], hardware=FLASH_HW)
        c = result.coefficients
        errors = solver.prediction_errors(points, coefficients=c)
        columns[f"fit on {train_model}"] = errors
        cells = []
        for model in dict.fromkeys(p.model for p in points):
            errs = np.abs([e for p, e in zip(points, errors, strict=True) if p.model == model])
            mark = " (train)" if model == train_model else ""
            cells.append(f"{errs.mean() * 100:.1f} / {errs.max() * 100:.1f} %{mark}")
        coeff = (
            "; ".join(
                f"{param.name} {np.exp(u):.3g}"
                for param, u, d in zip(
                    fitted_params.FIT_PARAMS, result.log_values, result.decided_by_data, strict=True
                )
                if d
            )
            or "none (every term held by the profile)"
        )
        lines.append(f"| {train_model} | {coeff} | " + " | ".join(cells) + " |")
    return [*lines, ""], columns


def memory_table() -> list[str]:
    meta = json.loads((DATA / "h200-e2e-memory.json").read_text())
    points = benchpoints.read_bench_points(DATA / "h200-e2e-decode.csv")
    rows = {}
    import csv

    with open(DATA / "h200-e2e-decode.csv", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            rows.setdefault(row["model"], []).append(row)
    first_row = next(iter(rows.values()))[0]
    lines = [
        "| model | weights allocated | predicted | error | KV points | KV worst error (allocated) | "
        "KV worst error (cache tensors) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for m in meta["models"]:
        card = catalog.load_model(m["model"])
        predicted = memory.weight_bytes_per_device(
            card, scheme=weight_scheme("bf16"), activation_dtype=StorageDType.bf16, tp=1
        )
        per_token = memory.kv_cache_bytes_per_token(card, kv_dtype=StorageDType.bf16, tp=1)
        kv_alloc, kv_tensor = [], []
        for row in rows.get(m["model"], []):
            if row is first_row:
                continue  # its delta also holds cuBLAS's workspace, allocated at the run's first matmul
            want = per_token * int(row["batch"]) * int(row["ctx"])
            kv_alloc.append(int(row["kv_allocated_bytes"]) / want - 1)
            kv_tensor.append(int(row["kv_tensor_bytes"]) / want - 1)
        worst_alloc = max(kv_alloc, key=abs)
        worst_tensor = max(kv_tensor, key=abs)
        lines.append(
            f"| {m['model']} | {m['weights_allocated_bytes']:,} | {predicted:,} | "
            f"{(m['weights_allocated_bytes'] / predicted - 1) * 100:+.3f} % | {len(kv_alloc)} | "
            f"{worst_alloc * 100:+.3f} % | {worst_tensor * 100:+.4f} % |"
        )
    del points
    excess = int(first_row["kv_allocated_bytes"]) - int(first_row["kv_tensor_bytes"])
    lines.append("")
    lines.append(
        f"The run's first point ({first_row['model']}, batch {first_row['batch']}, ctx {first_row['ctx']}) "
        f"is left out of the KV-allocated column: its memory_allocated delta is {excess:,} B above its "
        "cache tensors, the cuBLAS workspace that the first matmul of the process allocates; the cache "
        "tensors themselves match the prediction exactly."
    )
    return [*lines, ""]


def _summary_row(label: str, points: list, errors: list[float]) -> str:  # type: ignore[type-arg]
    dense = [e for p, e in zip(points, errors, strict=True) if not catalog.load_model(p.model).is_moe]
    return f"| {label} | {_stats(dense)} | {_stats(errors)} |"


def repeatability() -> list[str]:
    """Run 3 (same day, fresh processes): a second e2e grid and a second, independent `kvplan calibrate`."""
    run1 = benchpoints.read_bench_points(DATA / "h200-e2e-decode.csv")
    run3 = benchpoints.read_bench_points(DATA / "h200-e2e-decode-run3.csv")
    first = {(p.model, p.batch, p.ctx_tokens): p.decode_step_s for p in run1}
    drift = np.array([p.decode_step_s / first[(p.model, p.batch, p.ctx_tokens)] - 1 for p in run3])
    profile = catalog.load_item(DATA / "h200-calibrated-run3.yaml", HardwareProfile, check_stem=False)
    assert profile.measured is not None
    again = profile.measured.coefficients
    lines = [
        f"End-to-end run 3 against run 1, {drift.size} points: mean {drift.mean() * 100:+.2f} %, "
        f"median {np.median(drift) * 100:+.2f} %, "
        f"range {drift.min() * 100:+.2f} % to {drift.max() * 100:+.2f} %.",
        "",
        "| calibration / e2e points | dense MAPE | dense worst | all MAPE | all worst |",
        "|---|---:|---:|---:|---:|",
        _summary_row(
            "committed profile / run 1",
            run1,
            solver.prediction_errors(run1, hardware=FLASH_HW, calibrated=True),
        ),
        _summary_row(
            "committed profile / run 3",
            run3,
            solver.prediction_errors(run3, hardware=FLASH_HW, calibrated=True),
        ),
        _summary_row("run-3 calibration / run 1", run1, solver.prediction_errors(run1, coefficients=again)),
        _summary_row("run-3 calibration / run 3", run3, solver.prediction_errors(run3, coefficients=again)),
    ]
    return [*lines, ""]


def _dense_and_moe(points: list, errors: list[float]) -> str:  # type: ignore[type-arg]
    is_moe = [catalog.load_model(p.model).is_moe for p in points]
    dense = [e for e, m in zip(errors, is_moe, strict=True) if not m]
    moe = [e for e, m in zip(errors, is_moe, strict=True) if m]
    return f"{_stats(dense)} | {_stats(moe)}"


def profile_history() -> list[str]:
    """The run-2 profile (before the grouped-GEMM benchmark) against the committed run-4 profile."""
    points = benchpoints.read_bench_points(DATA / "h200-e2e-decode.csv")
    run2 = catalog.load_item(DATA / "h200-calibrated-profile.yaml", HardwareProfile, check_stem=False)
    assert run2.measured is not None
    lines = [
        "| profile (e2e run 1 points) | moe.experts timed as | dense MAPE | dense worst | MoE MAPE | "
        "MoE worst |",
        "|---|---|---:|---:|---:|---:|",
        f"| run 2 (`data/h200-calibrated-profile.yaml`) | dense GEMV rate + matmul latency | "
        f"{_dense_and_moe(points, solver.prediction_errors(points, coefficients=run2.measured.coefficients))}"
        " |",
        f"| run 4, committed (`data/h200-microbench-x2.json`) | grouped-GEMM fit | "
        f"{_dense_and_moe(points, solver.prediction_errors(points, hardware=FLASH_HW, calibrated=True))} |",
    ]
    return [*lines, ""]


def tp_table() -> list[str]:
    """TP=2 end-to-end points (lab/harness/e2e_tp.py on two H200s) against the committed profile."""
    points = benchpoints.read_bench_points(DATA / "h200-e2e-decode-tp2-x2.csv")
    errors = solver.prediction_errors(points, hardware=FLASH_HW, calibrated=True)
    uncal = solver.prediction_errors(points, calibrated=False)
    lines = per_model_summary(points, errors, "tp = 2, calibrated by `kvplan calibrate` alone (run 4)")
    lines += per_point_table(points, {"microbench": errors, "datasheet": uncal})
    return lines


def _run5_points(name: str, backend: str | None = None) -> list:  # type: ignore[type-arg]
    """Bench points of one run-5 CSV, only the rows of `backend` (attn_backend column) when given."""
    import csv

    points = benchpoints.read_bench_points(RUN5 / name)
    with open(RUN5 / name, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [p for p, r in zip(points, rows, strict=True) if backend is None or r["attn_backend"] == backend]


def run5_tables() -> list[str]:
    """Held-out run-5 decode points against the shipped profile (microbenchmarks only, nothing fitted)."""
    dense = _run5_points("dense_decode.csv")
    flash = _run5_points("variant_decode.csv", "flash")
    hybrid = _run5_points("hybrid_decode.csv")
    dense_err = solver.prediction_errors(dense, calibrated=True)
    hybrid_err = solver.prediction_errors(hybrid, calibrated=True)
    flash_run5 = solver.prediction_errors(flash, hardware=RUN5_FLASH_HW, calibrated=True)
    flash_single = solver.prediction_errors(flash, hardware=FLASH_HW, calibrated=True)
    run1 = benchpoints.read_bench_points(DATA / "h200-e2e-decode.csv")
    run1_err = solver.prediction_errors(run1, hardware=RUN5_FLASH_HW, calibrated=True)
    out = per_model_summary(dense, dense_err, "dense_decode.csv: SDPA default dispatch (cuDNN), cudnn table")
    out += per_model_summary(hybrid, hybrid_err, "hybrid_decode.csv: Qwen3.5 GDN (fla) + full attention")
    out += per_model_summary(flash, flash_run5, "variant_decode.csv flash-forced rows, run-5 flash table")
    out += per_model_summary(flash, flash_single, "the same rows, kvplan calibrate's flash attention_table")
    out += per_model_summary(run1, run1_err, "h200-e2e-decode.csv (run 1, flash forced), run-5 flash table")
    out += ["#### Every run-5 point (error = predicted / measured - 1)", ""]
    out += per_point_table(dense, {"shipped profile": dense_err})
    out += per_point_table(hybrid, {"shipped profile": hybrid_err})
    return out


PREFILL_HYBRID = ("qwen3.5-27b", "qwen3.5-0.8b")
RUN6_TTFT = ("qwen3.5-0.8b",)  # host-bound at <= 8k: reference = run 6's pooled median (ACCURACY.md, run 6)


def _with_coefficients(hw: HardwareProfile, **update: object) -> HardwareProfile:
    assert hw.measured is not None
    coeff = hw.measured.coefficients.model_copy(update=update)
    return hw.model_copy(update={"measured": hw.measured.model_copy(update={"coefficients": coeff})})


def _prefill_deployment(model_id: str, prompt: int, hw: HardwareProfile) -> Deployment:
    """One request, the whole prompt in one pass, bf16, transformers (as ref_prefill.py ran it)."""
    card, alias = catalog.resolve_model(model_id)
    return Deployment(
        model=card,
        hardware=hw,
        weight_scheme_name="bf16",
        kv_dtype=StorageDType.bf16,
        tp=1,
        ctx_tokens=prompt,
        batch=1,
        model_alias=alias,
        engine="transformers",
        max_prefill_tokens=prompt,
    )


def _without_own_shape(hw: HardwareProfile, model_id: str) -> HardwareProfile:
    """The profile with the prefill layer rows of this model's own layer shapes removed."""
    assert hw.measured is not None and hw.measured.coefficients.prefill_layer_table
    geo = roofline.geometry(_prefill_deployment(model_id, 1024, hw))
    own = {round(prefill.layer_elements_per_token(geo, kind=k)) for k in ("attention", "linear_attention")}
    rows = [r for r in hw.measured.coefficients.prefill_layer_table if r.elements_per_token not in own]
    return _with_coefficients(hw, prefill_layer_table=rows)


def _prefill_row_errors(row: dict, hws: dict[str, HardwareProfile]) -> dict[str, float]:  # type: ignore[type-arg]
    out = {}
    for name, hw in hws.items():
        dep = _prefill_deployment(row["model"], row["prompt_tokens"], hw)
        out[name] = roofline.ttft_s(dep, prompt_tokens=row["prompt_tokens"]) / row["ttft_s"] - 1
    return out


def prefill_tables() -> list[str]:
    """Held-out TTFT (run 5 prefill.json; Qwen3.5-0.8B: run 6 pooled probes) against the shipped profile."""
    raw = json.loads((RUN5 / "prefill.json").read_text())
    shipped = catalog.load_card("nvidia-h200")
    before = _with_coefficients(
        shipped, gemm_efficiency_table=None, prefill_attention_table=None, prefill_layer_table=None
    )
    second = {(r["model"], r["prompt_tokens"]): r["ttft_s"] for r in raw["ttft_1rep_call4"]}
    pool = ttft_pool.pooled()  # run 6: the host-bound model re-measured, 7 processes on two machines
    rows = [{**r, "ttft_s": pool[(r["model"], r["prompt_tokens"])]["median_s"], "call3_s": r["ttft_s"]}
            if r["model"] in RUN6_TTFT else r for r in raw["ttft_3reps_call3"]]  # fmt: skip
    errs, lines = (
        [],
        [
            "| model | prompt | reference ms | predicted ms | error | error vs 2nd reading "
            "| own layer rows left out | before (no prefill tables) | run-5 call-3 reading (ms, error) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ],
    )
    for row in rows:
        model, prompt = row["model"], row["prompt_tokens"]
        hws = {"shipped": shipped, "loso": _without_own_shape(shipped, model), "before": before}
        e = _prefill_row_errors(row, hws)
        predicted = (1 + e["shipped"]) * row["ttft_s"]
        e["second"] = predicted / second[(model, prompt)] - 1
        errs.append((model, e))
        old = row.get("call3_s")
        lines.append(
            f"| {model} | {prompt} | {row['ttft_s'] * 1e3:.1f} | {predicted * 1e3:.1f} | "
            f"{e['shipped'] * 100:+.1f} % | {e['second'] * 100:+.1f} % | "
            f"{e['loso'] * 100:+.1f} % | {e['before'] * 100:+.1f} % | "
            + (f"{old * 1e3:.1f}, {(predicted / old - 1) * 100:+.1f} % |" if old else "(the reference) |")
        )
    return [*_prefill_summary(errs), "", *lines, ""]


def _prefill_summary(errs: list[tuple[str, dict[str, float]]]) -> list[str]:
    groups = {
        "dense (qwen3-8b, qwen3-32b)": [e for m, e in errs if m not in PREFILL_HYBRID],
        "hybrid (qwen3.5-27b, qwen3.5-0.8b)": [e for m, e in errs if m in PREFILL_HYBRID],
        "hybrid, qwen3.5-27b only": [e for m, e in errs if m == "qwen3.5-27b"],
        "all": [e for _, e in errs],
    }
    lines = [
        "| points | n | shipped MAPE / worst | vs 2nd reading | own layer rows left out | "
        "before (no prefill tables) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, group in groups.items():
        cells = " | ".join(
            _stats([g[k] for g in group]).replace(" | ", " / ")
            for k in ("shipped", "second", "loso", "before")
        )
        lines.append(f"| {label} | {len(group)} | {cells} |")
    return lines


def tables() -> str:
    points = benchpoints.read_bench_points(DATA / "h200-e2e-decode.csv")
    micro = solver.prediction_errors(points, hardware=FLASH_HW, calibrated=True)
    datasheet = solver.prediction_errors(points, calibrated=False)
    fit_lines, fit_columns = fit_transfer(points)
    out = ["### Run 5 (2026-12-01): held-out decode points, shipped profile, nothing fitted", ""]
    out += run5_tables()
    out += ["### Prefill (TTFT): held-out single requests, shipped profile, nothing fitted", ""]
    out += prefill_tables()
    out += ["### Decode step: microbenchmark-only calibration (hwprofiles/nvidia-h200.yaml `measured`)", ""]
    out += per_model_summary(points, micro, "calibrated by `kvplan calibrate` alone")
    out += per_model_summary(points, datasheet, "datasheet defaults (`--uncalibrated`), for comparison")
    out += ["### MoE: grouped-GEMM coefficients (run 4) against the run-2 profile", "", *profile_history()]
    out += ["### Tensor parallelism: tp = 2 on two H200s (NVLink, NCCL)", "", *tp_table()]
    out += ["### Decode step: `--from-bench` fit on one model, predicting the others", "", *fit_lines]
    out += ["### Repeatability: a second end-to-end run and an independent second calibration", ""]
    out += repeatability()
    out += ["### Memory: planner prediction vs torch.cuda.memory_allocated", "", *memory_table()]
    out += ["### Every point (error = predicted / measured - 1)", ""]
    out += per_point_table(points, {"microbench": micro, "datasheet": datasheet, **fit_columns})
    return "\n".join(out)


def main() -> None:
    text = tables()
    if "--write" not in sys.argv:
        print(text)
        return
    path = ROOT / "lab" / "notebook.md"
    doc = path.read_text(encoding="utf-8")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    main()
