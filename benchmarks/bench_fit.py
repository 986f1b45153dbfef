"""Time `kvplan calibrate --from-bench`'s fit (planner/fit/solver.py) on 500 decode-step points, and on the
published 910C serving rows.

    python benchmarks/bench_fit.py

500 synthetic points (5 models x 10 batches x 10 contexts on the shipped H200 profile, times from the roofline
with perturbed coefficients and 3 % noise), fitted from the profile's values; prints the median of 3 runs.
The issue's bound is 2 s; numbers in ACCURACY.md ("Fit transfer"). Then the 910C / vllm-ascend serving rows
of lab/published (closed loop per row inside the fit loop), median of 3.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import catalog
from planner.fit import solver, step_rows
from planner.importers.benchdeployment import deployment_for
from planner.importers.benchpoints import BenchPoint
from planner.perf import roofline

MODELS = ("qwen3-0.6b", "qwen3-8b", "qwen3-14b", "qwen3-32b", "llama-3.1-8b")
BATCHES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96)
CONTEXTS = (512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576)


def points() -> list[BenchPoint]:
    hw = catalog.load_card("nvidia-h200")
    truth = hw.coefficients().model_copy(update={"kernel_overhead_us": 2.0, "sequence_overhead_us": 8.0})
    true_hw = step_rows.with_coefficients(hw, truth)
    rng = np.random.default_rng(0)
    out = []
    for model in MODELS:
        probe = BenchPoint(model, "nvidia-h200", "bf16", "bf16", 1, 1, 512, 1.0, "bench", "transformers")
        dep = deployment_for(probe, hardware=true_hw, calibrated=False)
        batch, ctx = np.meshgrid(BATCHES, CONTEXTS, indexing="ij")
        steps = roofline.decode_step_s_grid(dep, batch=batch.ravel(), ctx_tokens=ctx.ravel())
        for b, c, s in zip(batch.ravel(), ctx.ravel(), steps, strict=True):
            noisy = float(s) * (1 + 0.03 * rng.standard_normal())
            out.append(
                BenchPoint(
                    model, "nvidia-h200", "bf16", "bf16", 1, int(b), int(c), noisy, "bench", "transformers"
                )
            )
    return out


def main() -> None:
    data = points()
    hw = catalog.load_card("nvidia-h200")
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        result = solver.fit_coefficients(data, hardware=hw)
        timings.append(time.perf_counter() - started)
    print(
        f"{len(data)} points: fit {sorted(timings)[1]:.2f} s (median of 3), {result.iterations} iterations, "
        f"MAPE {result.mape_fraction * 100:.1f} %"
    )
    serving_fit()


def serving_fit() -> None:
    """The 910C serving group of the published corpus (lab/published/fit_profiles.py's rows)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab" / "published"))
    import fit_profiles

    rows = [point for _, _, point in fit_profiles.corpus_groups()[("ascend-910c", "vllm")]]
    hw = catalog.load_card("ascend-910c")
    timings, cpu = [], []
    for _ in range(3):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = solver.fit_coefficients([], hardware=hw, serving=rows)
        timings.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    median, median_cpu = sorted(timings)[1], sorted(cpu)[1]
    print(
        f"{len(rows)} serving rows: fit {median:.2f} s wall, {median_cpu:.2f} s CPU (medians of 3), "
        f"{result.iterations} iterations"
    )


if __name__ == "__main__":
    main()
