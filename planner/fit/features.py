"""The roofline's time of a pass as a cheap function of the fitted terms: the fit's inner loop.

For one pass (a decode step over a grid of batch x ctx, or the chunks of a prefill), every term's bytes, FLOP
and kernel counts are fixed; only the rates the coefficients set change. PassFeatures holds those fixed
quantities (one row per pass, one column per opcost term) and `pass_times` re-evaluates the formulas of
roofline.term_seconds for new coefficients in a few numpy operations. tests/test_fit.py checks pass_times
against the roofline at random coefficients: the same speed model, only cached.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.arrays import FloatArray
from planner.deployment import Deployment
from planner.perf import links, opcost, roofline
from planner.perf.attention import attention_bytes_per_s
from planner.perf.opcost import Step
from planner.perf.prefill import CHUNKED_GDN_TERM, chunked_gdn_term, prefill_pass_step
from planner.schema import PerfCoefficients
from planner.serving.estimate import DeploymentTimer
from planner.units import us_to_s

BANDWIDTH_RESOURCES = ("hbm", "kv", "state", "experts")  # scaled by a fitted fraction; others fixed
RESOURCES = (*BANDWIDTH_RESOURCES, "")  # PassFeatures.resource_index counts in this order
IntArray = npt.NDArray[np.intp]


@dataclass(frozen=True)
class PassFeatures:
    """Fixed quantities of P passes x T terms (see module docstring); SI units."""

    bytes: FloatArray  # bytes through the term's bandwidth resource (table-timed cache reads excluded)
    resource: tuple[str, ...]  # per term: hbm, kv, state, experts, or "" (fixed transfer only)
    fixed_transfer_s: FloatArray  # table-timed attention reads, all-reduce transfers
    flop: FloatArray  # timed at the dtype's peak x compute_fraction
    attention_flop: FloatArray  # prefill attention's: also x prefill_attention_fraction
    fixed_compute_s: FloatArray  # terms with a measured prefill rate: their compute seconds
    linear_attention_s: FloatArray  # chunked GDN prefill seconds at its measured rate: / its fraction
    compute_dtype: tuple[str, ...]
    fixed_overhead_s: FloatArray  # grouped-GEMM latencies, collectives between nodes
    node_collectives: FloatArray  # collectives inside one node (each pays allreduce_latency)
    matmuls: FloatArray  # dense matmul calls (each pays matmul_latency)
    small_kernels: FloatArray  # other kernels x the measured cost ratio at the pass's tokens
    passes: FloatArray  # per row: step overheads paid
    prefill_passes: FloatArray  # per row: prefill-pass overheads paid (1 on a prefill chunk, 0 on decode)
    sequences: FloatArray  # per row: sequences paying the per-sequence cost
    bandwidth_bytes_per_s: float
    peak_flop_per_s: dict[str, float]
    resource_index: IntArray  # per term: its resource's position in RESOURCES
    dtypes: tuple[str, ...]  # the distinct compute dtypes;  dtype_index: per term, its position in dtypes
    dtype_index: IntArray


def _column(value: FloatArray | float, rows: int) -> FloatArray:
    return np.broadcast_to(np.asarray(value, dtype=np.float64), (rows,)).astype(np.float64)


def _term_parts(
    term: opcost.Term, rate: roofline.Rates, tokens: FloatArray, rows: int, tied: bool
) -> tuple[dict[str, FloatArray], str]:
    """One term's fixed parts, mirroring roofline.term_seconds (tied: grouped GEMMs pay matmul_latency)."""
    table = 0
    fixed = np.zeros(rows)
    moved = _column(term.bytes, rows)
    resource: str = term.resource if term.resource in BANDWIDTH_RESOURCES else "hbm"
    latency_s, node_collectives = 0.0, float(term.collectives)
    if term.resource in links.COLLECTIVE_RESOURCES:
        transfer, latency_s = links.collective_seconds(rate.link_rates, term, tp=rate.tp)
        fixed, moved, resource = _column(transfer, rows), np.zeros(rows), ""
        if term.resource not in rate.link_rates.node_resources:  # the datasheet's inter-node latency
            node_collectives = 0.0
    elif term.attention is not None and rate.attention is not None:
        lookup = term.attention
        speed = attention_bytes_per_s(rate.attention, rows=lookup.rows, ctx_tokens=lookup.ctx_tokens)
        fixed = _column(lookup.read_bytes / np.minimum(speed, rate.peak_bytes_per_s), rows)
        moved, resource, table = moved - _column(lookup.read_bytes, rows), "hbm", lookup.kernels
    flop, fixed_compute = _column(term.flop, rows), np.zeros(rows)
    if term.flop_per_s is not None:  # a measured rate: fixed seconds, not scaled by compute_fraction
        flop, fixed_compute = np.zeros(rows), _column(term.flop / term.flop_per_s, rows)
    separate = term.resource == "experts" and not tied
    grouped = term.matmuls * rate.grouped_matmul_latency_s if separate else 0.0
    ratio = np.asarray(roofline.small_kernel_s(rate, tokens=tokens)) / max(rate.kernel_overhead_s, 1e-300)
    return {
        "bytes": moved,
        "fixed_transfer_s": fixed,
        "flop": flop,
        "fixed_compute_s": fixed_compute,
        "fixed_overhead_s": _column(grouped + (term.collectives - node_collectives) * latency_s, rows),
        "node_collectives": _column(node_collectives, rows),
        "matmuls": _column(0.0 if separate else float(term.matmuls), rows),
        "small_kernels": _column((term.kernels - term.matmuls - table) * ratio, rows),
    }, resource


def features(
    dep: Deployment, step: Step, *, rows: int, sequences: FloatArray, prefill: bool = False
) -> PassFeatures:
    """PassFeatures of `rows` passes of `step` (a decode grid, or prefill chunks when `prefill`), at dep's
    coefficients."""
    rate = roofline.rates(dep)
    if rate.kernel_overhead_s <= 0:
        rate = roofline.rates(_with_kernel_overhead(dep))
    coeff = dep.hardware.coefficients(calibrated=dep.calibrated)
    terms = opcost.step_terms(roofline.geometry(dep), step)
    if prefill:  # the roofline's prefill times gdn.update at the measured chunked rate too (prefill.py),
        # kept at fraction 1 here: pass_times divides by the fitted prefill_linear_attention_fraction
        measured = coeff.model_copy(update={"prefill_linear_attention_fraction": 1.0})
        terms = [chunked_gdn_term(dep, measured, t, tokens=step.tokens) for t in terms]
    tied = coeff.grouped_matmul_latency_us is None
    parts = [_term_parts(t, rate, step.tokens, rows, tied) for t in terms]
    stack = {k: np.stack([p[0][k] for p in parts], axis=1) for k in parts[0][0]}
    stack["flop"], stack["attention_flop"] = _split_attention_flop(terms, stack["flop"], prefill=prefill)
    is_gdn = np.asarray([prefill and t.name == CHUNKED_GDN_TERM for t in terms], dtype=bool)
    stack["linear_attention_s"] = np.where(is_gdn, stack["fixed_compute_s"], 0.0)
    stack["fixed_compute_s"] = np.where(is_gdn, 0.0, stack["fixed_compute_s"])
    dtypes = tuple(dict.fromkeys(t.compute_dtype for t in terms))
    return PassFeatures(
        bytes=stack["bytes"],
        resource=tuple(p[1] for p in parts),
        fixed_transfer_s=stack["fixed_transfer_s"],
        flop=stack["flop"],
        attention_flop=stack["attention_flop"],
        fixed_compute_s=stack["fixed_compute_s"],
        linear_attention_s=stack["linear_attention_s"],
        compute_dtype=tuple(t.compute_dtype for t in terms),
        fixed_overhead_s=stack["fixed_overhead_s"],
        node_collectives=stack["node_collectives"],
        matmuls=stack["matmuls"],
        small_kernels=stack["small_kernels"],
        passes=np.ones(rows),
        prefill_passes=np.full(rows, 1.0 if prefill else 0.0),
        sequences=_column(sequences, rows),
        bandwidth_bytes_per_s=rate.peak_bytes_per_s,
        peak_flop_per_s={d: dep.hardware.peak_flop_per_s(d) for d in dep.hardware.peak_tflop_per_s},
        resource_index=np.asarray([RESOURCES.index(p[1]) for p in parts], dtype=np.intp),
        dtypes=dtypes,
        dtype_index=np.asarray([dtypes.index(t.compute_dtype) for t in terms], dtype=np.intp),
    )


def _split_attention_flop(
    terms: list[opcost.Term], flop: FloatArray, *, prefill: bool
) -> tuple[FloatArray, FloatArray]:
    """(flop, attention_flop): a prefill pass's attention terms' FLOP (prefill.prefill_attention_term) moved
    to their own column; decode passes keep all their FLOP in `flop`."""
    is_attention = np.asarray([prefill and t.attention is not None for t in terms], dtype=bool)
    return np.where(is_attention, 0.0, flop), np.where(is_attention, flop, 0.0)


ROW_FIELDS = (  # PassFeatures' per-row arrays (P x T or P), concatenated by `stack`
    "bytes",
    "fixed_transfer_s",
    "flop",
    "attention_flop",
    "fixed_compute_s",
    "linear_attention_s",
    "fixed_overhead_s",
    "node_collectives",
    "matmuls",
    "small_kernels",
    "passes",
    "prefill_passes",
    "sequences",
)


def stack(parts: list[PassFeatures]) -> PassFeatures | None:
    """The rows of several PassFeatures of one deployment as one (None when their term lists differ)."""
    first = parts[0]
    same = all(
        np.array_equal(p.resource_index, first.resource_index) and p.compute_dtype == first.compute_dtype
        for p in parts
    )
    if not same:
        return None
    rows: dict[str, Any] = {name: np.concatenate([getattr(p, name) for p in parts]) for name in ROW_FIELDS}
    return dataclasses.replace(first, **rows)


def _with_kernel_overhead(dep: Deployment) -> Deployment:
    """The deployment with a nominal kernel overhead, so the small-kernel ratio can be read off the rate."""
    coeff = dep.hardware.coefficients(calibrated=dep.calibrated).model_copy(
        update={"kernel_overhead_us": 1.0}
    )
    hw = dep.hardware.model_copy(update={"default_coefficients": coeff, "measured": None})
    return dep.model_copy(update={"hardware": hw, "calibrated": False})


def pass_times(f: PassFeatures, c: PerfCoefficients) -> FloatArray:
    """Seconds of every row under coefficients c (roofline.term_seconds' formulas on the fixed parts).

    Formula per row: sum_t max(bytes_t / (BW * frac_t) + fixed_t,
                               flop_t / (peak_t cf_t) + aflop_t / (peak_t cf_t f_attn) + fixed_compute_t
                               + gdn_t / f_lin)
                     + fixed_overhead_t + small_kernels_t * kernel_overhead + matmuls_t * matmul_latency
                     + node_collectives_t * allreduce_latency
                     + passes * step_overhead + prefill_passes * prefill_pass_overhead
                     + sequences * sequence_overhead
    aflop prefill attention's FLOP, f_attn prefill_attention_fraction; gdn chunked-GDN prefill seconds at
    the measured rate, f_lin prefill_linear_attention_fraction.
    """
    fraction = np.array(  # in RESOURCES order: hbm, kv, state, experts, "" (fixed transfer only)
        [
            c.weight_read_bandwidth_fraction,
            c.kv_read_bandwidth_fraction,
            c.state_read_bandwidth_fraction or c.kv_read_bandwidth_fraction,
            c.grouped_weight_read_bandwidth_fraction or c.weight_read_bandwidth_fraction,
            1.0,
        ]
    )
    inverse = 1.0 / (f.bandwidth_bytes_per_s * fraction[f.resource_index])
    rates = np.array([f.peak_flop_per_s[d] * c.compute_fraction[d] for d in f.dtypes])
    flop_rate = rates[f.dtype_index]
    transfer = f.bytes * inverse + f.fixed_transfer_s
    compute = f.flop / flop_rate + f.attention_flop / (flop_rate * c.prefill_attention_fraction)
    compute = compute + f.fixed_compute_s + f.linear_attention_s / c.prefill_linear_attention_fraction
    terms = np.maximum(transfer, compute) + f.fixed_overhead_s
    terms = terms + f.small_kernels * us_to_s(c.kernel_overhead_us) + f.matmuls * us_to_s(c.matmul_latency_us)
    terms = terms + f.node_collectives * us_to_s(c.allreduce_latency_us)
    fixed = f.passes * us_to_s(c.step_overhead_us) + f.sequences * us_to_s(c.sequence_overhead_us)
    fixed = fixed + f.prefill_passes * us_to_s(c.prefill_pass_overhead_us)
    return np.asarray(np.sum(terms, axis=1) + fixed, dtype=np.float64)


@dataclass
class FeatureTimer(roofline.PromptAccounting, DeploymentTimer):
    """Timer over cached PassFeatures of one deployment; `coefficients` set per evaluation."""

    dep: Deployment
    coefficients: PerfCoefficients
    cache: dict[tuple[str, int, int], PassFeatures] = field(default_factory=dict)
    # seconds already worked out under `timed_for` (the closed loop asks for some passes more than once)
    timed: dict[tuple[str, int, int], float] = field(default_factory=dict)
    timed_for: PerfCoefficients | None = None
    stacked: tuple[tuple[tuple[str, int, int], ...], PassFeatures | None] = ((), None)

    def prime(self, coefficients: PerfCoefficients) -> None:
        """Set the coefficients and time every pass seen so far in one pass_times call (the fit's hot loop:
        the closed loop then reads the results instead of timing passes one by one)."""
        self.coefficients = coefficients
        keys = tuple(self.cache)
        if not keys:
            return
        if self.stacked[0] != keys:
            self.stacked = (keys, stack([self.cache[k] for k in keys]))
        combined = self.stacked[1]
        if combined is None:  # passes with different term lists: timed one by one
            return
        starts = np.cumsum([0] + [self.cache[k].passes.size for k in keys[:-1]])
        seconds = np.add.reduceat(pass_times(combined, coefficients), starts)
        self.timed, self.timed_for = dict(zip(keys, seconds.tolist(), strict=True)), coefficients

    def _seconds(self, key: tuple[str, int, int], features_of: Callable[[], PassFeatures]) -> float:
        """Total seconds of the cached pass `key` under the current coefficients (features built once)."""
        if self.timed_for is not self.coefficients:
            self.timed, self.timed_for = {}, self.coefficients
        if key not in self.timed:
            if key not in self.cache:
                self.cache[key] = features_of()
            self.timed[key] = float(np.sum(pass_times(self.cache[key], self.coefficients)))
        return self.timed[key]

    @property
    def request_overhead_s(self) -> float:
        return us_to_s(self.coefficients.request_overhead_us)

    def decode_step_s(self, *, batch: int, ctx_tokens: int) -> float:
        def build() -> PassFeatures:
            b, c = np.asarray([float(batch)]), np.asarray([float(ctx_tokens)])
            step = roofline.decode_step(self.dep, batch=b, ctx_tokens=c)
            return features(self.dep, step, rows=1, sequences=b)

        return self._seconds(("decode", batch, ctx_tokens), build)

    def prefill_s(self, *, prompts: int, prompt_tokens: int) -> float:
        def build() -> PassFeatures:
            cached = roofline.cached_prompt_tokens(self.dep, prompt_tokens=prompt_tokens)
            step = prefill_pass_step(
                self.dep, prompts=prompts, prompt_tokens=prompt_tokens, cached_tokens=cached
            )
            return features(self.dep, step, rows=step.tokens.size, sequences=step.sequences, prefill=True)

        return self._seconds(("prefill", prompts, prompt_tokens), build)
