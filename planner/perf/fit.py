"""Fit a card's PerfCoefficients to measured end-to-end decode points (pure: numpy only, no torch).

The model is planner.perf.roofline's decode step; the fitted parameters are the efficiencies and overheads it
applies. Least squares on relative residuals (pred / measured - 1), so small and large steps weigh alike, by
a bounded Levenberg-Marquardt: parameters live in [lower, upper] boxes that keep them physical (a fraction of
the datasheet in (0, 1], overheads >= 0), every step is projected back into the box.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.deployment import Deployment
from planner.importers.benchpoints import BenchPoint, ServingPoint, deployment_for
from planner.perf import fit_serving, roofline
from planner.schema import HardwareProfile, PerfCoefficients

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class FitParam:
    """One fitted coefficient with the box that keeps it physical."""

    name: str
    lower: float
    upper: float


# Bounds: fractions of the datasheet between 5 % and 100 %; a kernel launch between 0 and 100 us; a step
# overhead between 0 and 50 ms.  [assumed: wider than any card or engine we know, yet physical]
FIT_PARAMS: tuple[FitParam, ...] = (
    FitParam("weight_read_bandwidth_fraction", 0.05, 1.0),
    FitParam("kv_read_bandwidth_fraction", 0.05, 1.0),
    FitParam("kernel_overhead_us", 0.0, 100.0),
    FitParam("step_overhead_us", 0.0, 50_000.0),
)
MAX_ITERATIONS = 60
FD_STEP = 1e-5  # finite-difference step in the unit box
TOLERANCE = 1e-12


@dataclass(frozen=True)
class FitResult:
    """Fitted coefficients, the relative residual of every point, and how the fit went."""

    coefficients: PerfCoefficients
    residual_fractions: list[float]  # pred / measured - 1, in point order
    iterations: int
    converged: bool

    @property
    def mape_fraction(self) -> float:
        """Mean absolute relative error."""
        return float(np.mean(np.abs(self.residual_fractions)))

    @property
    def worst_fraction(self) -> float:
        """Largest absolute relative error."""
        return float(np.max(np.abs(self.residual_fractions)))


def with_coefficients(hardware: HardwareProfile, coefficients: PerfCoefficients) -> HardwareProfile:
    """The profile with these coefficients as its only (uncalibrated) set."""
    return hardware.model_copy(update={"default_coefficients": coefficients, "measured": None})


def coefficients_at(base: PerfCoefficients, values: Sequence[float]) -> PerfCoefficients:
    """base with the FIT_PARAMS replaced by values (in FIT_PARAMS order)."""
    update = {p.name: float(v) for p, v in zip(FIT_PARAMS, values, strict=True)}
    return base.model_copy(update=update)


@dataclass(frozen=True)
class _Group:
    """Points that share one deployment except batch and ctx: one vectorised roofline call."""

    deployment: Deployment
    index: npt.NDArray[np.int64]
    batch: FloatArray
    ctx_tokens: FloatArray


def _groups(points: Sequence[BenchPoint], hardware: HardwareProfile | None) -> list[_Group]:
    keyed: dict[tuple[str, str, str, str, int, str], list[int]] = {}
    for i, p in enumerate(points):
        keyed.setdefault((p.model, p.card, p.dtype, p.kv_dtype, p.tp, p.engine), []).append(i)
    groups = []
    for members in keyed.values():
        dep = deployment_for(points[members[0]], hardware=hardware, calibrated=False)
        groups.append(
            _Group(
                dep,
                np.asarray(members),
                np.asarray([points[i].batch for i in members], float),
                np.asarray([points[i].ctx_tokens for i in members], float),
            )
        )
    return groups


def predicted_step_s(groups: list[_Group], coefficients: PerfCoefficients, *, count: int) -> FloatArray:
    """Roofline decode-step seconds of every point under these coefficients."""
    out = np.empty(count)
    for g in groups:
        hw = with_coefficients(g.deployment.hardware, coefficients)
        dep = g.deployment.model_copy(update={"hardware": hw, "calibrated": False})
        out[g.index] = roofline.decode_step_s_grid(dep, batch=g.batch, ctx_tokens=g.ctx_tokens)
    return out


def _to_unit(values: FloatArray) -> FloatArray:
    lower = np.array([p.lower for p in FIT_PARAMS])
    upper = np.array([p.upper for p in FIT_PARAMS])
    return np.asarray(np.clip((values - lower) / (upper - lower), 0.0, 1.0), dtype=np.float64)


def _from_unit(unit: FloatArray) -> FloatArray:
    lower = np.array([p.lower for p in FIT_PARAMS])
    upper = np.array([p.upper for p in FIT_PARAMS])
    return np.asarray(lower + np.clip(unit, 0.0, 1.0) * (upper - lower), dtype=np.float64)


def _start(base: PerfCoefficients) -> FloatArray:
    values = np.array([getattr(base, p.name) for p in FIT_PARAMS], dtype=float)
    lower = np.array([p.lower for p in FIT_PARAMS])
    upper = np.array([p.upper for p in FIT_PARAMS])
    return np.asarray(np.clip(values, lower + 1e-6 * (upper - lower), upper), dtype=np.float64)


def identifiable(
    points: Sequence[BenchPoint | ServingPoint], *, attention_table: bool = False
) -> npt.NDArray[np.bool_]:
    """Which FIT_PARAMS the points can pin down.

    Within one model, weight-read time, matmul latencies, kernel overheads and the step overhead are all
    constant in batch and ctx, so only their sum is identifiable: with a single model only
    kv_read_bandwidth_fraction and kernel_overhead_us are fitted (extra per-layer cost is what an
    implementation adds), and the others keep the profile's measured values. Points from two or more models
    (different bytes per kernel and kernels per step) free all FIT_PARAMS. With a measured attention table
    (attention_table=True) decode attention does not use kv_read_bandwidth_fraction, which stays fixed.
    """
    several_models = len({p.model for p in points}) > 1
    single_model_params = ("kv_read_bandwidth_fraction", "kernel_overhead_us")
    return np.array(
        [
            (several_models or p.name in single_model_params)
            and not (attention_table and p.name == "kv_read_bandwidth_fraction")
            for p in FIT_PARAMS
        ]
    )


def _residuals(
    unit: FloatArray,
    *,
    groups: list[_Group],
    base: PerfCoefficients,
    measured: FloatArray,
    serving: Sequence[fit_serving.PreparedRow] = (),
) -> FloatArray:
    coefficients = coefficients_at(base, _from_unit(unit).tolist())
    steps = predicted_step_s(groups, coefficients, count=len(measured)) / measured - 1.0
    if not serving:
        return steps
    return np.concatenate([steps, np.asarray(fit_serving.serving_residuals(serving, coefficients))])


def _jacobian(unit: FloatArray, r0: FloatArray, free: npt.NDArray[np.bool_], **kw: object) -> FloatArray:
    jac = np.zeros((len(r0), len(unit)))
    for j in np.flatnonzero(free):
        step = FD_STEP if unit[j] + FD_STEP <= 1.0 else -FD_STEP
        moved = unit.copy()
        moved[j] += step
        jac[:, j] = (_residuals(moved, **kw) - r0) / step  # type: ignore[arg-type]
    return jac


def fit_coefficients(
    points: Sequence[BenchPoint],
    *,
    hardware: HardwareProfile | None = None,
    base: PerfCoefficients | None = None,
    serving: Sequence[ServingPoint] = (),
) -> FitResult:
    """Bounded Levenberg-Marquardt fit of FIT_PARAMS to the points' decode-step times and the serving rows'
    output tok/s (residuals in that order).

    Formula: minimise sum_i (pred_i(theta) / measured_i - 1)^2 over theta in the FIT_PARAMS boxes;
    pred_i = roofline.decode_step_s_grid (step rows), fit_serving's closed-loop output tok/s (serving rows).
    Starts from `base` (default: the card's current coefficients); parameters the points cannot identify
    (see `identifiable`) stay at their start values.
    """
    groups = _groups(points, hardware)
    rows = fit_serving.prepare(serving, hardware=hardware, calibrated=False)
    hw = hardware or (groups[0].deployment.hardware if groups else rows[0].deployment.hardware)
    start = base if base is not None else hw.coefficients(calibrated=True)
    measured = np.array([p.decode_step_s for p in points])
    kw = {"groups": groups, "base": start, "measured": measured, "serving": rows}
    free = identifiable([*points, *serving], attention_table=start.attention_table is not None)
    unit = _to_unit(_start(start))
    r = _residuals(unit, **kw)  # type: ignore[arg-type]
    damping, converged, iteration = 1e-3, False, 0
    for iteration in range(1, MAX_ITERATIONS + 1):  # noqa: B007 - iteration is reported
        jac = _jacobian(unit, r, free, **kw)
        normal = jac.T @ jac
        gradient = jac.T @ r
        scale = np.diag(normal) + 1e-12
        trial_unit = np.clip(
            unit - np.linalg.solve(normal + damping * np.diag(scale) + 1e-15 * np.eye(len(unit)), gradient),
            0.0,
            1.0,
        )
        trial_unit[~free] = unit[~free]
        trial = _residuals(trial_unit, **kw)  # type: ignore[arg-type]
        gain = float(r @ r - trial @ trial)
        if gain > 0:
            unit, r, damping = trial_unit, trial, max(damping / 3, 1e-9)
            if gain < TOLERANCE:
                converged = True
                break
        else:
            damping *= 4
            if damping > 1e8:
                converged = True
                break
    return FitResult(
        coefficients=coefficients_at(start, _from_unit(unit).tolist()),
        residual_fractions=r.tolist(),
        iterations=iteration,
        converged=converged,
    )


def prediction_errors(
    points: Sequence[BenchPoint],
    *,
    hardware: HardwareProfile | None = None,
    coefficients: PerfCoefficients | None = None,
    calibrated: bool = True,
) -> list[float]:
    """pred / measured - 1 for every point: under `coefficients` when given, else the card's own
    (measured when calibrated and present, datasheet defaults otherwise)."""
    groups = _groups(points, hardware)
    measured = np.array([p.decode_step_s for p in points])
    if coefficients is not None:
        predicted = predicted_step_s(groups, coefficients, count=len(points))
        return [float(e) for e in predicted / measured - 1.0]
    out = np.empty(len(points))
    for g in groups:
        dep = g.deployment.model_copy(update={"calibrated": calibrated})
        out[g.index] = roofline.decode_step_s_grid(dep, batch=g.batch, ctx_tokens=g.ctx_tokens)
    return [float(e) for e in out / measured - 1.0]
