"""Grouped expert GEMM and all-reduce calibration (CPU): mapping of synthetic samples, the gloo code path,
and how the roofline uses the new coefficients (routed experts; tensor parallelism)."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.allreduce import ring_bus_bytes, run_allreduce
from calibration.calibrate import coefficients_from
from calibration.microbench import Measurements
from planner import catalog
from planner.deployment import Deployment
from planner.perf import roofline
from tests.helpers import deployment

H200 = catalog.load_card("nvidia-h200")
H200_BW = 4800e9  # memory_bandwidth_gb_per_s 4800 -> B/s
LINK_BW = 450e9  # interconnect.bandwidth_gb_per_s 450 -> B/s


def _row(seconds: float, **fields: object) -> dict[str, object]:
    return {"median_s": seconds, "spread_fraction": 0.0, "samples_s": [seconds], **fields}


def test_grouped_gemm_rows_map_to_latency_and_fraction() -> None:
    meas = Measurements(device="synthetic")
    # exact t = 13 us + bytes / 2.88e12 B/s on every point -> fraction 2.88e12 / 4.8e12 = 0.6
    for touched in (8, 50, 128):
        size = touched * 3 * 2048 * 768 * 2.0
        meas.rows.setdefault("grouped_gemm", []).append(_row(13e-6 + size / 2.88e12, bytes=size))
    c = coefficients_from(meas, H200, min_attn_bytes=0)
    assert c.grouped_matmul_latency_us == pytest.approx(13.0, rel=1e-9)
    assert c.grouped_weight_read_bandwidth_fraction == pytest.approx(0.6, rel=1e-9)


def test_allreduce_rows_map_to_latency_and_fraction_graph_first() -> None:
    meas = Measurements(device="synthetic")
    for size in (8192, 2**20, 2**26):
        bus = ring_bus_bytes(size, world=2)  # 2 (2 - 1) / 2 = 1x the message
        meas.add("allreduce", **_row(10e-6 + bus / 240e9, mode="graph", bytes=size, bus_bytes=bus))
        meas.add("allreduce", **_row(50e-6 + bus / 100e9, mode="eager", bytes=size, bus_bytes=bus))
    c = coefficients_from(meas, H200, min_attn_bytes=0)
    assert c.allreduce_latency_us == pytest.approx(10.0, rel=1e-9)
    assert c.allreduce_bandwidth_fraction == pytest.approx(240 / 450, rel=1e-9)


def test_without_allreduce_rows_defaults_are_kept_and_noted() -> None:
    meas = Measurements(device="synthetic")
    c = coefficients_from(meas, H200, min_attn_bytes=0)
    assert c.allreduce_latency_us == H200.default_coefficients.allreduce_latency_us
    assert c.grouped_matmul_latency_us is None
    assert any(n.startswith("allreduce_*: default coefficients kept") for n in meas.notes)


def test_ring_bus_bytes() -> None:
    assert ring_bus_bytes(1000, world=2) == 1000  # 2 * 1 / 2
    assert ring_bus_bytes(1000, world=8) == 1750  # 2 * 7 / 8


@pytest.mark.slow  # torch (~4 s of CPU to import; tests/conftest.py)
def test_gloo_two_process_allreduce_code_path() -> None:
    pytest.importorskip("torch")
    rows = run_allreduce("cpu", world=2, sizes=(8192, 65536), warmup=1, repeats=2)
    assert isinstance(rows, list), rows
    assert [(r["mode"], r["bytes"], r["world"]) for r in rows] == [("eager", 8192, 2), ("eager", 65536, 2)]
    assert all(r["median_s"] > 0 and len(r["samples_s"]) == 2 for r in rows)


def _dep(model_id: str, *, tp: int = 1, engine: str = "transformers") -> Deployment:
    return deployment(model_id, H200, tp=tp, engine=engine)


def _with(dep: Deployment, **coefficients: object) -> Deployment:
    assert dep.hardware.measured is not None
    coeff = dep.hardware.measured.coefficients.model_copy(update=coefficients)
    measured = dep.hardware.measured.model_copy(update={"coefficients": coeff})
    return dep.model_copy(update={"hardware": dep.hardware.model_copy(update={"measured": measured})})


@pytest.mark.parametrize("engine", ["transformers", "mindie"])
def test_moe_experts_use_grouped_coefficients(engine: str) -> None:
    dep = _dep("qwen3-30b-a3b", engine=engine)
    fallback = _with(dep, grouped_matmul_latency_us=None, grouped_weight_read_bandwidth_fraction=None)
    row = next(
        o for o in roofline.decode_ledger(dep, batch=64, ctx_tokens=512).ops if o.name == "moe.experts"
    )
    old = next(
        o for o in roofline.decode_ledger(fallback, batch=64, ctx_tokens=512).ops if o.name == "moe.experts"
    )
    c = dep.hardware.coefficients()
    assert c.grouped_weight_read_bandwidth_fraction is not None and c.grouped_matmul_latency_us is not None
    assert row.transfer_s == pytest.approx(row.bytes / (H200_BW * c.grouped_weight_read_bandwidth_fraction))
    assert old.transfer_s == pytest.approx(old.bytes / (H200_BW * c.weight_read_bandwidth_fraction))
    # 48 layers x 2 grouped GEMMs pay the grouped latency instead of the dense matmul latency
    delta_s = 48 * 2 * (c.grouped_matmul_latency_us - c.matmul_latency_us) * 1e-6
    assert row.overhead_s - old.overhead_s == pytest.approx(delta_s)


def test_dense_models_ignore_grouped_coefficients() -> None:
    dep = _dep("qwen3-8b")
    other = _with(dep, grouped_matmul_latency_us=500.0, grouped_weight_read_bandwidth_fraction=0.1)
    assert roofline.decode_step_s(dep, batch=8, ctx_tokens=512) == roofline.decode_step_s(
        other, batch=8, ctx_tokens=512
    )


@pytest.mark.parametrize("model_id", ["qwen3-8b", "qwen3-32b", "llama-3.1-70b"])
def test_tp_per_device_bytes_non_increasing_and_link_bytes_appear(model_id: str) -> None:
    hbm, link = [], []
    for tp in (1, 2, 4, 8):
        ledger = roofline.decode_ledger(_dep(model_id, tp=tp), batch=8, ctx_tokens=4096)
        hbm.append(ledger.hbm_bytes)
        link.append(ledger.link_bytes)
    assert np.all(np.diff(hbm) <= 0)
    assert link[0] == 0 and all(b > 0 for b in link[1:])


@pytest.mark.parametrize("model_id", ["qwen3-8b", "qwen3-32b"])
def test_tp2_step_monotone_in_batch_and_ctx(model_id: str) -> None:
    dep = _dep(model_id, tp=2)
    grid = roofline.decode_step_s_grid(
        dep, batch=np.array([[1], [8], [64]]), ctx_tokens=np.array([512, 4096])
    )
    assert np.all(np.diff(grid, axis=0) >= 0) and np.all(np.diff(grid, axis=1) >= 0)
