"""planner/attention.py: the measured decode-attention table as a monotone log-space interpolation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import catalog
from planner.deployment import Deployment
from planner.perf import roofline
from planner.perf.attention import attention_bytes_per_s, attention_grid
from planner.schema import AttentionRate
from tests.helpers import deployment

H200 = catalog.load_card("nvidia-h200")
TABLE = H200.coefficients().attention_table or []


def _point(batch: int, ctx: int, gb_per_s: float, kv_heads: int = 8) -> AttentionRate:
    return AttentionRate(batch=batch, kv_heads=kv_heads, head_dim=128, ctx_tokens=ctx, gb_per_s=gb_per_s)


def test_grid_points_are_reproduced_and_edges_clamp() -> None:
    # rows 8, 64 x ctx 512, 4096; unit time rows * ctx / rate rises along both axes, so nothing is changed
    table = [_point(1, 512, 100.0), _point(8, 512, 500.0), _point(1, 4096, 600.0), _point(8, 4096, 2000.0)]
    grid = attention_grid(table)
    got = attention_bytes_per_s(
        grid, rows=np.array([8.0, 64.0, 8.0, 64.0]), ctx_tokens=np.array([512.0] * 2 + [4096.0] * 2)
    )
    assert got == pytest.approx([100e9, 500e9, 600e9, 2000e9], rel=1e-12)
    # beyond the grid the edge rate applies: rows 1024 at ctx 1e6 -> the (64, 4096) rate
    assert attention_bytes_per_s(grid, rows=np.array(1024.0), ctx_tokens=np.array(1e6)) == pytest.approx(
        2000e9
    )
    # halfway in log space between rows 8 and 64 at ctx 512: geometric mean of the two rates
    mid = attention_bytes_per_s(grid, rows=np.array(np.sqrt(8 * 64)), ctx_tokens=np.array(512.0))
    assert mid == pytest.approx(np.sqrt(100e9 * 500e9), rel=1e-12)


def test_noisy_table_is_made_monotone_in_time() -> None:
    # rows 64 measured faster per byte than 8x its bytes allows: 8 x 512 at 100 GB/s takes u = 40.96 units,
    # 64 x 512 at 1000 GB/s would take 32.8 < 40.96: the running max lifts it to 40.96 -> rate 800 GB/s
    grid = attention_grid([_point(1, 512, 100.0), _point(8, 512, 1000.0)])
    rate = attention_bytes_per_s(grid, rows=np.array(64.0), ctx_tokens=np.array(512.0))
    assert rate == pytest.approx(800e9)


def test_missing_cell_takes_the_nearest_rate_of_its_row() -> None:
    table = [_point(1, 512, 100.0), _point(1, 4096, 400.0), _point(8, 512, 900.0)]  # (64, 4096) not measured
    grid = attention_grid(table)
    assert attention_bytes_per_s(grid, rows=np.array(64.0), ctx_tokens=np.array(4096.0)) == pytest.approx(
        900e9
    )


def _time(rows: float, ctx: float) -> float:
    grid = attention_grid(TABLE)
    return float(rows * ctx / attention_bytes_per_s(grid, rows=np.array(rows), ctx_tokens=np.array(ctx)))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    rows=st.floats(1, 10_000),
    ctx=st.floats(1, 200_000),
    more_rows=st.floats(1, 4),
    more_ctx=st.floats(1, 4),
)
def test_measured_table_time_is_monotone(rows: float, ctx: float, more_rows: float, more_ctx: float) -> None:
    assert _time(rows * more_rows, ctx) >= _time(rows, ctx) * (1 - 1e-12)
    assert _time(rows, ctx * more_ctx) >= _time(rows, ctx) * (1 - 1e-12)


def _dep(model: str, engine: str) -> Deployment:
    return deployment(model, H200, engine=engine)


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(["qwen3-8b", "llama-3.1-8b", "qwen3-30b-a3b"]),
    engine=st.sampled_from(["mindie", "transformers"]),
    batch=st.integers(1, 512),
    ctx=st.integers(1, 131_072),
)
def test_calibrated_decode_step_is_monotone_and_above_the_bandwidth_floor(
    model: str, engine: str, batch: int, ctx: int
) -> None:
    dep = _dep(model, engine)
    step = roofline.decode_step_s(dep, batch=batch, ctx_tokens=ctx)
    # non-decreasing up to float rounding: where the table's running maximum is flat, two contexts give the
    # same time summed in a different order (seen: 1 ulp apart with the run-4 table)
    floor = step * (1 - 1e-12)
    assert roofline.decode_step_s(dep, batch=batch + 1, ctx_tokens=ctx) >= floor
    assert roofline.decode_step_s(dep, batch=batch, ctx_tokens=ctx + 512) >= floor
    ledger = roofline.decode_ledger(dep, batch=batch, ctx_tokens=ctx)
    assert step >= ledger.hbm_bytes / H200.memory_bandwidth_bytes_per_s
    assert ledger.time_s == pytest.approx(step, rel=1e-12)
