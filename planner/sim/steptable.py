"""Step times for the simulator, precomputed once on grids from the planner's roofline (no second model).

decode[b][j]   seconds of one decode step of b sequences (b = 1..max_batch) at mean context ctx_axis[j]:
               planner.perf.roofline.decode_step_s_grid, vectorised over the whole grid.
pass_[i][j]    seconds of one prefill pass of tokens_axis[i] query tokens whose mean attended keys are
               attended_axis[j]: the same ledger terms (opcost.step_terms + term_time_s + step overhead)
               on a prefill Step, so a one-chunk prompt costs exactly roofline.ttft_s.
Lookups interpolate linearly between grid points with plain-Python bisect (a few microseconds each:
the simulation loop calls them once per event).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from planner.deployment import Deployment
from planner.perf import opcost, prefill, roofline
from planner.perf.mtp import tokens_per_step
from planner.perf.opcost import FloatArray, Step

GRID_POINTS_PER_DOUBLING = 4  # interpolation nodes per factor of 2 (step time is near-linear between)


def geometric_axis(high: float) -> list[float]:
    """1, 2^(1/g), 2^(2/g), ... up to and including `high` (g = GRID_POINTS_PER_DOUBLING)."""
    count = int(np.ceil(np.log2(max(high, 2.0)) * GRID_POINTS_PER_DOUBLING)) + 1
    axis = np.unique(np.round(np.exp2(np.arange(count) / GRID_POINTS_PER_DOUBLING)))
    return [float(v) for v in axis[axis < high]] + [float(high)]


def prefill_pass(dep: Deployment, *, tokens: FloatArray, attended: FloatArray) -> Step:
    """A prefill pass of `tokens` query tokens attending `attended` keys each on average (broadcast).

    Formula: cached = max(attended - (tokens + 1) / 2, 0) (the prefix a chunk reads from the cache; 0 for
    fresh prompts batched together); logits for 1 row; one MTP draft pass over the tokens when MTP is on.
    """
    cached = np.maximum(attended - (tokens + 1.0) / 2.0, 0.0)
    ones = np.ones(np.broadcast_shapes(tokens.shape, attended.shape))
    return Step(
        tokens=tokens * ones,
        sequences=ones,
        cached_tokens=cached * ones,
        attended_tokens=attended * ones,
        logits_tokens=ones,
        draft_runs=1 if dep.include_mtp else 0,
        draft_tokens=tokens * ones,
        draft_logits=ones,
    )


def pass_s_grid(dep: Deployment, *, tokens: FloatArray, attended: FloatArray) -> FloatArray:
    """Seconds of prefill passes over broadcast arrays (roofline.decode_step_s_grid's sum on a prefill Step).

    Formula: pass_s = sum over ops of term_time_s(tokens) + step_overhead_s + prefill_pass_overhead_s, the
    ops at the card's measured prefill rates where it has them (prefill.measured_prefill_terms, as TTFT)
    """
    rate = roofline.rates(dep)
    step = prefill_pass(dep, tokens=tokens, attended=attended)
    total = np.full(step.tokens.shape, rate.step_overhead_s + rate.prefill_pass_overhead_s)
    geo = roofline.geometry(dep)
    terms = prefill.measured_prefill_terms(dep, geo, opcost.step_terms(geo, step), tokens=step.tokens)
    for term in terms:
        total = total + roofline.term_time_s(term, rate=rate, tokens=step.tokens)
    return total


@dataclass(frozen=True)
class StepTable:
    """Decode and prefill-pass grids of one deployment; seconds looked up by interpolation."""

    ctx_axis: list[float]
    decode: list[list[float]]  # [batch - 1][ctx index]
    tokens_axis: list[float]
    attended_axis: list[float]
    pass_: list[list[float]]  # [tokens index][attended index]
    tokens_per_step: float  # expected tokens a sequence gains per decode step (MTP acceptance)
    query_tokens_per_step: int  # tokens each sequence feeds a decode step: 1 + draft
    # per request outside the forward pass (roofline.request_overhead_s): the engine sees a request this long
    # after its client sent it; TTFT counts from the send, and no step pays it
    request_overhead_s: float = 0.0

    def decode_s(self, batch: int, ctx_tokens: float) -> float:
        """Decode step seconds at `batch` sequences of mean context `ctx_tokens` (linear in ctx)."""
        return _interp(self.ctx_axis, self.decode[batch - 1], ctx_tokens)

    def pass_s(self, tokens: float, attended: float) -> float:
        """Prefill pass seconds (bilinear in tokens and attended keys)."""
        i, fi = _cell(self.tokens_axis, tokens)
        j, fj = _cell(self.attended_axis, attended)
        low, high = self.pass_[i], self.pass_[i + 1]
        first = low[j] + (low[j + 1] - low[j]) * fj
        second = high[j] + (high[j + 1] - high[j]) * fj
        return first + (second - first) * fi

    def mixed_s(self, batch: int, ctx_tokens: float, prefill: tuple[float, float]) -> float:
        """A vLLM step that decodes `batch` sequences and prefills (tokens, mean attended) in one pass.

        Formula: pass_s(prefill tokens + batch * q, attended) + decode_s(batch, ctx) - decode_s(batch, 1):
        the weights are streamed once for every token of the step; the decode sequences add their KV reads.
        """
        tokens, attended = prefill
        if batch == 0:
            return self.pass_s(tokens, attended)
        kv_read_s = self.decode_s(batch, ctx_tokens) - self.decode_s(batch, 1.0)
        return self.pass_s(tokens + batch * self.query_tokens_per_step, attended) + max(kv_read_s, 0.0)


def _cell(axis: list[float], value: float) -> tuple[int, float]:
    """Index i of the grid cell [axis[i], axis[i+1]] holding value (clamped) and the fraction inside."""
    i = min(max(bisect.bisect_right(axis, value) - 1, 0), len(axis) - 2)
    low, high = axis[i], axis[i + 1]
    return i, min(max((value - low) / (high - low), 0.0), 1.0)


def _interp(axis: list[float], values: list[float], value: float) -> float:
    i, fraction = _cell(axis, value)
    return values[i] + (values[i + 1] - values[i]) * fraction


def build(dep: Deployment, *, max_batch: int, max_ctx_tokens: int, max_pass_tokens: int) -> StepTable:
    """Grids covering batches 1..max_batch, contexts to max_ctx_tokens and passes to max_pass_tokens."""
    ctx_axis = geometric_axis(max_ctx_tokens + 1)
    batch = np.arange(1, max_batch + 1, dtype=np.float64)[:, None]
    decode = roofline.decode_step_s_grid(dep, batch=batch, ctx_tokens=np.asarray(ctx_axis)[None, :])
    tokens_axis = geometric_axis(max_pass_tokens + max_batch * (1 + dep.mtp_tokens))
    attended_axis = geometric_axis(max_ctx_tokens + 1)
    grid = pass_s_grid(
        dep, tokens=np.asarray(tokens_axis)[:, None], attended=np.asarray(attended_axis)[None, :]
    )
    return StepTable(
        ctx_axis=ctx_axis,
        decode=decode.tolist(),
        tokens_axis=tokens_axis,
        attended_axis=attended_axis,
        pass_=grid.tolist(),
        tokens_per_step=tokens_per_step(dep),
        query_tokens_per_step=1 + (dep.mtp_tokens if dep.include_mtp else 0),
        request_overhead_s=roofline.request_overhead_s(dep),
    )
