"""Decode-attention rates from a measured table (PerfCoefficients.attention_table), interpolated in log space.

Decode attention (query length 1) is far from a bandwidth roofline at small sizes: at batch 1 and a short
context its kernels' fixed cost dominates, and its parallel work items are sequences x KV heads. The table
holds measured rates (KV bytes read per second, fixed costs included) at points (batch, kv_heads, ctx); this
module puts them on a grid over rows = batch * kv_heads and ctx, and interpolates.

Grid: rows and ctx are the distinct measured values; a cell measured more than once takes the geometric mean
rate; a cell not measured (over the benchmark's byte cap) takes the nearest measured rate of its row
along ctx.
Monotone time: with unit time u = rows * ctx / rate (seconds per head_dim-byte, up to a constant), u is made
non-decreasing along rows and along ctx (running maximum), so predicted time never falls when batch or
context grows (noise in the measurement cannot break it).
Lookup: bilinear interpolation of log(rate) over (log rows, log ctx); outside the grid the coordinates are
clamped to its edge (the edge rate applies: time then scales with bytes).
Kernel choice: a profile may hold one table per decode-attention kernel (PerfCoefficients.attention_tables)
and, per engine and head_dim, the kernel that engine runs (attention_kernels); attention_table_for picks it,
keeping only the measured points of the head_dim nearest the model's. Otherwise the single attention_table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from planner.arrays import FloatArray
from planner.records import record
from planner.schema import AttentionRate, PerfCoefficients
from planner.units import gb_per_s_to_bytes_per_s


@record
class AttentionGrid:
    """log(rate in bytes/s) on a (rows, ctx) grid, both axes as log values, ascending."""

    log_rows: FloatArray
    log_ctx: FloatArray
    log_rate: FloatArray  # shape (rows, ctx)


def attention_kernel(coeff: PerfCoefficients, *, engine: str, head_dim: int) -> str | None:
    """Name of the decode-attention kernel `engine` runs at `head_dim` (nearest listed head_dim), or None
    when the profile states no choice for that engine (then the single attention_table applies)."""
    by_dim = (coeff.attention_kernels or {}).get(engine)
    if not by_dim:
        return None
    nearest = min(by_dim, key=lambda d: (abs(d - head_dim), d))
    return by_dim[nearest]


def attention_table_for(
    coeff: PerfCoefficients, *, engine: str, head_dim: int
) -> Sequence[AttentionRate] | None:
    """The measured decode-attention points that time `engine` at `head_dim`.

    With a kernel choice: that kernel's table, restricted to its points at the measured head_dim nearest
    `head_dim` (rates differ by head_dim: cuDNN is slower at 256 than at 128 on H200). Without one: the
    single attention_table, unfiltered (back-compat).
    """
    kernel = attention_kernel(coeff, engine=engine, head_dim=head_dim)
    if kernel is None or coeff.attention_tables is None:
        return coeff.attention_table
    table = coeff.attention_tables[kernel]
    nearest = min({p.head_dim for p in table}, key=lambda d: (abs(d - head_dim), d))
    return [p for p in table if p.head_dim == nearest]


def _filled(grid: FloatArray) -> FloatArray:
    """Fill NaN cells of each row from the nearest measured cell along ctx (lower ctx first)."""
    out = grid.copy()
    for row in out:
        known = np.flatnonzero(~np.isnan(row))
        missing = np.flatnonzero(np.isnan(row))
        if missing.size:
            nearest = known[np.abs(known[None, :] - missing[:, None]).argmin(axis=1)]
            row[missing] = row[nearest]
    return out


def attention_grid(table: Sequence[AttentionRate]) -> AttentionGrid:
    """Grid of measured rates with monotone unit time (see the module docstring).

    Formula per cell: rate = geometric mean of its points' rates (B/s); u = rows * ctx / rate;
    u <- running max along rows, then along ctx; rate = rows * ctx / u.
    """
    rows = np.array(sorted({p.batch * p.kv_heads for p in table}), dtype=np.float64)
    ctx = np.array(sorted({p.ctx_tokens for p in table}), dtype=np.float64)
    total = np.zeros((rows.size, ctx.size))
    count = np.zeros_like(total)
    for p in table:
        i, j = np.searchsorted(rows, p.batch * p.kv_heads), np.searchsorted(ctx, p.ctx_tokens)
        total[i, j] += np.log(gb_per_s_to_bytes_per_s(p.gb_per_s))
        count[i, j] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        log_rate = _filled(np.where(count > 0, total / np.maximum(count, 1), np.nan))
    log_size = np.log(rows)[:, None] + np.log(ctx)[None, :]
    log_unit = np.maximum.accumulate(np.maximum.accumulate(log_size - log_rate, axis=0), axis=1)
    return AttentionGrid(log_rows=np.log(rows), log_ctx=np.log(ctx), log_rate=log_size - log_unit)


def _axis(values: FloatArray, axis: FloatArray) -> tuple[npt.NDArray[np.intp], FloatArray]:
    """Lower cell index and weight of each (clamped) value on an ascending axis."""
    if axis.size == 1:
        return np.zeros(values.shape, dtype=np.intp), np.zeros_like(values)
    clamped = np.clip(values, axis[0], axis[-1])
    low = np.clip(np.searchsorted(axis, clamped, side="right") - 1, 0, axis.size - 2)
    weight = (clamped - axis[low]) / (axis[low + 1] - axis[low])
    return low, weight


def attention_bytes_per_s(grid: AttentionGrid, *, rows: FloatArray, ctx_tokens: FloatArray) -> FloatArray:
    """Interpolated decode-attention rate (bytes/s) at rows = sequences * KV heads per rank and ctx tokens.

    Formula: exp of bilinear interpolation of log_rate at (log max(rows, 1), log max(ctx, 1)), clamped.
    """
    log_r = np.log(np.maximum(np.asarray(rows, dtype=np.float64), 1.0))
    log_c = np.log(np.maximum(np.asarray(ctx_tokens, dtype=np.float64), 1.0))
    log_r, log_c = np.broadcast_arrays(log_r, log_c)
    i, wi = _axis(log_r, grid.log_rows)
    j, wj = _axis(log_c, grid.log_ctx)
    g = grid.log_rate
    i1 = np.minimum(i + 1, g.shape[0] - 1)
    j1 = np.minimum(j + 1, g.shape[1] - 1)
    low = g[i, j] * (1 - wj) + g[i, j1] * wj
    high = g[i1, j] * (1 - wj) + g[i1, j1] * wj
    return np.asarray(np.exp(low * (1 - wi) + high * wi), dtype=np.float64)
