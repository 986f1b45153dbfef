"""Grid evaluation: decode step time, throughput and memory fit over weight dtype x batch x context.

One roofline.decode_step_s_grid call per weight scheme evaluates the whole batch x context plane with
numpy broadcasting (10^5 points in a few milliseconds; benchmarks/bench_sweep.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from planner import capacity
from planner.deployment import Deployment
from planner.kinds import DEFAULT_ENGINE
from planner.perf import mtp, ranges, roofline
from planner.serving import performance


class SweepResult(BaseModel):
    """Arrays of shape (schemes, batches, contexts); axes in `weight_dtypes`, `batch`, `ctx_tokens`."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    model: str
    card: str
    kv_dtype: str
    tp: int
    calibrated: bool
    tokens_per_step: float
    weight_dtypes: tuple[str, ...]
    batch: npt.NDArray[np.int64]
    ctx_tokens: npt.NDArray[np.int64]
    decode_step_s: npt.NDArray[np.float64]
    tokens_per_s: npt.NDArray[np.float64]
    per_user_tokens_per_s: npt.NDArray[np.float64]
    fits_memory: npt.NDArray[np.bool_]
    decode_step_s_low: npt.NDArray[np.float64]  # the range of decode_step_s (ranges.factor_grid)
    decode_step_s_high: npt.NDArray[np.float64]
    # time per output token (mtp.tpot_s: decode_step_s / tokens_per_step) and its range
    tpot_s: npt.NDArray[np.float64]
    tpot_s_low: npt.NDArray[np.float64]
    tpot_s_high: npt.NDArray[np.float64]
    speed_band: ranges.SpeedBand  # source and notes, at the grid's largest batch and context
    dp: int = 1  # DP groups: batch and aggregate tok/s are one group's; the instance serves dp times them
    setup: str = ""  # what else the table's title names: ", engine vllm, dp=2 (batch per DP group)", ...


def fits_memory_grid(
    dep: Deployment, *, batch: npt.NDArray[np.int64], ctx_tokens: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """Whether `batch` sequences of `ctx_tokens` each fit one DP group (broadcast arrays).

    Formula: batch <= registry.max_batch_grid(memory plan, ctx): the engine's own accounting (MindIE's
    blocks, vLLM's pool, pp and MTP in the KV bytes per token), the grid
    capacity.max_batch_size reads (registry.max_batch_grid).
    """
    most = capacity.max_batch_grid(dep, capacity.memory_breakdown(dep), ctx_tokens=ctx_tokens)
    return np.asarray(batch <= most)


def with_scheme(dep: Deployment, *, weight_dtype: str) -> Deployment:
    """The same deployment with another weight scheme (re-validated)."""
    return Deployment.model_validate({**dict(dep), "weight_scheme_name": weight_dtype})


def sweep(
    dep: Deployment,
    *,
    batch: Sequence[int],
    ctx_tokens: Sequence[int],
    weight_dtypes: Sequence[str] | None = None,
) -> SweepResult:
    """Evaluate decode step time, aggregate and per-user tok/s and memory fit on the full grid.

    Formula per point: step = decode_step_s_grid; tpot = step / tokens_per_step (mtp.tpot_s);
    per_user = 1 / tpot; aggregate = batch * per_user; a time's range = time / [high, low]
    (ranges.factor_grid).
    """
    schemes = tuple(weight_dtypes) if weight_dtypes else (dep.weight_scheme_name,)
    batch_arr = np.asarray(batch, dtype=np.int64)
    ctx_arr = np.asarray(ctx_tokens, dtype=np.int64)
    per_step = performance.tokens_per_step(dep)
    steps, fits = [], []
    for scheme in schemes:
        scheme_dep = with_scheme(dep, weight_dtype=scheme)
        capacity.check_supported(scheme_dep)  # the layout, dtypes and drafts plan/serve refuse, refused alike
        steps.append(
            roofline.decode_step_s_grid(scheme_dep, batch=batch_arr[:, None], ctx_tokens=ctx_arr[None, :])
        )
        fits.append(fits_memory_grid(scheme_dep, batch=batch_arr[:, None], ctx_tokens=ctx_arr[None, :]))
    step_s = np.stack(steps)
    tpot_s = mtp.tpot_s(step_s, tokens_per_step=per_step)
    per_user = 1.0 / tpot_s
    low, high = ranges.factor_grid(dep, batch=batch_arr.tolist(), ctx_tokens=ctx_arr.tolist())
    return SweepResult(
        model=dep.model.id,
        card=dep.hardware.id,
        kv_dtype=dep.kv_dtype.value,
        tp=dep.tp,
        calibrated=roofline.is_calibrated(dep),
        tokens_per_step=per_step,
        weight_dtypes=schemes,
        batch=batch_arr,
        ctx_tokens=ctx_arr,
        decode_step_s=step_s,
        tokens_per_s=per_user * batch_arr[None, :, None],
        per_user_tokens_per_s=per_user,
        fits_memory=np.stack(fits),
        decode_step_s_low=step_s / high[None],
        decode_step_s_high=step_s / low[None],
        tpot_s=tpot_s,
        tpot_s_low=tpot_s / high[None],
        tpot_s_high=tpot_s / low[None],
        speed_band=ranges.speed_band(dep, batch=int(batch_arr.max()), ctx_tokens=int(ctx_arr.max())),
        dp=dep.dp,
        setup=setup_words(dep),
    )


def setup_words(dep: Deployment) -> str:
    """What the grid was evaluated with beyond model, card, KV dtype and tp, where it is not the default
    (MindIE, one device per degree, no drafts): ", engine vllm, dp=2 (batch per DP group), eagle3 x3"."""
    words = [f"engine {dep.engine}"] if dep.engine != DEFAULT_ENGINE else []
    words += [f"{name}={getattr(dep, name)}" for name in ("dp", "ep", "pp") if getattr(dep, name) > 1]
    if dep.dp > 1:
        words.append(f"batch per DP group, aggregate per DP group (the instance serves {dep.dp}x)")
    if dep.speculative_tokens:
        words.append(f"{dep.draft_method or 'mtp'} x{dep.speculative_tokens}")
    return "".join(f", {word}" for word in words)
