"""Fit a card's PerfCoefficients to measured rows: decode steps and closed-loop serving runs (numpy only).

The model is the planner's own (roofline decode step and prefill, planner/serving/closed_loop.py for serving
rows); the fit adjusts the terms in planner/perf/fitted_params.py, each with a physical meaning and a box:
weight-streaming, KV-read and linear-attention-state efficiency, fixed per-step cost, per-layer (small-kernel)
cost, per-sequence cost, and the prefill GEMM efficiency. It is a maximum a posteriori fit in log space:

    minimise  sum_i (pred_i / measured_i - 1)^2 / NOISE^2  +  sum_j ((u_j - prior_j) / sigma_j)^2

pred_i: a row's decode step, or a serving row's output tok/s (and its TTFT, TPOT when given). The prior pulls
every term toward the profile's microbenchmark or datasheet value, so one model's rows suffice: what the rows
cannot tell apart stays near the prior, and the reported uncertainty says which is which. Bounded
Levenberg-Marquardt, forward-difference Jacobian; the posterior covariance gives each value's uncertainty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from planner.arrays import FloatArray
from planner.engines import registry
from planner.errors import PlanInputError
from planner.fit import censored, features, prepared, step_rows
from planner.fit.result import FitResult
from planner.importers.benchdeployment import deployment_for
from planner.importers.benchpoints import BenchPoint, ServingPoint
from planner.perf import fitted, fitted_params, roofline
from planner.schema import HardwareProfile, PerfCoefficients

MAX_ITERATIONS = 40
FD_STEP = 1e-4  # forward-difference step in log space
TOLERANCE = 1e-10  # relative decrease of the objective that ends the search
# Relative error one row is expected to carry from measurement and model alone.  [assumed: run-to-run spread
# of the H200 end-to-end grid is ~1 %, the microbenchmark-only model error ~5 % (ACCURACY.md)]
NOISE_FRACTION = 0.05
START_SPREAD = (10.0, 300.0)  # extra starts: terms without a prior value at 10x and 300x their floor


def group_features(group: step_rows.StepGroup, base: PerfCoefficients) -> features.PassFeatures:
    """The fixed parts of every point's decode step in a group (fit_features), at the base coefficients."""
    dep = step_rows.at_coefficients(group.deployment, base)
    step = roofline.decode_step(dep, batch=group.batch, ctx_tokens=group.ctx_tokens)
    return features.features(dep, step, rows=group.batch.size, sequences=group.batch)


@dataclass(frozen=True)
class _Problem:
    """Everything the objective needs: step rows (grouped, as cached features), serving rows with their
    cached timers, the prior and the base coefficients."""

    groups: list[tuple[npt.NDArray[np.int64], features.PassFeatures]]
    measured_step_s: FloatArray
    serving: list[prepared.PreparedRow]
    timers: list[features.FeatureTimer]
    weights: FloatArray  # per observation: 1, prepared.TTFT_WEIGHT for a TTFT
    base: PerfCoefficients
    centre: FloatArray
    sigma: FloatArray
    floors: FloatArray | None = None  # (3, observations): [lower, upper, margin] per row (fit/censored.py)

    @classmethod
    def build(
        cls,
        points: Sequence[BenchPoint],
        rows: list[prepared.PreparedRow],
        *,
        hardware: HardwareProfile | None,
        start: tuple[PerfCoefficients, FloatArray, FloatArray],
    ) -> _Problem:
        """Group the step rows and cache every feature once; start = (base, prior centre, prior sigma)."""
        base, centre, sigma = start
        groups = step_rows.step_groups(points, hardware)
        return cls(
            groups=[(g.index, group_features(g, base)) for g in groups],
            measured_step_s=np.array([p.decode_step_s for p in points]),
            serving=rows,
            timers=[features.FeatureTimer(step_rows.at_coefficients(r.deployment, base), base) for r in rows],
            weights=np.concatenate([np.ones(len(points)), prepared.observation_weights(rows)]),
            base=base,
            centre=centre,
            sigma=sigma,
            floors=censored.problem_floors(len(points), [row.point for row in rows]),
        )


def data_residuals(problem: _Problem, log_values: FloatArray) -> FloatArray:
    """weight * log(pred / measured) of every observation: step rows, then serving rows (output tok/s,
    TTFT, TPOT; weights in problem.weights); a floor row's output tok/s one-sided (fit/censored.py).

    The log ratio weighs 2x too fast and 2x too slow alike (pred / measured - 1 would not), and equals the
    relative error to first order.
    """
    coefficients = fitted_params.coefficients_at(problem.base, log_values)
    steps = np.empty(len(problem.measured_step_s))
    for index, cached in problem.groups:
        steps[index] = features.pass_times(cached, coefficients)
    steps = steps / problem.measured_step_s
    if problem.serving:
        observed = prepared.cached_residuals(problem.serving, coefficients, timers=problem.timers)
        steps = np.concatenate([steps, 1.0 + observed])
    logs = np.log(np.maximum(steps, 1e-300))
    if problem.floors is not None:
        logs = censored.censored_log_ratios(logs, problem.floors, noise_fraction=NOISE_FRACTION)
    return np.asarray(problem.weights * logs, dtype=np.float64)


def _jacobian(problem: _Problem, log_values: FloatArray, r0: FloatArray) -> FloatArray:
    jac = np.zeros((len(r0), len(log_values)))
    for j in range(len(log_values)):
        step = FD_STEP if log_values[j] + FD_STEP <= fitted_params.UPPER[j] else -FD_STEP
        moved = log_values.copy()
        moved[j] += step
        jac[:, j] = (data_residuals(problem, moved) - r0) / step
    return jac


def _cost(problem: _Problem, u: FloatArray, r: FloatArray) -> float:
    return float(np.sum((r / NOISE_FRACTION) ** 2) + np.sum(((u - problem.centre) / problem.sigma) ** 2))


def _starts(problem: _Problem) -> list[FloatArray]:
    """Start points: the prior centre, and the centre with every term the profile does not hold (wide prior)
    moved to each of START_SPREAD times its floor, so a per-sequence cost far from its floor is found."""
    centre = np.clip(problem.centre, fitted_params.LOWER, fitted_params.UPPER)
    unknown = problem.sigma >= fitted_params.PRIOR_SIGMA_UNKNOWN
    starts = [centre]
    for factor in START_SPREAD:
        moved = centre.copy()
        moved[unknown] += np.log(factor)
        moved = np.clip(moved, fitted_params.LOWER, fitted_params.UPPER)
        starts.append(moved)
    return starts


def _solve(problem: _Problem) -> tuple[FloatArray, FloatArray, FloatArray, int, bool]:
    """The best of the LM searches from every start (`_starts`); see `_search`."""
    best = min((_search(problem, u) for u in _starts(problem)), key=lambda found: found[0])
    _, u, r, iterations, converged = best
    jac = _jacobian(problem, u, r) / NOISE_FRACTION
    return u, r, _covariance(jac, np.diag(1.0 / problem.sigma**2), r), iterations, converged


def _search(problem: _Problem, u: FloatArray) -> tuple[float, FloatArray, FloatArray, int, bool]:
    """(cost, log values, data residuals, iterations, converged): bounded LM on the MAP cost from u.

    Formula per iteration: H = J'J / s^2 + diag(1 / sigma^2); g = J'r / s^2 + (u - c) / sigma^2;
    u <- clip(u - (H + lambda diag(H))^-1 g, box); accepted when the cost falls (s = NOISE_FRACTION).
    """
    r = data_residuals(problem, u)
    cost, damping, converged, iteration = _cost(problem, u, r), 1e-3, False, 0
    prior_h = np.diag(1.0 / problem.sigma**2)
    for iteration in range(1, MAX_ITERATIONS + 1):  # noqa: B007 - iteration is reported
        jac = _jacobian(problem, u, r) / NOISE_FRACTION
        hessian = jac.T @ jac + prior_h
        gradient = jac.T @ (r / NOISE_FRACTION) + (u - problem.centre) / problem.sigma**2
        trial_u = np.clip(
            u - np.linalg.solve(hessian + damping * np.diag(np.diag(hessian)), gradient),
            fitted_params.LOWER,
            fitted_params.UPPER,
        )
        trial_r = data_residuals(problem, trial_u)
        trial_cost = _cost(problem, trial_u, trial_r)
        if trial_cost < cost:
            gain = (cost - trial_cost) / max(cost, 1e-300)
            u, r, cost, damping = trial_u, trial_r, trial_cost, max(damping / 4, 1e-9)
            if gain < TOLERANCE:
                converged = True
                break
        else:
            damping *= 4
            if damping > 1e8:
                converged = True
                break
    return cost, u, r, iteration, converged


def _covariance(jac: FloatArray, prior_h: FloatArray, r: FloatArray) -> FloatArray:
    """Posterior covariance in log space; the rows count for less when they scatter more than NOISE_FRACTION.

    Formula: C = (J'J / k + diag(1/sigma^2))^-1,  k = max(1, chi2 / (n - p_eff)),  chi2 = sum (r / s)^2,
    p_eff = trace(J C0 J') with C0 = (J'J + diag(1/sigma^2))^-1 (parameters the rows pin down).
    A term the rows do not touch keeps its prior sigma.
    """
    c0 = np.linalg.inv(jac.T @ jac + prior_h)
    p_eff = float(np.trace(jac @ c0 @ jac.T))
    chi2 = float(np.sum((r / NOISE_FRACTION) ** 2))
    scale = max(1.0, chi2 / max(1.0, len(r) - p_eff))
    return np.asarray(np.linalg.inv(jac.T @ jac / scale + prior_h), dtype=np.float64)


def fit_coefficients(
    points: Sequence[BenchPoint],
    *,
    hardware: HardwareProfile | None = None,
    base: PerfCoefficients | None = None,
    serving: Sequence[ServingPoint] = (),
    source: str = "--from-bench",
) -> FitResult:
    """MAP fit of FIT_PARAMS to step rows and serving rows (module docstring); refuses garbage (perf.fitted).

    Starts from, and is pulled toward, `base` (default: the card's current coefficients; a measured block
    makes the prior narrow). Residuals are reported per row: steps, then serving rows' output tok/s.
    """
    fitted.check_rows(points, serving, source=source)
    rows = prepared.prepare(serving, hardware=hardware, calibrated=False)
    hw = hardware or (
        deployment_for(points[0], calibrated=False).hardware if points else rows[0].deployment.hardware
    )
    start = base if base is not None else hw.coefficients(calibrated=True)
    # the rows' engine sets the per-request prior's centre when they share one (registry)
    engines = {point.engine for point in points} | {row.engine for row in serving}
    engine_prior = registry.request_overhead_prior_us(engines)
    centre, sigma = fitted_params.prior(
        start,
        measured=base is None and hw.is_calibrated,
        floors=None if engine_prior is None else {"request_overhead_us": engine_prior},
        hold_collective_latency=registry.device_launched_collectives(engines),
    )
    problem = _Problem.build(points, rows, hardware=hardware, start=(start, centre, sigma))
    u, r, covariance, iterations, converged = _solve(problem)
    if not np.all(np.isfinite(r)):
        raise PlanInputError(f"{source}: the fit ended with non-finite predictions; check the rows")
    return _result(problem, u, r, covariance, (iterations, converged, points, serving))


def _result(
    problem: _Problem,
    u: FloatArray,
    r: FloatArray,
    covariance: FloatArray,
    extra: tuple[int, bool, Sequence[BenchPoint], Sequence[ServingPoint]],
) -> FitResult:
    """FitResult from the solution: per-row residuals (against the published figure, floor rows too),
    uncertainties, bound and quality warnings (on the residuals the fit minimised)."""
    iterations, converged, points, serving = extra
    raw = r if problem.floors is None else data_residuals(replace(problem, floors=None), u)
    # the residuals are log(pred / measured) (weight 1 for step rows and output tok/s): as fractions,
    # pred / measured - 1 = expm1 of them (a 2x-too-slow row is -50 %, never below -100 %)
    reported = np.expm1(_per_row(problem, raw, steps=len(points)))
    per_row = np.expm1(_per_row(problem, r, steps=len(points)))
    values = np.exp(u)
    bounds = fitted_params.on_bound(u)
    worst = int(np.argmax(np.abs(per_row)))
    where = [*(p.where for p in points), *(s.where for s in serving)][worst]
    mape = float(np.mean(np.abs(per_row)))
    pullers = bound_pullers(problem, u, r, bounds, labels=prepared.observation_labels(points, serving))
    warnings = fitted.bound_warnings(values.tolist(), bounds, pullers=pullers)
    quality = fitted.quality_warnings(mape, f"{per_row[worst]:+.0%} at {where}")
    warnings += quality
    return FitResult(
        coefficients=fitted_params.coefficients_at(problem.base, u),
        residual_fractions=reported.tolist(),
        iterations=iterations,
        converged=converged,
        log_values=u.tolist(),
        sigma_log=np.sqrt(np.diag(covariance)).tolist(),
        prior_sigma_log=problem.sigma.tolist(),
        bounds=bounds,
        warnings=warnings,
        fit_range=fitted.fitted_range(points, serving),
        bound_pullers=pullers,
        poor_fit=bool(quality),
    )


def _per_row(problem: _Problem, r: FloatArray, *, steps: int) -> FloatArray:
    """One residual per row out of data_residuals' array: every step row's, then each serving row's output."""
    return np.concatenate([r[:steps], prepared.output_residuals(r[steps:], problem.serving)])


PULLERS_SHOWN = 5  # observations named per parameter on a bound


def bound_pullers(
    problem: _Problem, u: FloatArray, r: FloatArray, bounds: Sequence[str], *, labels: Sequence[str]
) -> dict[str, list[str]]:
    """For each parameter on a bound, the observations whose misfit pulls it past the bound.

    Formula: observation i's pull on parameter j is -r_i J_ij (the descent direction of r_i^2 / 2 in u_j);
    at an upper bound the rows with pull > 0 want it higher, at a lower bound those with pull < 0 want it
    lower; the PULLERS_SHOWN largest |pull| are named.
    """
    on_bound = [j for j, side in enumerate(bounds) if side]
    if not on_bound:
        return {}
    jac = _jacobian(problem, u, r)
    out: dict[str, list[str]] = {}
    for j in on_bound:
        pull = -r * jac[:, j] * (1.0 if bounds[j] == "upper" else -1.0)
        order = [i for i in np.argsort(-pull) if pull[i] > 0][:PULLERS_SHOWN]
        out[fitted_params.PARAM_NAMES[j]] = [labels[i] for i in order]
    return out


def prediction_errors(
    points: Sequence[BenchPoint],
    *,
    hardware: HardwareProfile | None = None,
    coefficients: PerfCoefficients | None = None,
    calibrated: bool = True,
) -> list[float]:
    """pred / measured - 1 for every point: under `coefficients` when given, else the card's own
    (measured when calibrated and present, datasheet defaults otherwise)."""
    groups = step_rows.step_groups(points, hardware)
    measured = np.array([p.decode_step_s for p in points])
    if coefficients is not None:
        predicted = step_rows.predicted_step_s(groups, coefficients, count=len(points))
        return [float(e) for e in predicted / measured - 1.0]
    out = np.empty(len(points))
    for g in groups:
        dep = g.deployment.model_copy(update={"calibrated": calibrated})
        out[g.index] = roofline.decode_step_s_grid(dep, batch=g.batch, ctx_tokens=g.ctx_tokens)
    return [float(e) for e in out / measured - 1.0]
