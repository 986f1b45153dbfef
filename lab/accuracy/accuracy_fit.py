"""Leave-one-model-out accuracy of `kvplan calibrate --from-bench` (planner/fit/solver.py), and the seed
solver.

    python lab/accuracy/accuracy_fit.py            # print the tables (ACCURACY.md, "Fit transfer")

For every H200 end-to-end reference set: fit on one model's points (the shipped profile's measured values as
priors), predict every other model of the family, report MAPE / worst per held-out model. Then the seed's
Ascend 950PR Qwen3-27B FP8 MindIE numbers: fit on concurrency 1, 8, 32, predict 128 (per-user decode rate and
output tok/s), from both the step-row transcription and the serving-row one. CPU only, about a minute.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from planner import catalog  # noqa: E402
from planner.fit import serving_rows, solver  # noqa: E402
from planner.importers.benchpoints import read_bench_points, read_bench_rows  # noqa: E402
from planner.perf import fitted_params  # noqa: E402
from planner.schema import HardwareProfile  # noqa: E402

DATA = ROOT / "lab" / "runs"
EXAMPLES = ROOT / "docs" / "examples"


def _h200(kernels: dict[str, dict[int, str]] | None, *, keep: bool) -> HardwareProfile:
    """The shipped H200 profile; keep=False replaces its attention_kernels (None: the single flash table)."""
    hw = catalog.load_card("nvidia-h200")
    if keep or hw.measured is None:
        return hw
    coeff = hw.measured.coefficients.model_copy(update={"attention_kernels": kernels})
    return hw.model_copy(update={"measured": hw.measured.model_copy(update={"coefficients": coeff})})


SETS = (
    ("run 5, SDPA default dispatch", DATA / "h200-run5" / "dense_decode.csv", _h200(None, keep=True)),
    ("run 1, FlashAttention forced", DATA / "h200-e2e-decode.csv", _h200(None, keep=False)),
    ("run 3, FlashAttention forced", DATA / "h200-e2e-decode-run3.csv", _h200(None, keep=False)),
)


def _dense(points: list) -> list:  # type: ignore[type-arg]
    return [p for p in points if not catalog.resolve_model(p.model)[0].is_moe]


def _stats(errors: list[float]) -> str:
    arr = np.abs(np.asarray(errors)) * 100
    return f"{arr.mean():.1f} / {arr.max():.1f} %"


def lomo(title: str, path: Path, hw: HardwareProfile) -> tuple[list[str], list[float]]:
    """One table: rows = the model fitted on, columns = every model predicted (MAPE / worst)."""
    points = _dense(read_bench_points(path))
    models = list(dict.fromkeys(p.model for p in points))
    base = solver.prediction_errors(points, hardware=hw)
    lines = [
        f"**{title}** (`{path.relative_to(ROOT)}`, {len(points)} dense points)",
        "",
        "| fitted on | " + " | ".join(models) + " | held-out MAPE |",
        "|---|" + "---:|" * (len(models) + 1),
        "| (none: shipped profile) | "
        + " | ".join(_stats([e for p, e in zip(points, base, strict=True) if p.model == m]) for m in models)
        + f" | {np.mean(np.abs(base)) * 100:.1f} % |",
    ]
    held_all: list[float] = []
    for train in models:
        result = solver.fit_coefficients([p for p in points if p.model == train], hardware=hw)
        errors = solver.prediction_errors(points, hardware=hw, coefficients=result.coefficients)
        held = [e for p, e in zip(points, errors, strict=True) if p.model != train]
        held_all += held
        cells = [
            _stats([e for p, e in zip(points, errors, strict=True) if p.model == m])
            + (" (fit)" if m == train else "")
            for m in models
        ]
        lines.append(f"| {train} | " + " | ".join(cells) + f" | {np.mean(np.abs(held)) * 100:.1f} % |")
    return [*lines, ""], held_all


def _fitted_terms(result: solver.FitResult) -> str:
    parts = []
    for param, u, sigma, decided in zip(
        fitted_params.FIT_PARAMS, result.log_values, result.sigma_log, result.decided_by_data, strict=True
    ):
        if decided:
            parts.append(f"{param.name} {np.exp(u):.3g} (x/ {np.exp(sigma):.2f})")
    return "; ".join(parts) or "none (all held by the prior)"


def seed_steps() -> list[str]:
    """Step-row transcription: per-user tok/s at batch 1, 8, 32 (ctx 384) -> batch 128."""
    points = read_bench_points(EXAMPLES / "seed-950pr-qwen3-27b.csv")
    hw = catalog.load_card("ascend-950pr")
    train = [p for p in points if p.batch in (1, 8, 32)]
    result = solver.fit_coefficients(train, hardware=hw)
    errors = solver.prediction_errors(points, hardware=hw, coefficients=result.coefficients)
    cells = ", ".join(f"b{p.batch} {e * 100:+.1f} %" for p, e in zip(points, errors, strict=True))
    return [
        f"- step rows (`docs/examples/seed-950pr-qwen3-27b.csv`, decode step = 1 / per-user rate): {cells}. "
        f"Set by the rows: {_fitted_terms(result)}." + "".join(f" Warning: {w}." for w in result.warnings)
    ]


def seed_serving() -> list[str]:
    """Serving-row transcription: output tok/s + TPOT (+ TTFT at 1) at concurrency 1, 8, 32 -> 128."""
    _, rows = read_bench_rows(EXAMPLES / "seed-950pr-serving.csv")
    hw = catalog.load_card("ascend-950pr")
    result = solver.fit_coefficients([], hardware=hw, serving=[r for r in rows if r.concurrency <= 32])
    prepared = serving_rows.prepare(rows, hardware=hw, calibrated=False)
    cells = []
    for row in prepared:
        est = serving_rows.estimate(row, result.coefficients)
        point = row.point
        tpot = est.tpot_s / point.tpot_s - 1 if point.tpot_s and est.tpot_s else float("nan")
        out = point.dp * est.output_tokens_per_s / point.output_tokens_per_s - 1
        cells.append(
            f"c{point.concurrency}: output {out * 100:+.1f} %, per-user {1 / (1 + tpot) * 100 - 100:+.1f} %"
        )
    return [
        "- serving rows (`docs/examples/seed-950pr-serving.csv`, closed loop, random arrivals, 64 GiB): "
        f"{'; '.join(cells)}. "
        f"Set by the rows: {_fitted_terms(result)}." + "".join(f" Warning: {w}." for w in result.warnings)
    ]


def main() -> None:
    started = time.perf_counter()
    lines: list[str] = []
    for title, path, hw in SETS:
        table, held = lomo(title, path, hw)
        lines += table
        lines += [
            f"All held-out predictions of this set: MAPE {np.mean(np.abs(held)) * 100:.1f} %, worst "
            f"{np.max(np.abs(held)) * 100:.1f} %.",
            "",
        ]
    lines += ["**Seed, Ascend 950PR, Qwen3-27B FP8, MindIE: fit on concurrency 1, 8, 32; predict 128**", ""]
    lines += seed_steps() + seed_serving()
    print("\n".join(lines))
    print(f"\n(took {time.perf_counter() - started:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
