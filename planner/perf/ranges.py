"""Where a speed figure comes from, and the range it is good to: what every command prints next to a number.

Three sources (the card's profile says which): datasheet peaks x assumed efficiencies (uncalibrated),
microbenchmarks (`kvplan calibrate` on a device), or a fit to measured rows (`kvplan calibrate --from-bench`).
A range is a pair of factors on a throughput, truth / estimate in [low, high] (a time's range is the
inverse: [time / high, time / low]); decode (TPOT, tok/s) and prefill (TTFT) have their own pair:

    uncalibrated    measured error of datasheet profiles, per vendor (below;
                    lab/accuracy/speed_band_sources.py recomputes every pair from the repo's data and
                    tests/test_fit_band.py checks they agree)
    microbenchmark  decode MICROBENCH_FACTORS (measured as the uncalibrated pairs are); prefill
                    MICROBENCH_TTFT_FACTORS where the profile's prefill tables time the plan's engine, else
                    MICROBENCH_UNTABLED_TTFT_FACTORS; both widened by EXTRAPOLATION_FRACTION per axis (batch,
                    context) beyond 2x the profile's decode-attention tables
    fit             the profile's own leave-one-model-out factors when its fit recorded them (measured.samples
                    held_out_factors: truth / estimate of the central HELD_OUT_CENTRAL_FRACTION of the rows of
                    every model predicted by a fit without it; lab/published/fit_profiles.py writes
                    them), else [1 - FIT_FRACTION, 1 + FIT_FRACTION]; for both decode and prefill, widened by
                    EXTRAPOLATION_FRACTION per axis outside the fitted range (fitted.range_warnings)
Every band contains 1: the estimate itself is always inside its range.
"""

import math
from collections.abc import Sequence

import numpy as np

from planner.arrays import FloatArray
from planner.deployment import Deployment
from planner.engines import registry
from planner.errors import DataFileError
from planner.perf import fitted
from planner.schema import Frozen, MeasuredBlock
from planner.units import PERCENT

# Each pair below: truth / estimate over every point named, rounded outward to 2 decimals and widened to
# contain 1.  [measured: lab/accuracy/speed_band_sources.py, 2026-12-06; its docstring says why each
# statistic]
# Ascend, datasheet profiles, output tok/s: the 120 closed-loop rows of lab/published/ascend-serving.csv that
# lab/published/predict.py predicts (910B3 56, 910C 42, 950PR 17, 300I Duo 3, 910B4 2; 57 CI floors,
# which pass at >= 0.97 x baseline so there the truth is about the floor or above, 51 measured, 12 seed):
# their central 90 %, P5 0.280 to P95 0.953 (median 0.541); outside it rows down to 0.107 (GPUStack's
# burst of 1000 Qwen3-30B-A3B prompts at once on a 910B, row 207) and up to 1.089.
# The 137 closed-loop rows of newer features (draft models, cached prefixes, DeepSeek sparse attention incl.
# GLM-5.x, MiniMax-M3, DeepSeek-V4, P:D fleets, SGLang, seed 002's torch_npu server, CloudMatrix384) are not
# in it: their spread, P5 0.231 to P95 1.95 (median 0.626), is wider than the band (docs/accuracy.md); the
# band is no promise for those features.
ASCEND_DATASHEET_FACTORS = (0.27, 1.0)
ASCEND_CENTRAL_FRACTION = 0.9
ASCEND_PUBLISHED_ROWS = 120
# Ascend prefill: one modelled one-client row publishes a TTFT (seed 950PR, 256-token prompt, MindIE: 0.085 x
# the datasheet TTFT rate), too few to stand alone: ASCEND_DATASHEET_FACTORS widened to contain it. The 5
# one-client TTFT rows of newer features (SGLang 0.624-0.958, seed 002's fp32 server 0.062) are held out too.
ASCEND_DATASHEET_TTFT_FACTORS = (0.08, 1.0)
# Ascend, an engine of eager, unfused kernels (--engine transformers: registry.fused_kernels False): the one
# published such server, seed 002's hand-written torch_npu one (lab/published/ascend-serving.csv lines
# 127-139, Qwen3.5-0.8B on a 910, 1-32 streams), ran at 0.119x-0.374x the datasheet estimate's output tok/s
# (13 rows: eager host dispatch per op, which kvplan does not model) and its fp32 one-client TTFT at 0.062x.
# One server of one model, so the band keeps 1.0 at the top (the estimate stays inside it) and takes the
# rows' lowest at the bottom, rounded down.  [measured: lab/published/predictions-before.csv]
ASCEND_EAGER_FACTORS = (0.11, 1.0)
ASCEND_EAGER_TTFT_FACTORS = (0.06, 1.0)
ASCEND_EAGER_ROWS = 13
# NVIDIA, datasheet profile (nvidia-h200.yaml without `measured`), decode step: 190 held-out H200 end-to-end
# points (runs 1 and 5, tp = 2 of run 4; transformers in CUDA graphs): min 0.824, median 1.248, max 1.728.
GPU_DATASHEET_FACTORS = (0.82, 1.73)
# NVIDIA prefill, datasheet: the 24 held-out TTFTs of ACCURACY.md "Prefill (TTFT)": min 0.139 (Qwen3.5-0.8B,
# host-bound), median 0.708, max 0.859.
GPU_DATASHEET_TTFT_FACTORS = (0.13, 1.0)
# Microbenchmark profile (nvidia-h200.yaml as shipped), decode step: the same 190 points, each set predicted
# as lab/accuracy/accuracy_table.py does: min 0.843 (run 5, Qwen3.5-0.8B batch 4 ctx 512), median 0.951,
# max 1.045.
MICROBENCH_FACTORS = (0.84, 1.05)
# Microbenchmark profile, prefill: the same 24 TTFTs with the shipped H200 profile, whose prefill tables time
# `--engine transformers` only: min 0.696, max 1.061 (tables used); min 0.117, max 0.754 with the tables
# removed, which is the prefill every other engine gets (prefill.measured_prefill_terms).
MICROBENCH_TTFT_FACTORS = (0.69, 1.07)
MICROBENCH_UNTABLED_TTFT_FACTORS = (0.11, 1.0)
# A fit predicting another model of its family: held-out MAPE 2-7 %, worst points 10-21 % (ACCURACY.md "Fit
# transfer"); inside the fitted range take the typical worst.  [measured]
FIT_FRACTION = 0.15
HELD_OUT_CENTRAL_FRACTION = 0.9  # of a fitted profile's leave-one-model-out rows (as ASCEND_CENTRAL_FRACTION)
EXTRAPOLATION_FRACTION = 0.25  # [assumed: per axis outside the covered range; nothing measured there]
LOWEST_FACTOR = 0.05  # a widened low side never reaches 0 (a time's range would be unbounded)
DATASHEET = {  # vendor -> (decode pair, prefill pair, what they were measured on)
    "huawei": (
        ASCEND_DATASHEET_FACTORS,
        ASCEND_DATASHEET_TTFT_FACTORS,
        f"the central {ASCEND_CENTRAL_FRACTION * PERCENT:.0f} % of {ASCEND_PUBLISHED_ROWS} published Ascend "
        "serving rows",
    ),
    "nvidia": (GPU_DATASHEET_FACTORS, GPU_DATASHEET_TTFT_FACTORS, "190 held-out H200 decode steps"),
}


class SpeedBand(Frozen):
    """A throughput range around an estimate: low_factor <= truth / estimate <= high_factor (decode), the
    same for prefill (ttft_*); label is the compact source ("uncalibrated", "microbenchmarks", "fitted
    profile"), source the full one, notes say where the range comes from and what is extrapolated."""

    source: str
    label: str
    low_factor: float
    high_factor: float
    ttft_low_factor: float
    ttft_high_factor: float
    ttft_source: str
    extrapolated: bool
    notes: list[str]


def speed_band(dep: Deployment, *, batch: int, ctx_tokens: int) -> SpeedBand:
    """The range and source of the deployment's speed figures at one batch and context (module docstring)."""
    measured = dep.hardware.measured
    if not dep.calibrated or measured is None:
        return uncalibrated_band(dep)
    if measured.backend != "bench-fit":
        return microbench_band(dep, measured, batch=batch, ctx_tokens=ctx_tokens)
    return fitted_band(measured, batch=batch, ctx_tokens=ctx_tokens)


def uncalibrated_band(dep: Deployment) -> SpeedBand:
    """Datasheet peaks x assumed efficiencies: the vendor's measured error range (DATASHEET); on Ascend, an
    engine of eager, unfused kernels takes the range its one published server ran in (ASCEND_EAGER_*)."""
    (low, high), (ttft_low, ttft_high), points = DATASHEET[dep.hardware.vendor]
    if dep.hardware.vendor == "huawei" and not registry.fused_kernels(dep.engine):
        (low, high), (ttft_low, ttft_high) = ASCEND_EAGER_FACTORS, ASCEND_EAGER_TTFT_FACTORS
        points = (
            f"the {ASCEND_EAGER_ROWS} published rows of an eager torch_npu server (seed 002: host dispatch "
            "per op, not modelled)"
        )
    note = (
        f"{points} ran at {low:g}x-{high:g}x the datasheet estimate's speed (prefill "
        f"{ttft_low:g}x-{ttft_high:g}x; lab/accuracy/speed_band_sources.py)"
    )
    names = ("datasheet peaks x assumed efficiencies (uncalibrated)", "uncalibrated", "datasheet prefill")
    return band((low, high), (ttft_low, ttft_high), axes_out=0, names=names, notes=[note])


def band(
    decode: tuple[float, float],
    ttft: tuple[float, float],
    *,
    axes_out: int,
    names: tuple[str, str, str],
    notes: list[str],
) -> SpeedBand:
    """A SpeedBand from its decode and prefill (low, high) pairs, each widened by `axes_out` axes outside the
    covered range (extrapolated when any); names = (source, label, ttft_source)."""
    low, high = widened(decode, axes_out=axes_out)
    ttft_low, ttft_high = widened(ttft, axes_out=axes_out)
    source, label, ttft_source = names
    return SpeedBand(
        source=source,
        label=label,
        low_factor=low,
        high_factor=high,
        ttft_low_factor=ttft_low,
        ttft_high_factor=ttft_high,
        ttft_source=ttft_source,
        extrapolated=axes_out > 0,
        notes=notes,
    )


def widened(pair: tuple[float, float], *, axes_out: int) -> tuple[float, float]:
    """A (low, high) pair widened by EXTRAPOLATION_FRACTION per axis outside the covered range.

    Formula: low' = max(LOWEST_FACTOR, low - w), high' = high + w, w = EXTRAPOLATION_FRACTION * axes_out.
    """
    widen = EXTRAPOLATION_FRACTION * axes_out
    return max(LOWEST_FACTOR, pair[0] - widen), pair[1] + widen


def attention_coverage(measured: MeasuredBlock) -> list[float] | None:
    """[batch min, batch max, ctx min, ctx max] the profile's decode-attention tables measured; None when
    it has none."""
    coeff = measured.coefficients
    points = list(coeff.attention_table or [])
    for table in (coeff.attention_tables or {}).values():
        points += table
    if not points:
        return None
    batches, contexts = [p.batch for p in points], [p.ctx_tokens for p in points]
    return [float(min(batches)), float(max(batches)), float(min(contexts)), float(max(contexts))]


def microbench_band(dep: Deployment, measured: MeasuredBlock, *, batch: int, ctx_tokens: int) -> SpeedBand:
    """Microbenchmark profile: MICROBENCH_FACTORS on decode, the prefill pair that fits the engine, widened
    per axis beyond the decode-attention tables."""
    coverage = attention_coverage(measured)
    notes = (
        fitted.range_warnings(
            coverage, batch=batch, ctx_tokens=ctx_tokens, covered="the profile's attention tables"
        )
        if coverage
        else []
    )
    tabled = dep.engine in {r.engine for r in measured.coefficients.prefill_layer_table or []}
    prefill = MICROBENCH_TTFT_FACTORS if tabled else MICROBENCH_UNTABLED_TTFT_FACTORS
    names = (
        f"microbenchmarks ({measured.tool} on {measured.device_name})",
        "microbenchmarks",
        "measured prefill tables" if tabled else f"no prefill tables for {dep.engine}",
    )
    return band(MICROBENCH_FACTORS, prefill, axes_out=len(notes), names=names, notes=notes)


def central_band(ratios: Sequence[float], *, central: float = 1.0) -> tuple[float, float]:
    """(low, high) of truth / estimate ratios: their central fraction, rounded outward to 2 decimals and
    widened to contain 1.

    Formula: low, high = numpy percentiles (1 - central) / 2 and 1 - (1 - central) / 2 (1.0: min to max);
    low' = min(floor(100 low) / 100, 1), high' = max(ceil(100 high) / 100, 1)
    """
    tail_percent = (1.0 - central) / 2 * PERCENT
    low, high = np.percentile(np.asarray(ratios, dtype=np.float64), [tail_percent, PERCENT - tail_percent])
    return min(math.floor(low * 100) / 100, 1.0), max(math.ceil(high * 100) / 100, 1.0)


def held_out_pair(measured: MeasuredBlock) -> tuple[float, float, int] | None:
    """(low, high, rows) of the profile's leave-one-model-out factors, or None when its fit recorded none.

    A malformed entry (not [low, high, rows] with 0 < low <= 1 <= high, rows >= 1) raises DataFileError.
    """
    held = measured.samples.get("held_out_factors")
    if held is None:
        return None
    if len(held) != 3 or not 0 < held[0] <= 1 <= held[1] or held[2] < 1:
        raise DataFileError(
            f"measured.samples.held_out_factors: expected [low, high, rows] with 0 < low <= 1 <= high and "
            f"rows >= 1 (got {held})"
        )
    return held[0], held[1], int(held[2])


def fitted_band(measured: MeasuredBlock, *, batch: int, ctx_tokens: int) -> SpeedBand:
    """--from-bench fit: the fit's own leave-one-model-out factors when recorded, else FIT_FRACTION, on
    decode and prefill alike (its rows' output tok/s include their prefills), widened per axis outside the
    fitted range."""
    fit_range = measured.samples.get("fit_range")
    notes = fitted.range_warnings(fit_range, batch=batch, ctx_tokens=ctx_tokens) if fit_range else []
    held = held_out_pair(measured)
    names = (
        measured.device_name.removeprefix("calibrated: "),
        "fitted profile",
        "the fit's range" if held is None else f"the fit's held-out range, {held[2]} rows",
    )
    pair = fit_pair(measured)  # decode and prefill alike: its rows' throughput includes their prefills
    return band(pair, pair, axes_out=len(notes), names=names, notes=notes)


def fit_pair(measured: MeasuredBlock) -> tuple[float, float]:
    """A fitted profile's (low, high) before widening: its leave-one-model-out factors when recorded, else
    1 -+ FIT_FRACTION."""
    held = held_out_pair(measured)
    return (1.0 - FIT_FRACTION, 1.0 + FIT_FRACTION) if held is None else held[:2]


def decode_pair(dep: Deployment) -> tuple[float, float]:
    """The decode (low, high) before any widening: the vendor's datasheet pair, MICROBENCH_FACTORS or the
    fitted profile's pair (fit_pair)."""
    measured = dep.hardware.measured
    if not dep.calibrated or measured is None:
        return DATASHEET[dep.hardware.vendor][0]
    if measured.backend != "bench-fit":
        return MICROBENCH_FACTORS
    return fit_pair(measured)


def covered_range(dep: Deployment) -> list[float] | None:
    """[batch min, batch max, ctx min, ctx max] the profile covers (fitted rows or attention tables); None
    when nothing is covered or nothing widens (uncalibrated)."""
    measured = dep.hardware.measured
    if not dep.calibrated or measured is None:
        return None
    if measured.backend == "bench-fit":
        return measured.samples.get("fit_range") or None
    return attention_coverage(measured)


def factor_grid(
    dep: Deployment, *, batch: Sequence[int], ctx_tokens: Sequence[int]
) -> tuple[FloatArray, FloatArray]:
    """Decode (low, high) factors on a batch x ctx grid, shape (batches, contexts): speed_band's at every
    point, vectorised for `kvplan sweep` (an axis is out beyond fitted.EXTRAPOLATION_FACTOR x its range).

    Formula: w = EXTRAPOLATION_FRACTION * (batch out + ctx out); low - w (>= LOWEST_FACTOR), high + w.
    """
    b = np.asarray(batch, dtype=np.float64)[:, None]
    c = np.asarray(ctx_tokens, dtype=np.float64)[None, :]
    cover = covered_range(dep)
    out = np.zeros((b.size, c.size))
    if cover is not None:
        factor = fitted.EXTRAPOLATION_FACTOR
        out = out + ((b > factor * cover[1]) | (b < cover[0] / factor))
        out = out + ((c > factor * cover[3]) | (c < cover[2] / factor))
    low, high = decode_pair(dep)
    widen = EXTRAPOLATION_FRACTION * out
    return np.maximum(LOWEST_FACTOR, low - widen), high + widen
