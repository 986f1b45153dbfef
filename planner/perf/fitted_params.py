"""The terms a --from-bench fit adjusts: physical meaning, bounds, and the prior each is pulled toward.

Every parameter lives in log space inside a box [lower, upper] that keeps it physical. Its prior is the value
the profile already holds (microbenchmark when calibrated, datasheet assumption otherwise), a log-normal of
width PRIOR_SIGMA_*; a term the profile leaves at 0 or None (per-sequence cost, a separate state rate) is
centred on its physical floor with a wide prior, so the data decide it and nothing else. The compute scale's
width narrows to the card's compute_fraction_prior_factor when the profile states one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from planner.arrays import FloatArray
from planner.records import record
from planner.schema import MAX_OVERHEAD_US, PerfCoefficients


@record
class FitParam:
    """One fitted term: the PerfCoefficients field it sets, its physical box, its floor and meaning.

    compute_scale is not a field: it multiplies every compute_fraction (prefill GEMM efficiency), each
    result capped at 1.
    """

    name: str
    lower: float
    upper: float
    floor: float  # prior centre when the profile holds 0 or None
    meaning: str
    unknown_factor: float = 100.0  # prior one-sigma factor (x/) about the floor when the profile holds none
    upper_is_physical_limit: bool = True  # False: the upper end is the model's neutral value, not a warning


# Boxes: fractions of the datasheet between a few % and 100 %; fixed costs from far below a kernel launch to
# far above any scheduler we know.  [assumed: wider than any card or engine we know, yet physical]
FIT_PARAMS: tuple[FitParam, ...] = (
    FitParam("weight_read_bandwidth_fraction", 0.05, 1.0, 0.5, "weight-streaming efficiency"),
    FitParam("kv_read_bandwidth_fraction", 0.03, 1.0, 0.5, "KV-read efficiency"),
    FitParam("state_read_bandwidth_fraction", 0.01, 1.0, 0.3, "linear-attention state efficiency"),
    FitParam("step_overhead_us", 1.0, 100_000.0, 20.0, "fixed cost per step (us)"),
    FitParam("kernel_overhead_us", 0.1, 300.0, 5.0, "per-layer cost: each small kernel (us)"),
    FitParam("matmul_latency_us", 0.1, 300.0, 5.0, "per-layer cost: each matmul's fixed part (us)"),
    FitParam("sequence_overhead_us", 0.1, 20_000.0, 5.0, "per-sequence cost per step (us)"),
    FitParam("allreduce_latency_us", 5.0, 500.0, 20.0, "fixed latency of each collective inside a node (us)"),
    FitParam("prefill_pass_overhead_us", 1.0, 100_000.0, 1000.0, "fixed cost per prefill pass (us)", 10.0),
    FitParam("compute_scale", 0.25, 2.0, 1.0, "prefill GEMM efficiency x the profile's"),
    FitParam(
        "request_overhead_us",
        100.0,
        MAX_OVERHEAD_US,
        10_000.0,
        "per request, outside the forward pass (us)",
        10.0,
    ),
    FitParam(
        "prefill_attention_fraction",
        0.1,
        1.0,
        1.0,
        "prefill attention efficiency / a GEMM's",
        upper_is_physical_limit=False,
    ),
    FitParam(
        "prefill_linear_attention_fraction",
        0.05,
        1.0,
        1.0,
        "chunked-GDN prefill rate / its measured rate",
        upper_is_physical_limit=False,
    ),
)
# compute_scale's floor: no GEMM the H200 microbenchmark measured (115 shapes, 1k-32k tokens, weights of 2M to
# 262M elements) ran below a quarter of the profile's compute_fraction (worst: 0.19 of peak against 0.77, a
# 2M-element weight). A prefill slower than that is not GEMM throughput, and the per-pass cost
# (prefill_pass_overhead_us) or the per-layer costs must carry it.  [measured: hwprofiles/nvidia-h200.yaml
# gemm_efficiency_table]
# prefill_pass_overhead_us: what a prefill pass costs beyond its kernels' time and the step overhead, which a
# graph-replayed decode step does not pay: launching the pass eagerly (hundreds of kernels x 2-20 us) and
# preparing its inputs, so 1 ms x/ 10 (0.1-10 ms at one sigma) rather than x/ 100: rows without a TTFT
# cannot tell it from the per-step cost, and a wide prior lets it absorb that.  [assumed] Its box ends at
# 100 ms: an eager prefill pass launches ~15 kernels per layer (<= ~1 500 for the 94-layer models here) at
# <= 50 us of host time each, ~75 ms at worst; a fit that wants more per pass is charging a per-request
# cost (below) or a slow prefill to every pass, and stalls every running decode for it.  [assumed]
# allreduce_latency_us: the fixed part of one collective inside a node (TP all-reduce, MoE dispatch or
# combine), paid per layer: 2 L per decode step at tp > 1; rows of one model at two tp / ep degrees separate
# it from the per-layer kernel costs best. CANN expands each HCCL op on the AI CPU by default, a fixed cost
# that small decode all-reduces cannot hide (xLLM-AI/xllm PR #1988, which moves them to AIV expansion; PR
# #1819: the count of small allreduceAicpuKernel calls sets TPOT). Box 5-500 us: 5 us, a device-launched
# one-shot all-reduce (HCCL AIV mode, ATB's LCCL), is assumed not to go below it; 500 us is above the
# 392-443 us that lvyufeng/PocketLLM PR #269 timed for one host-synchronised HcclAllReduce of 10-640 KB on a
# first-generation Ascend 910 (TP4, CANN 9.0), flat in size, the slowest path an engine would take.
# [measured by others on another Ascend part (upper end); assumed (lower end)]
# request_overhead_us: what one request costs outside the forward pass (HTTP + API server, tokenization of
# the prompt, the scheduler's admission, the first step of a captured graph): it adds to TTFT only
# (closed_loop.py, planner/sim), so rows with a TTFT at low load identify it. Prior 10 ms x/ 10 (1-100 ms
# at one sigma) unless the rows' engine gives its own centre (REQUEST_OVERHEAD_PRIOR_US in its room:
# vllm-ascend 100 ms, measured; planner/engines/registry.request_overhead_prior_us); box 0.1 ms (a local
# socket round trip) to 1 s, the profile schema's own limit (MAX_OVERHEAD_US): a fit that wanted more
# would write a profile that fails to load.
# [assumed: the engine's value, or 10 ms where rows of several engines mix]
# prefill_attention_fraction: prefill attention's compute rate over a GEMM's of the same dtype
# (prefill.prefill_attention_term). Box 0.1-1: a flash-attention kernel is no faster than a large GEMM on the
# same cube units (its first matmul reduces over head_dim alone, softmax runs on the vector units between
# the two, a causal mask idles part of each diagonal tile), and 0.1 is below any fused attention kernel we
# know of; at 1 it is the model without the term, so sitting there is no warning. Prior centred at 1 (the
# model before the term), fitted only where the card's profile states prefill_attention_prior_factor, its
# width; elsewhere held at the profile's value (PRIOR_SIGMA_HELD) so the other fits stay as they were.
# [assumed]
# prefill_linear_attention_fraction: the chunked Gated DeltaNet prefill kernels' served rate over the rate
# the profile measured (chunked_gdn_ns_per_head_token; prefill.chunked_gdn_s). Box 0.05-1: the measurement ran
# 16 sequences x 16-48 value heads, enough blocks for every AI core, so a served pass (one prompt, 4-24 heads
# per die) is no faster; its chunk recurrence runs in parallel over sequences x heads only, so it can be
# several times slower; 0.05 is below any occupancy we know of. At 1 it is the measurement (no warning).
# Fitted only where the profile states prefill_linear_attention_prior_factor, else held.  [assumed]
PARAM_NAMES = tuple(p.name for p in FIT_PARAMS)
LOWER = np.log([p.lower for p in FIT_PARAMS])
UPPER = np.log([p.upper for p in FIT_PARAMS])

# Prior widths (log space, one sigma): a measured value is trusted to x/1.25, an assumed one to x/4, a term
# the profile does not hold to x/100; the compute scale to the card's compute_fraction_prior_factor when it
# states one (a prefill measurement on the card or a sibling: prior()).  [assumed: the H200
# microbenchmark-only MAPE is 5-7 % (ACCURACY.md), so a measured efficiency is within x/1.25 of what an engine
# reaches; lab/accuracy/accuracy_fit.py shows 1.25 and 1.5 side by side: chosen with the held-out tables in
# view, say so]
PRIOR_SIGMA_MEASURED = math.log(1.25)
PRIOR_SIGMA_ASSUMED = math.log(4.0)
PRIOR_SIGMA_UNKNOWN = math.log(100.0)
# allreduce_latency_us is fitted only where the card's profile states allreduce_latency_prior_factor (which
# HCCL path its engines take is unknown there); elsewhere it is held at the profile's value by a prior this
# narrow (x/ 1.001, 0.1 %), so the other cards' fits stay as they were; so it is where the rows' engine
# launches its collectives from the device (registry.device_launched_collectives: MindIE's LCCL).  [assumed]
PRIOR_SIGMA_HELD = math.log(1.001)
# Terms a fit holds (PRIOR_SIGMA_HELD) unless the profile states their prior width (the field named here).
HELD_UNLESS_STATED = {
    "prefill_attention_fraction": "prefill_attention_prior_factor",
    "prefill_linear_attention_fraction": "prefill_linear_attention_prior_factor",
}


def profile_values(coefficients: PerfCoefficients) -> list[float | None]:
    """The profile's value of every FIT_PARAM (None or 0 where it holds none; compute_scale is 1)."""
    values: list[float | None] = []
    for param in FIT_PARAMS:
        value = 1.0 if param.name == "compute_scale" else getattr(coefficients, param.name)
        values.append(float(value) if value else None)
    return values


def prior(
    coefficients: PerfCoefficients,
    *,
    measured: bool,
    floors: Mapping[str, float] | None = None,
    hold_collective_latency: bool = False,
) -> tuple[FloatArray, FloatArray]:
    """(centre, sigma) of every parameter in log space.

    Formula: centre = log(clip(value or floor, lower, upper)), floor from `floors` where it names the
    parameter (an engine's own prior centre) and the FitParam's otherwise; sigma = PRIOR_SIGMA_MEASURED when
    the profile's value was measured, PRIOR_SIGMA_ASSUMED when assumed, log(unknown_factor) when absent;
    compute_scale: min(that, log(compute_fraction_prior_factor)) when the profile states the factor;
    allreduce_latency_us: log(allreduce_latency_prior_factor) when the profile states one and
    hold_collective_latency is off (the rows' engine expands its collectives on the host), else
    PRIOR_SIGMA_HELD (held at the profile's value); the HELD_UNLESS_STATED fractions likewise with their
    prior factors.
    """
    known = PRIOR_SIGMA_MEASURED if measured else PRIOR_SIGMA_ASSUMED
    centre, sigma = [], []
    for param, value in zip(FIT_PARAMS, profile_values(coefficients), strict=True):
        floor = (floors or {}).get(param.name, param.floor)
        centre.append(math.log(min(max(value or floor, param.lower), param.upper)))
        width = known if value is not None else math.log(param.unknown_factor)
        if param.name == "compute_scale" and coefficients.compute_fraction_prior_factor is not None:
            width = min(width, math.log(coefficients.compute_fraction_prior_factor))
        if param.name == "allreduce_latency_us":
            factor = coefficients.allreduce_latency_prior_factor
            width = PRIOR_SIGMA_HELD if factor is None or hold_collective_latency else math.log(factor)
        if param.name in HELD_UNLESS_STATED:
            factor = getattr(coefficients, HELD_UNLESS_STATED[param.name])
            width = PRIOR_SIGMA_HELD if factor is None else math.log(factor)
        sigma.append(width)
    return np.asarray(centre), np.asarray(sigma)


def coefficients_at(base: PerfCoefficients, log_values: FloatArray) -> PerfCoefficients:
    """base with every FIT_PARAM set from log_values (compute_scale multiplies compute_fraction, <= 1)."""
    values = np.exp(np.clip(log_values, LOWER, UPPER))
    update: dict[str, object] = {}
    for param, value in zip(FIT_PARAMS, values, strict=True):
        if param.name == "compute_scale":
            update["compute_fraction"] = {
                d: min(1.0, f * float(value)) for d, f in base.compute_fraction.items()
            }
        else:
            update[param.name] = float(value)
    return base.model_copy(update=update)


def on_bound(log_values: FloatArray, *, tolerance: float = 0.01) -> list[str]:
    """'lower' / 'upper' / '' per parameter: within `tolerance` (log) of its box (an upper end that is the
    model's neutral value, FitParam.upper_is_physical_limit off, is not reported)."""
    limits = [p.upper_is_physical_limit for p in FIT_PARAMS]
    return [
        "lower" if u - lo < tolerance else "upper" if hi - u < tolerance and limit else ""
        for u, lo, hi, limit in zip(log_values, LOWER, UPPER, limits, strict=True)
    ]
