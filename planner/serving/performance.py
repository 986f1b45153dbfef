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
from planner.results import Performance
from planner.schema import Frozen

Binding = Literal["memory", "tpot", "ttft", "min-user-tps"]

# The knee is the smallest batch b at which doubling the batch buys less than this factor of aggregate
# throughput: tps(2b) < KNEE_DOUBLING_GAIN * tps(b).  [assumed: a definition, not a measurement; with the
# seed's Qwen3-27B numbers (b=32: ~220 tok/s, b=128: ~400 tok/s) it places the knee near 64, as the seed does]
KNEE_DOUBLING_GAIN = 1.25


def performance(dep: Deployment, *, batch: int, ctx_tokens: int, prompt_tokens: int) -> Performance:
    """The Performance block at one batch: decode step, per-user and aggregate tokens/s, TTFT.

    Formula: per_user = t / step_s (t = tokens_per_step); aggregate = batch * per_user;
    ttft = roofline.ttft_s(prompt_tokens) on an idle engine.
    """
    step_s = roofline.decode_step_s(dep, batch=batch, ctx_tokens=ctx_tokens)
    per_user = tokens_per_step(dep) / step_s
    return Performance(
        batch=batch,
        ctx_tokens=ctx_tokens,
        decode_step_s=step_s,
        tokens_per_s=batch * per_user,
        per_user_tokens_per_s=per_user,
        ttft_s=roofline.ttft_s(dep, prompt_tokens=prompt_tokens),
        calibrated=roofline.is_calibrated(dep),
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


class SloResult(Frozen):
    """The largest batch that meets every SLO and fits memory (throughput grows with batch).

    binding: what stops a larger batch; feasible False means even batch 1 misses an SLO (batch 0).
    tpot_s is time per output token (step / tokens_per_step); loaded_ttft_s = prefill + one decode step
    (a new prompt waits for the in-flight step).
    """

    feasible: bool
    batch: int
    max_seq_len: int
    binding: Binding
    tpot_s: float | None
    loaded_ttft_s: float | None
    performance: Performance | None


def slo_checks(dep: Deployment, *, batch: np.ndarray, prompt_tokens: int) -> dict[str, np.ndarray]:
    """Per-batch tpot_s, per-user tok/s and loaded TTFT at the deployment's ctx (every sequence full).

    Formula: tpot = step / t;  per_user = t / step;  loaded_ttft = ttft(prompt) + step
    """
    step_s = roofline.decode_step_s_grid(dep, batch=batch, ctx_tokens=dep.ctx_tokens)
    per_step = tokens_per_step(dep)
    return {
        "tpot": step_s / per_step,
        "min-user-tps": per_step / step_s,
        "ttft": roofline.ttft_s(dep, prompt_tokens=prompt_tokens) + step_s,
    }


def search_slo(
    dep: Deployment,
    *,
    tpot_s: float | None,
    ttft_s: float | None,
    min_user_tokens_per_s: float | None,
    max_batch_by_memory: int,
    prompt_tokens: int,
) -> SloResult:
    """Pick the batch that maximises aggregate throughput under the SLOs and the memory limit.

    Formula: feasible(b) = tpot(b) <= tpot_s and ttft(b) <= ttft_s and per_user(b) >= min_user and
    b <= max_batch_by_memory; best = the largest feasible b (step time is monotone in b, so every SLO
    holds on a prefix of batches). binding = the first SLO that fails at best + 1, else "memory".
    """
    if max_batch_by_memory < 1:
        return SloResult(
            feasible=False,
            batch=0,
            max_seq_len=dep.ctx_tokens,
            binding="memory",
            tpot_s=None,
            loaded_ttft_s=None,
            performance=None,
        )
    batch = np.arange(1, max_batch_by_memory + 1, dtype=np.float64)
    checks = slo_checks(dep, batch=batch, prompt_tokens=prompt_tokens)
    ok = {
        "tpot": checks["tpot"] <= tpot_s if tpot_s is not None else np.ones(batch.size, dtype=bool),
        "ttft": checks["ttft"] <= ttft_s if ttft_s is not None else np.ones(batch.size, dtype=bool),
        "min-user-tps": (
            checks["min-user-tps"] >= min_user_tokens_per_s
            if min_user_tokens_per_s is not None
            else np.ones(batch.size, dtype=bool)
        ),
    }
    return _slo_result(dep, checks=checks, ok=ok, prompt_tokens=prompt_tokens)


def _slo_result(
    dep: Deployment, *, checks: dict[str, np.ndarray], ok: dict[str, np.ndarray], prompt_tokens: int
) -> SloResult:
    """Largest batch whose prefix of batches all pass; binding from the first failing batch."""
    every = ok["tpot"] & ok["ttft"] & ok["min-user-tps"]
    failing = np.nonzero(~every)[0]
    best = int(failing[0]) if failing.size else every.size  # batches 1..best all pass
    names: tuple[Binding, ...] = ("tpot", "ttft", "min-user-tps")
    binding: Binding = "memory"
    if failing.size:
        binding = next(name for name in names if not ok[name][failing[0]])
    if best == 0:
        return SloResult(
            feasible=False,
            batch=0,
            max_seq_len=dep.ctx_tokens,
            binding=binding,
            tpot_s=None,
            loaded_ttft_s=None,
            performance=None,
        )
    return SloResult(
        feasible=True,
        batch=best,
        max_seq_len=dep.ctx_tokens,
        binding=binding,
        tpot_s=float(checks["tpot"][best - 1]),
        loaded_ttft_s=float(checks["ttft"][best - 1]),
        performance=performance(dep, batch=best, ctx_tokens=dep.ctx_tokens, prompt_tokens=prompt_tokens),
    )
