"""Serving-level bench rows (benchpoints.ServingPoint) -> predicted output tok/s, TTFT and TPOT.

One prediction per row: the closed-loop estimate (planner/serving/closed_loop.py) of one data-parallel replica
at its share of the concurrency, times the replicas. The replica's deployment carries the row's layout (tp,
dp, ep: planner/layout.py), so a MoE row's experts are split ep ways and every replica's tokens reach them.
The running batch is the smallest of the replica's clients, the row's max_num_seqs and what the replica's
memory holds at input + output tokens (engines queue the rest).
Rows are timed as their `arrivals` column says: "waves" by default (the published load tools start every
client together at fixed lengths), "random" for a client loop whose requests end apart (the seed's script).
Preparing the rows (deployment, clients, run) and the fit's cached residuals are planner/fit/prepared.py
(re-exported here); this module times rows with the roofline.
"""

from __future__ import annotations

from collections.abc import Sequence

from planner.arrays import FloatArray
from planner.fit.features import FeatureTimer
from planner.fit.prepared import TTFT_WEIGHT as TTFT_WEIGHT
from planner.fit.prepared import PreparedRow as PreparedRow
from planner.fit.prepared import cached_residuals, replica_share, residuals_of, timed_estimate
from planner.fit.prepared import kv_dtype_of as kv_dtype_of
from planner.fit.prepared import prepare as prepare
from planner.fit.prepared import serving_deployment as serving_deployment
from planner.fit.prepared import with_coefficients as with_coefficients
from planner.importers.benchpoints import ServingPoint
from planner.schema import HardwareProfile, PerfCoefficients
from planner.serving import closed_loop
from planner.serving.estimate import ServingEstimate


def predicted_output_tokens_per_s(row: PreparedRow, coefficients: PerfCoefficients | None = None) -> float:
    """Predicted output tok/s of the whole row: one replica's estimate times the replicas it stands for
    (prepared.replica_share), under `coefficients` when given (else the card's own)."""
    return replica_share(row.point) * estimate(row, coefficients).output_tokens_per_s


def estimate(
    row: PreparedRow, coefficients: PerfCoefficients | None = None, timer: FeatureTimer | None = None
) -> ServingEstimate:
    """One replica's estimate of the row, closed loop or open loop (request_rate:
    planner/serving/open_loop.py),
    through the fit's cached `timer` when given."""
    point = row.point
    workload = (point.input_tokens, point.output_tokens, row.clients)
    if timer is not None and coefficients is not None:
        timer.prime(coefficients)
        return timed_estimate(row, timer, calibrated=False)
    dep = row.deployment if coefficients is None else with_coefficients(row.deployment, coefficients)
    if point.request_rate_per_s is not None:
        return timed_estimate(row, closed_loop.RooflineTimer(dep), calibrated=False)
    return closed_loop.serving_estimate(
        dep, input_tokens=workload[0], output_tokens=workload[1], concurrency=workload[2], run=row.run
    )


def serving_residuals(
    rows: Sequence[PreparedRow], coefficients: PerfCoefficients | None = None
) -> list[float]:
    """predicted / measured - 1 of every prepared row's output tok/s."""
    return [predicted_output_tokens_per_s(r, coefficients) / r.point.output_tokens_per_s - 1.0 for r in rows]


def observation_residuals(
    rows: Sequence[PreparedRow],
    coefficients: PerfCoefficients,
    *,
    timers: Sequence[FeatureTimer] | None = None,
) -> FloatArray:
    """pred / measured - 1 of every observation, row by row: output tok/s, then TTFT and TPOT when given
    (prepared.residuals_of), through the fit's cached `timers` when given, else the roofline."""
    if timers is not None:
        return cached_residuals(rows, coefficients, timers=timers)
    return residuals_of(rows, [estimate(row, coefficients) for row in rows])


def serving_errors(
    points: Sequence[ServingPoint],
    *,
    hardware: HardwareProfile | None = None,
    coefficients: PerfCoefficients | None = None,
    calibrated: bool = True,
) -> list[float]:
    """predicted / measured - 1 of every row's output tok/s (dp replicas times one replica's estimate)."""
    return serving_residuals(prepare(points, hardware=hardware, calibrated=calibrated), coefficients)


RowErrors = tuple[float, float | None, float | None]  # predicted / measured - 1: output tok/s, TTFT, TPOT


def serving_row_errors(
    points: Sequence[ServingPoint], *, hardware: HardwareProfile | None = None, calibrated: bool = True
) -> list[RowErrors]:
    """Per row, predicted / measured - 1 of output tok/s (as serving_errors), and of mean TTFT and TPOT where
    the row states them (None where it does not, or where the prediction has no TPOT: one-token outputs):
    one estimate per row, the replica's TTFT and TPOT being every request's (`kvplan validate`)."""
    out: list[RowErrors] = []
    for row in prepare(points, hardware=hardware, calibrated=calibrated):
        est, point = estimate(row), row.point
        throughput = replica_share(point) * est.output_tokens_per_s / point.output_tokens_per_s - 1.0
        ttft = None if point.ttft_s is None else est.ttft_s / point.ttft_s - 1.0
        tpot = None if point.tpot_s is None or est.tpot_s is None else est.tpot_s / point.tpot_s - 1.0
        out.append((throughput, ttft, tpot))
    return out
