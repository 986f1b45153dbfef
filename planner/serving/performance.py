"""Serving-level estimates on top of the roofline: speculative decoding, the Performance block, the batch
knee and SLO search. What a benchmark client at fixed concurrency sees (closed loop, prefill interleaved with
decode) is planner/serving/closed_loop.py.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from planner.deployment import Deployment
from planner.perf import roofline
from planner.perf.mtp import speculative_tokens_per_step as speculative_tokens_per_step
from planner.perf.mtp import tokens_per_step as tokens_per_step
from planner.perf.mtp import tpot_s
from planner.results import Performance

Binding = Literal["memory", "tpot", "ttft", "min-user-tps"]

# The knee is the smallest batch b at which doubling the batch buys less than this factor of aggregate
# throughput: tps(2b) < KNEE_DOUBLING_GAIN * tps(b).  [assumed: a definition, not a measurement; with the
# seed's Qwen3-27B numbers (b=32: ~220 tok/s, b=128: ~400 tok/s) it places the knee near 64, as the seed does]
KNEE_DOUBLING_GAIN = 1.25


def performance(dep: Deployment, *, batch: int, ctx_tokens: int, prompt_tokens: int) -> Performance:
    """The Performance block at one batch: decode step, TPOT, per-user and aggregate tokens/s, TTFT.

    Formula: tpot_s = step_s / t (t = tokens_per_step, mtp.tpot_s); per_user = 1 / tpot_s;
    aggregate = batch * per_user;
    ttft = roofline.ttft_s(prompt_tokens) on an idle engine; request_overhead_s, what a client's TTFT adds.
    """
    step_s = roofline.decode_step_s(dep, batch=batch, ctx_tokens=ctx_tokens)
    per_step = tokens_per_step(dep)
    return Performance(
        batch=batch,
        ctx_tokens=ctx_tokens,
        decode_step_s=step_s,
        tokens_per_step=per_step,
        tpot_s=tpot_s(step_s, tokens_per_step=per_step),
        ttft_s=roofline.ttft_s(dep, prompt_tokens=prompt_tokens),
        calibrated=roofline.is_calibrated(dep),
        ttft_prompt_tokens=prompt_tokens,
        request_overhead_s=roofline.request_overhead_s(dep),
    )


def batch_knee(dep: Deployment, *, ctx_tokens: int, max_batch: int) -> int:
    """Smallest batch b <= max_batch / 2 with tps(2b) < KNEE_DOUBLING_GAIN * tps(b); max_batch if none.

    Formula: tps(b) = b / decode_step_s(b, ctx) (speculation scales every batch alike, so it cancels).
    """
    if max_batch < 2:
        return max(max_batch, 1)
    batch = np.arange(1, max_batch // 2 + 1, dtype=np.float64)
    step_s = roofline.decode_step_s_grid(dep, batch=np.concatenate([batch, 2 * batch]), ctx_tokens=ctx_tokens)
    tps = np.concatenate([batch, 2 * batch]) / step_s
    gain = tps[batch.size :] / tps[: batch.size]
    below = np.nonzero(gain < KNEE_DOUBLING_GAIN)[0]
    return int(batch[below[0]]) if below.size else max_batch
