"""Step times for the simulator, precomputed once on grids from the planner's roofline (no second model;
planner/sim/run.py step_table builds the grids, this module only looks them up).

decode[b][j]   seconds of one decode step of b sequences (b = 1..max_batch) at mean context ctx_axis[j]:
               planner.perf.roofline.decode_step_s_grid, vectorised over the whole grid.
pass_[i][j]    seconds of one prefill pass of tokens_axis[i] query tokens whose mean attended keys are
               attended_axis[j]: planner.perf.roofline.prefill_pass_s_grid on a prefill Step, so a
               one-chunk prompt costs exactly roofline.ttft_s (overheads and host floor included).
Lookups interpolate linearly between grid points with plain-Python bisect (a few microseconds each:
the simulation loop calls them once per event).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property


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
        i, fraction = _cell(self.ctx_axis, ctx_tokens)
        values = self.decode[batch - 1]
        return values[i] + (values[i + 1] - values[i]) * fraction

    @cached_property
    def decode_at_one_token_s(self) -> list[float]:
        """decode_s(b, 1.0) for b = 1..max_batch, index b - 1: mixed_s subtracts it on every mixed step."""
        return [self.decode_s(batch, 1.0) for batch in range(1, len(self.decode) + 1)]

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
        kv_read_s = self.decode_s(batch, ctx_tokens) - self.decode_at_one_token_s[batch - 1]
        return self.pass_s(tokens + batch * self.query_tokens_per_step, attended) + max(kv_read_s, 0.0)


def _cell(axis: list[float], value: float) -> tuple[int, float]:
    """Index i of the grid cell [axis[i], axis[i+1]] holding value (clamped) and the fraction inside.
    Comparisons, not min(max()): the same results (NaN and -0.0 pass through alike) without four builtin
    calls on a path the simulation loop takes several times an event."""
    i = bisect.bisect_right(axis, value) - 1
    if i < 0:
        i = 0
    elif i > len(axis) - 2:
        i = len(axis) - 2
    low = axis[i]
    fraction = (value - low) / (axis[i + 1] - low)
    if fraction < 0.0:
        return i, 0.0
    return i, (1.0 if fraction > 1.0 else fraction)
