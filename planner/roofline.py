"""Roofline step times: per-op ledgers for a decode step and a prefill, and a vectorised decode grid.

Time of one op = max(bytes / effective bandwidth, FLOP / effective peak of its dtype) + kernels * launch
overhead; all-reduces cost latency + 2 (tp - 1) / tp * bytes / effective link bandwidth; every pass pays
the step overhead once. Effective = datasheet * the card's coefficients (measured ones when calibrated).
Bytes and FLOP per op come from planner/opcost.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from planner import opcost
from planner.deployment import Deployment
from planner.errors import PlanInputError
from planner.opcost import FloatArray, Step, Term
from planner.schema import Frozen, HardwareProfile, PerfCoefficients
from planner.units import gb_per_s_to_bytes_per_s, us_to_s

Bound = Literal["memory", "compute", "overhead", "interconnect"]


@dataclass(frozen=True)
class Rates:
    """Effective rates of one card for one deployment (SI units)."""

    hbm_bytes_per_s: float  # weight streaming
    kv_bytes_per_s: float  # KV cache and recurrent state
    link_bytes_per_s: float
    flop_per_s: dict[str, float]
    kernel_overhead_s: float
    step_overhead_s: float
    allreduce_latency_s: float
    tp: int


class Op(Frozen):
    """One ledger row: an op over `layers` layers (or passes) on one rank."""

    name: str
    layers: int
    kernels: int
    bytes: float  # over HBM, or over the interconnect for tp.allreduce
    flop: float
    compute_dtype: str
    transfer_s: float
    compute_s: float
    overhead_s: float
    time_s: float
    bound: Bound


class Ledger(Frozen):
    """Every op of a decode step (or of a whole chunked prefill) with totals."""

    phase: Literal["decode", "prefill"]
    batch: int
    ctx_tokens: int  # decode: tokens each sequence holds; prefill: the prompt length
    query_tokens: int  # tokens processed: batch * (1 + draft) per decode step; the prompt in prefill
    chunks: int
    ops: list[Op]
    hbm_bytes: float
    link_bytes: float
    flop: float
    time_s: float
    calibrated: bool


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
    dtypes = {opcost.matmul_dtype(dep), dep.activation_dtype.value}
    return Rates(
        hbm_bytes_per_s=bandwidth * coeff.weight_read_bandwidth_fraction,
        kv_bytes_per_s=bandwidth * coeff.kv_read_bandwidth_fraction,
        link_bytes_per_s=gb_per_s_to_bytes_per_s(hw.interconnect.bandwidth_gb_per_s)
        * coeff.allreduce_bandwidth_fraction,
        flop_per_s={d: effective_flop_per_s(hw, coefficients=coeff, dtype=d) for d in sorted(dtypes)},
        kernel_overhead_s=us_to_s(coeff.kernel_overhead_us),
        step_overhead_s=us_to_s(coeff.step_overhead_us),
        allreduce_latency_s=us_to_s(coeff.allreduce_latency_us),
        tp=dep.tp,
    )


def is_calibrated(dep: Deployment) -> bool:
    """True when the step times use measured coefficients."""
    return dep.calibrated and dep.hardware.is_calibrated


def term_seconds(term: Term, *, rate: Rates) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(transfer_s, compute_s, overhead_s) of one term.

    Formula:
        transfer_s = bytes / bw          bw = hbm, kv or (for all-reduce) link rate
                     all-reduce: 2 (tp - 1) / tp * bytes / link   (ring: reduce-scatter + all-gather)
        compute_s  = flop / flop_per_s[compute_dtype]
        overhead_s = kernels * kernel_overhead + collectives * allreduce_latency
    """
    if term.resource == "link":
        ring_fraction = 2.0 * (rate.tp - 1) / rate.tp
        transfer = ring_fraction * term.bytes / rate.link_bytes_per_s
    else:
        bandwidth = rate.kv_bytes_per_s if term.resource == "kv" else rate.hbm_bytes_per_s
        transfer = term.bytes / bandwidth
    compute = term.flop / rate.flop_per_s[term.compute_dtype]
    overhead = term.kernels * rate.kernel_overhead_s + term.collectives * rate.allreduce_latency_s
    return transfer, compute, np.full_like(transfer, overhead)


def term_time_s(term: Term, *, rate: Rates) -> FloatArray:
    """Formula: time_s = max(transfer_s, compute_s) + overhead_s."""
    transfer, compute, overhead = term_seconds(term, rate=rate)
    return np.maximum(transfer, compute) + overhead


def decode_step(dep: Deployment, *, batch: FloatArray, ctx_tokens: FloatArray) -> Step:
    """The pass of one decode step: each of `batch` sequences holds `ctx_tokens` and verifies 1 + k tokens.

    Formula: q = 1 + k (k = mtp_tokens when MTP is on); tokens = batch * q;
    cached = ceil(ctx / block) * block;
    attended = ctx + (q + 1) / 2; logits rows = tokens; k draft passes of `batch` tokens each.
    """
    draft = dep.mtp_tokens if dep.include_mtp else 0
    q = 1 + draft
    block = dep.block_size_tokens
    tokens = batch * q
    return Step(
        tokens=tokens,
        sequences=batch,
        cached_tokens=np.ceil(ctx_tokens / block) * block,
        attended_tokens=ctx_tokens + (q + 1) / 2.0,
        logits_tokens=tokens,
        draft_runs=draft,
        draft_tokens=batch,
        draft_logits=batch,
    )


def decode_step_s_grid(dep: Deployment, *, batch: npt.ArrayLike, ctx_tokens: npt.ArrayLike) -> FloatArray:
    """Decode step seconds over broadcast arrays of batch and context (the sweep and dashboard path).

    Formula: step_s = sum over ops of term_time_s + step_overhead_s
    """
    batch_arr = np.asarray(batch, dtype=np.float64)
    ctx_arr = np.asarray(ctx_tokens, dtype=np.float64)
    rate = rates(dep)
    step = decode_step(dep, batch=batch_arr, ctx_tokens=ctx_arr)
    total = np.full(np.broadcast_shapes(batch_arr.shape, ctx_arr.shape), rate.step_overhead_s)
    for term in opcost.step_terms(opcost.geometry(dep), step):
        total = total + term_time_s(term, rate=rate)
    return total


def decode_step_s(dep: Deployment, *, batch: int, ctx_tokens: int) -> float:
    """Seconds of one decode step (TPOT without speculation) at `batch` sequences of `ctx_tokens` each."""
    return float(decode_step_s_grid(dep, batch=batch, ctx_tokens=ctx_tokens))


def bound_of(*, transfer_s: float, compute_s: float, overhead_s: float, resource: str) -> Bound:
    """Which of the three time components is largest ("interconnect" for a link-bound all-reduce)."""
    if overhead_s > max(transfer_s, compute_s):
        return "overhead"
    if compute_s > transfer_s:
        return "compute"
    return "interconnect" if resource == "link" else "memory"


def ledger_op(term: Term, *, rate: Rates, chunks: int) -> Op:
    """Sum one term over the passes (prefill chunks, or the single decode step) into a ledger row."""
    transfer, compute, overhead = term_seconds(term, rate=rate)
    time_s = float(np.sum(np.maximum(transfer, compute) + overhead))
    transfer_s, compute_s, overhead_s = (
        float(np.sum(transfer)),
        float(np.sum(compute)),
        float(np.sum(overhead)),
    )
    return Op(
        name=term.name,
        layers=term.layers,
        kernels=term.kernels * chunks,
        bytes=float(np.sum(term.bytes)),
        flop=float(np.sum(term.flop)),
        compute_dtype=term.compute_dtype,
        transfer_s=transfer_s,
        compute_s=compute_s,
        overhead_s=overhead_s,
        time_s=time_s,
        bound=bound_of(
            transfer_s=transfer_s, compute_s=compute_s, overhead_s=overhead_s, resource=term.resource
        ),
    )


def step_overhead_op(rate: Rates, *, passes: int) -> Op:
    """The fixed per-pass cost (sampling, scheduling, host sync): passes * step_overhead_s."""
    overhead = passes * rate.step_overhead_s
    return Op(
        name="step.overhead",
        layers=0,
        kernels=0,
        bytes=0.0,
        flop=0.0,
        compute_dtype="-",
        transfer_s=0.0,
        compute_s=0.0,
        overhead_s=overhead,
        time_s=overhead,
        bound="overhead",
    )


def assemble_ledger(
    dep: Deployment,
    *,
    step: Step,
    chunks: int,
    phase: Literal["decode", "prefill"],
    lengths: tuple[int, int, int],
) -> Ledger:
    """Build a Ledger from a (possibly multi-chunk) pass; lengths = (batch, ctx_tokens, query_tokens)."""
    rate = rates(dep)
    terms = opcost.step_terms(opcost.geometry(dep), step)
    ops = [ledger_op(t, rate=rate, chunks=chunks) for t in terms]
    ops.append(step_overhead_op(rate, passes=chunks))
    link = [t.name for t in terms if t.resource == "link"]
    return Ledger(
        phase=phase,
        batch=lengths[0],
        ctx_tokens=lengths[1],
        query_tokens=lengths[2],
        chunks=chunks,
        ops=ops,
        hbm_bytes=sum(o.bytes for o in ops if o.name not in link),
        link_bytes=sum(o.bytes for o in ops if o.name in link),
        flop=sum(o.flop for o in ops),
        time_s=sum(o.time_s for o in ops),
        calibrated=is_calibrated(dep),
    )


def decode_ledger(dep: Deployment, *, batch: int, ctx_tokens: int) -> Ledger:
    """Per-op ledger of one decode step; its time_s equals decode_step_s (same formulas)."""
    step = decode_step(dep, batch=np.asarray(float(batch)), ctx_tokens=np.asarray(float(ctx_tokens)))
    return assemble_ledger(
        dep, step=step, chunks=1, phase="decode", lengths=(batch, ctx_tokens, int(step.tokens))
    )


def prefill_chunks(prompt_tokens: int, *, max_prefill_tokens: int) -> tuple[list[int], list[int]]:
    """(chunk lengths, prefix before each chunk) of a prompt split by max_prefill_tokens.

    Formula: ceil(T / C) chunks of C tokens, the last one T - (chunks - 1) * C; prefix_i = i * C.
    """
    chunks = math.ceil(prompt_tokens / max_prefill_tokens)
    lengths = [max_prefill_tokens] * (chunks - 1) + [prompt_tokens - (chunks - 1) * max_prefill_tokens]
    prefixes = [i * max_prefill_tokens for i in range(chunks)]
    return lengths, prefixes


def prefill_step(dep: Deployment, *, prompt_tokens: int) -> Step:
    """The passes of a chunked prefill of one prompt, one array element per chunk.

    Formula per chunk i of c_i tokens after p_i prefix tokens: tokens = c_i, 1 sequence, cached = p_i,
    attended = p_i + (c_i + 1) / 2 (causal), logits only for the last token; one MTP pass per chunk when on.
    """
    lengths, prefixes = prefill_chunks(prompt_tokens, max_prefill_tokens=dep.max_prefill_tokens)
    tokens = np.asarray(lengths, dtype=np.float64)
    prefix = np.asarray(prefixes, dtype=np.float64)
    last = np.zeros_like(tokens)
    last[-1] = 1.0
    return Step(
        tokens=tokens,
        sequences=np.ones_like(tokens),
        cached_tokens=prefix,
        attended_tokens=prefix + (tokens + 1.0) / 2.0,
        logits_tokens=last,
        draft_runs=1 if dep.include_mtp else 0,
        draft_tokens=tokens,
        draft_logits=last,
    )


def prefill_ledger(dep: Deployment, *, prompt_tokens: int) -> Ledger:
    """Per-op ledger of the whole chunked prefill of one prompt (ops summed over chunks)."""
    step = prefill_step(dep, prompt_tokens=prompt_tokens)
    chunks = int(step.tokens.size)
    return assemble_ledger(
        dep, step=step, chunks=chunks, phase="prefill", lengths=(1, prompt_tokens, prompt_tokens)
    )


def ttft_s(dep: Deployment, *, prompt_tokens: int) -> float:
    """Time to first token of one prompt on an idle engine: the chunked prefill (it ends with the logits).

    Formula: sum over chunks of (sum over ops of term_time_s + step_overhead_s). Queueing behind other
    requests' decode steps is added by serving.py, not here.
    """
    return prefill_ledger(dep, prompt_tokens=prompt_tokens).time_s
