"""Serving-level bench rows (benchpoints.ServingPoint) prepared for the fit: each row's replica Deployment,
clients and run (what does not depend on the coefficients), its estimate through a cached Timer, and the
layout of its observations (output tok/s, then TTFT and TPOT when given).

Split from planner/fit/serving_rows.py (which re-exports prepare and predicts rows with the roofline) so the
solver's hot loop (planner/fit/solver.py) reads it without the roofline-timed closed loop. One prediction per
row: the closed-loop estimate (planner/serving/estimate.py) of one data-parallel replica at its share of the
concurrency, times the replicas.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from planner import capacity, inputs, layout
from planner.arrays import FloatArray
from planner.deployment import DEFAULT_MAX_PREFILL_TOKENS, DEFAULT_MTP_ACCEPTANCE_FRACTION, Deployment
from planner.dtypes import StorageDType, activation_dtype_of, storage_dtype
from planner.errors import DataFileError, KvplanError
from planner.importers.benchdeployment import row_deployment
from planner.importers.benchpoints import BenchPoint, ServingPoint
from planner.schema import HardwareProfile, PerfCoefficients
from planner.serving.estimate import BenchRun, ServingEstimate, Timer, estimate_with
from planner.serving.open_loop import open_loop_estimate_with


class CachedTimer(Timer, Protocol):
    """A Timer whose coefficients are set per evaluation (planner/fit/features.py FeatureTimer)."""

    def prime(self, coefficients: PerfCoefficients) -> None: ...


def kv_dtype_of(point: ServingPoint, hardware: HardwareProfile) -> StorageDType:
    """The row's KV dtype; an empty cell means the activation dtype (fp16 or fp32 weights: theirs, else the
    card's 16-bit activation dtype), as vLLM's kv_cache_dtype=auto and MindIE without KV quantization."""
    if point.kv_dtype:
        return storage_dtype(point.kv_dtype)
    return activation_dtype_of(point.dtype, card_activation=hardware.activation_dtype)


def serving_deployment(
    point: ServingPoint, *, hardware: HardwareProfile | None = None, calibrated: bool = True
) -> Deployment:
    """The Deployment one replica of a serving row ran (hardware overrides the row's card when given).

    ctx_tokens = input + output (the longest a request grows); mtp acceptance: the row's, else the default;
    dp and ep: the row's layout (one DP group's step, experts split ep ways). Errors (unknown model or card,
    does not fit) name the row.
    """
    return row_deployment(
        point.where, model=point.model, card=point.card, hardware=hardware, calibrated=calibrated,
        fields=lambda hw: _serving_fields(point, hw),
    )  # fmt: skip


def _serving_fields(point: ServingPoint, card: HardwareProfile) -> dict[str, object]:
    """A serving row's Deployment fields on `card` (its memory_gib applied): dtypes, layout, lengths, MTP, and
    the memory fraction when the row states one."""
    hw = inputs.apply_overrides(card, memory_gib=point.memory_gib, bandwidth_gbps=None)
    acceptance = point.mtp_acceptance_fraction
    fields: dict[str, object] = {
        "hardware": hw,
        "weight_scheme_name": point.dtype,
        "kv_dtype": kv_dtype_of(point, hw),
    }
    fields |= {"tp": point.tp, "dp": point.dp, "ep": point.ep, "engine": point.engine}
    fields |= {"ctx_tokens": point.input_tokens + point.output_tokens, "mtp_tokens": point.mtp}
    fields["mtp_acceptance_fraction"] = DEFAULT_MTP_ACCEPTANCE_FRACTION if acceptance is None else acceptance
    fields["prefix_cached_fraction"] = point.prefix_cached_fraction
    fields["speculative_method"] = point.speculative_method
    # the row's prefill budget, else Deployment's default (8192), raised as the CLI raises it (MindIE:
    # maxPrefillTokens >= maxInputTokenLen, inputs.prefill_budget), so `kvplan serve` gives the fit's figure
    fields["max_prefill_tokens"] = inputs.prefill_budget(
        point.prefill_tokens or DEFAULT_MAX_PREFILL_TOKENS,
        engine=point.engine,
        hardware=hw,
        ctx_tokens=point.input_tokens + point.output_tokens,
        prompt_tokens=point.input_tokens,
    )
    if point.memory_fraction is not None:
        fields["memory_fraction"] = point.memory_fraction
    return fields


def replica_share(point: ServingPoint) -> float:
    """Replicas' worth of throughput a row's instance serves: dp for an open loop (its rate splits over
    every replica), else layout.busy_dp_groups(concurrency, dp) (one client on dp 2 keeps one group busy)."""
    if point.request_rate_per_s is not None:
        return float(point.dp)
    return layout.busy_dp_groups(point.concurrency, dp=point.dp)


def replica_run(point: ServingPoint, dep: Deployment) -> tuple[int, BenchRun]:
    """(clients per replica, how the replica runs): K / dp clients, running batch from
    capacity.admission (capped by max_num_seqs and by one DP group's full-length batch, the same rule
    `kvplan serve` applies); num_prompts / dp requests when given; the row's arrivals."""
    clients = max(1, math.ceil(point.concurrency / point.dp))
    # open loop (a request rate): no client cap, only the engine's and memory's
    admitting = clients if point.request_rate_per_s is None else sys.maxsize
    try:
        admitted = capacity.admission(dep, clients=admitting, engine_cap=point.max_batch)
    except KvplanError as exc:
        raise DataFileError(f"{point.where}: {exc}") from exc
    requests = None if point.num_requests is None else max(1, math.ceil(point.num_requests / point.dp))
    run = BenchRun(max_batch=admitted.running, num_requests=requests, arrivals=point.arrivals)
    return clients, run


@dataclass(frozen=True)
class PreparedRow:
    """A serving row with what does not depend on the coefficients worked out once (for fitting)."""

    point: ServingPoint
    deployment: Deployment
    clients: int
    run: BenchRun


def prepare(
    points: Sequence[ServingPoint], *, hardware: HardwareProfile | None = None, calibrated: bool = True
) -> list[PreparedRow]:
    """Deployment, clients per replica and run of every row (errors name the row)."""
    rows = []
    for point in points:
        dep = serving_deployment(point, hardware=hardware, calibrated=calibrated)
        clients, run = replica_run(point, dep)
        rows.append(PreparedRow(point, dep, clients, run))
    return rows


def timed_estimate(row: PreparedRow, timer: Timer, *, calibrated: bool) -> ServingEstimate:
    """The row's estimate through `timer`: open loop at rate / dp per replica, else the closed loop."""
    point = row.point
    if point.request_rate_per_s is not None:
        return open_loop_estimate_with(
            timer,
            workload=(point.input_tokens, point.output_tokens),
            rate_per_s=point.request_rate_per_s / point.dp,
            max_batch=row.run.max_batch or 1,
            calibrated=calibrated,
        )
    workload = (point.input_tokens, point.output_tokens, row.clients)
    return estimate_with(timer, workload=workload, run=row.run, calibrated=calibrated)


def with_coefficients(dep: Deployment, coefficients: PerfCoefficients) -> Deployment:
    """The deployment with these coefficients as its card's only (uncalibrated) set."""
    hw = dep.hardware.model_copy(update={"default_coefficients": coefficients, "measured": None})
    return dep.model_copy(update={"hardware": hw, "calibrated": False})


def residuals_of(rows: Sequence[PreparedRow], estimates: Sequence[ServingEstimate]) -> FloatArray:
    """pred / measured - 1 of every observation, row by row: output tok/s, then TTFT and TPOT when given."""
    out: list[float] = []
    for row, est in zip(rows, estimates, strict=True):
        point = row.point
        out.append(replica_share(point) * est.output_tokens_per_s / point.output_tokens_per_s - 1.0)
        if point.ttft_s is not None:
            out.append(est.ttft_s / point.ttft_s - 1.0)
        if point.tpot_s is not None:  # a one-token workload has no TPOT to compare: no residual
            out.append(0.0 if est.tpot_s is None else est.tpot_s / point.tpot_s - 1.0)
    return np.asarray(out, dtype=np.float64)


def cached_residuals(
    rows: Sequence[PreparedRow], coefficients: PerfCoefficients, *, timers: Sequence[CachedTimer]
) -> FloatArray:
    """residuals_of every row timed by its cached timer under `coefficients` (the solver's hot loop)."""
    estimates = []
    for row, timer in zip(rows, timers, strict=True):
        timer.prime(coefficients)
        estimates.append(timed_estimate(row, timer, calibrated=False))
    return residuals_of(rows, estimates)


# A client's TTFT holds request handling (HTTP, tokenization, scheduling) that the per-request term
# (PerfCoefficients.request_overhead_us) now times, so a TTFT observation counts as much as a throughput or
# TPOT one (it was 0.2 while no term modelled that cost).
TTFT_WEIGHT = 1.0


def observation_weights(rows: Sequence[PreparedRow]) -> FloatArray:
    """Weight of every observation in observation_residuals' order: 1, TTFT_WEIGHT for TTFT."""
    out: list[float] = []
    for row in rows:
        out.append(1.0)
        if row.point.ttft_s is not None:
            out.append(TTFT_WEIGHT)
        if row.point.tpot_s is not None:
            out.append(1.0)
    return np.asarray(out, dtype=np.float64)


def output_residuals(observed: FloatArray, rows: Sequence[PreparedRow]) -> FloatArray:
    """Each row's output tok/s residual out of observation_residuals' flat array."""
    index, at = [], 0
    for row in rows:
        index.append(at)
        at += 1 + (row.point.ttft_s is not None) + (row.point.tpot_s is not None)
    return np.asarray(observed[index], dtype=np.float64)


def observation_labels(points: Sequence[BenchPoint], serving: Sequence[ServingPoint]) -> list[str]:
    """One label per observation, in the solver's order (step rows, then residuals_of's order):
    'where (quantity)'."""
    labels = [f"{p.where} (decode step)" for p in points]
    for s in serving:
        labels.append(f"{s.where} (output tok/s)")
        labels += [f"{s.where} (TTFT)"] if s.ttft_s is not None else []
        labels += [f"{s.where} (TPOT)"] if s.tpot_s is not None else []
    return labels
