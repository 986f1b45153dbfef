"""Effective rates of one card for one deployment: bandwidths, peaks and fixed costs, from the card's
datasheet and its (measured when calibrated) coefficients. Split from planner/perf/roofline.py, which times
the ledger's terms with them (and re-exports rates, Rates, kernel_overhead_table and small_kernel_s).
"""

from __future__ import annotations

import numpy as np

from planner.arrays import FloatArray
from planner.deployment import Deployment
from planner.errors import PlanInputError
from planner.perf import links, opgeometry
from planner.perf.attention import AttentionGrid, attention_grid, attention_table_for
from planner.records import record
from planner.schema import HardwareProfile, PerfCoefficients
from planner.units import us_to_s


@record
class Rates:
    """Effective rates of one card for one deployment (SI units)."""

    hbm_bytes_per_s: float  # weight streaming
    expert_bytes_per_s: float  # routed-expert weights through grouped GEMMs
    kv_bytes_per_s: float  # KV cache
    state_bytes_per_s: float  # linear-attention (GDN) recurrent state
    link_rates: links.LinkRates  # all-reduce, MoE dispatch and pipeline rates (planner/perf/links.py)
    flop_per_s: dict[str, float]
    kernel_overhead_s: float
    matmul_latency_s: float
    grouped_matmul_latency_s: float
    kernel_overhead_by_tokens: tuple[FloatArray, FloatArray] | None  # (log tokens, ratio), when measured
    step_overhead_s: float
    prefill_pass_overhead_s: float  # per prefill pass, on top of step_overhead_s
    sequence_overhead_s: float  # per sequence per pass (scheduler, host, per-request small kernels)
    allreduce_latency_s: float
    tp: int
    peak_bytes_per_s: float  # datasheet memory bandwidth: the attention table's rates never exceed it
    attention: AttentionGrid | None = None  # measured decode-attention rates, when calibrated with a table


def effective_flop_per_s(hardware: HardwareProfile, *, coefficients: PerfCoefficients, dtype: str) -> float:
    """Achievable dense FLOP/s in `dtype`: datasheet peak * compute_fraction.

    Formula: peak_flop_per_s(dtype) * compute_fraction[dtype]  (the profile converts TFLOP/s once).
    A missing peak or fraction raises PlanInputError: peaks are never extrapolated from another dtype.
    """
    if dtype not in hardware.peak_tflop_per_s:
        raise PlanInputError(
            f"{hardware.id}: no peak_tflop_per_s.{dtype} (got {sorted(hardware.peak_tflop_per_s)}, expected "
            f"a {dtype} entry); kvplan never extrapolates peaks: add it to the profile or pick another dtype"
        )
    if dtype not in coefficients.compute_fraction:
        raise PlanInputError(
            f"{hardware.id}: no compute_fraction.{dtype} in the coefficients (got "
            f"{sorted(coefficients.compute_fraction)}, expected a {dtype} entry)"
        )
    return hardware.peak_flop_per_s(dtype) * coefficients.compute_fraction[dtype]


def rates(dep: Deployment) -> Rates:
    """Effective bandwidths, peaks and overheads for a deployment (calibrated when asked and present)."""
    hw = dep.hardware
    coeff = hw.coefficients(calibrated=dep.calibrated)
    bandwidth = hw.memory_bandwidth_bytes_per_s
    dtypes = {opgeometry.matmul_dtype(dep), dep.activation_dtype.value}
    grouped_fraction = coeff.grouped_weight_read_bandwidth_fraction or coeff.weight_read_bandwidth_fraction
    grouped_latency_us = coeff.grouped_matmul_latency_us
    return Rates(
        hbm_bytes_per_s=bandwidth * coeff.weight_read_bandwidth_fraction,
        expert_bytes_per_s=bandwidth * grouped_fraction,
        kv_bytes_per_s=bandwidth * coeff.kv_read_bandwidth_fraction,
        state_bytes_per_s=bandwidth
        * (coeff.state_read_bandwidth_fraction or coeff.kv_read_bandwidth_fraction),
        link_rates=links.link_rates(dep, coeff),
        flop_per_s={d: effective_flop_per_s(hw, coefficients=coeff, dtype=d) for d in sorted(dtypes)},
        kernel_overhead_s=us_to_s(coeff.kernel_overhead_us),
        matmul_latency_s=us_to_s(coeff.matmul_latency_us),
        grouped_matmul_latency_s=us_to_s(
            coeff.matmul_latency_us if grouped_latency_us is None else grouped_latency_us
        ),
        kernel_overhead_by_tokens=kernel_overhead_table(coeff, hidden_size=dep.model.hidden_size),
        step_overhead_s=us_to_s(coeff.step_overhead_us),
        prefill_pass_overhead_s=us_to_s(coeff.prefill_pass_overhead_us),
        sequence_overhead_s=us_to_s(coeff.sequence_overhead_us),
        allreduce_latency_s=us_to_s(coeff.allreduce_latency_us),
        tp=dep.tp,
        peak_bytes_per_s=bandwidth,
        attention=decode_attention_grid(dep, coeff),
    )


def decode_attention_grid(dep: Deployment, coeff: PerfCoefficients) -> AttentionGrid | None:
    """Grid of the measured table that times this deployment's decode attention (engine, head_dim), if any."""
    table = attention_table_for(coeff, engine=dep.engine, head_dim=dep.model.head_dim or 0)
    return attention_grid(table) if table else None


def kernel_overhead_table(
    coeff: PerfCoefficients, *, hidden_size: int | None = None
) -> tuple[FloatArray, FloatArray] | None:
    """(log model tokens, cost relative to the fewest tokens) of the measured table, made non-decreasing.
    Formula: a row at T tokens of hidden size H_b stands for T * H_b / H tokens of a model of hidden H."""
    if not coeff.kernel_overhead_table:
        return None
    points = sorted((p.tokens, p.kernel_us, p.hidden_size) for p in coeff.kernel_overhead_table)
    ratio = np.maximum.accumulate(np.array([us for _, us, _ in points]) / points[0][1])
    scale = [bench / hidden_size if bench and hidden_size else 1.0 for _, _, bench in points]
    return np.log(np.array([t for t, _, _ in points], dtype=np.float64) * np.array(scale)), ratio


def small_kernel_s(rate: Rates, *, tokens: FloatArray | float) -> FloatArray | float:
    """Fixed cost of one small kernel at `tokens` rows.

    Formula: kernel_overhead_s * r(tokens); r = the measured table's cost relative to its fewest tokens,
    interpolated in log(tokens) and clamped at its ends (r = 1 without a table). kernel_overhead_us is the
    table's first entry when measured, so a --from-bench fit of it scales the whole measured curve.
    """
    if rate.kernel_overhead_by_tokens is None:
        return rate.kernel_overhead_s
    log_tokens, ratio = rate.kernel_overhead_by_tokens
    return rate.kernel_overhead_s * np.interp(np.log(np.maximum(tokens, 1.0)), log_tokens, ratio)


def resource_bytes_per_s(rate: Rates, *, resource: str) -> float:
    """Effective bandwidth of an HBM-side resource: KV reads, linear-attention state, routed-expert weights
    (grouped GEMM), else dense weight streaming."""
    by_resource = {
        "kv": rate.kv_bytes_per_s,
        "state": rate.state_bytes_per_s,
        "experts": rate.expert_bytes_per_s,
    }
    return by_resource.get(resource, rate.hbm_bytes_per_s)
