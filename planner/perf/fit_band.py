"""Where a speed figure comes from, and the range it is good to: what `kvplan serve` prints next to a number.

Three sources (the card's profile says which): datasheet peaks x assumed efficiencies (uncalibrated),
microbenchmarks (`kvplan calibrate` on a device), or a fit to measured rows (`kvplan calibrate --from-bench`).
The range is multiplicative on a throughput (a time's range is its inverse):

    uncalibrated   [1 / UNCALIBRATED_SLOW_FACTOR, UNCALIBRATED_FAST_FACTOR] x the estimate
    microbenchmark [1 - MICROBENCH_FRACTION, 1 + MICROBENCH_FRACTION]
    fit            [1 - FIT_FRACTION, 1 + FIT_FRACTION], each side widened by EXTRAPOLATION_FRACTION per
                   axis (batch, context) outside the fitted range (fit_checks.range_warnings)
"""

from __future__ import annotations

from planner.deployment import Deployment
from planner.perf import fit_checks
from planner.schema import Frozen

# Uncalibrated Ascend predictions against published serving results ran 0.84x to 3.2x the measured output
# tok/s (calibration/published/ascend-serving.csv, 38 rows kvplan can model, `kvplan validate` on 2026-12-01;
# the seed's 950PR 2.2-3.1x), so the truth lies between estimate / 3.2 and estimate / 0.84.  [measured]
UNCALIBRATED_SLOW_FACTOR = 3.2
UNCALIBRATED_FAST_FACTOR = 1.2
# Microbenchmark-only H200 profile against held-out end-to-end steps: worst point 11.8 % (ACCURACY.md).
MICROBENCH_FRACTION = 0.12  # [measured: ACCURACY.md, run 4 / run 5 worst points 11.8-14.7 %]
# A fit predicting another model of its family: held-out MAPE 2-7 %, worst points 10-21 % (ACCURACY.md "Fit
# transfer"); inside the fitted range take the typical worst.  [measured]
FIT_FRACTION = 0.15
EXTRAPOLATION_FRACTION = 0.25  # [assumed: per axis outside the fitted range; nothing measured there]


class SpeedBand(Frozen):
    """A throughput range around an estimate: low_factor <= truth / estimate <= high_factor."""

    source: str
    low_factor: float
    high_factor: float
    notes: list[str]


def speed_band(dep: Deployment, *, batch: int, ctx_tokens: int) -> SpeedBand:
    """The range and source of the deployment's speed figures at one batch and context (module docstring)."""
    measured = dep.hardware.measured
    if not dep.calibrated or measured is None:
        return SpeedBand(
            source="datasheet peaks x assumed efficiencies (uncalibrated)",
            low_factor=1.0 / UNCALIBRATED_SLOW_FACTOR,
            high_factor=UNCALIBRATED_FAST_FACTOR,
            notes=["uncalibrated: published Ascend runs reached 0.31x to 1.19x of such estimates"],
        )
    if measured.backend != "bench-fit":
        return SpeedBand(
            source=f"microbenchmarks ({measured.tool} on {measured.device_name})",
            low_factor=1.0 - MICROBENCH_FRACTION,
            high_factor=1.0 + MICROBENCH_FRACTION,
            notes=[],
        )
    fit_range = measured.samples.get("fit_range")
    notes = fit_checks.range_warnings(fit_range, batch=batch, ctx_tokens=ctx_tokens) if fit_range else []
    widen = EXTRAPOLATION_FRACTION * len(notes)
    return SpeedBand(
        source=f"fit ({measured.device_name})",
        low_factor=max(0.05, 1.0 - FIT_FRACTION - widen),
        high_factor=1.0 + FIT_FRACTION + widen,
        notes=notes,
    )
