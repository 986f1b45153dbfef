"""The decode-layer small-kernel mix (calibration/small_kernels.py): what it launches, how calibrate maps it,
and how the roofline reads its table for a model of another hidden size."""

from __future__ import annotations

import numpy as np
import pytest

from calibration import small_kernels
from calibration.calibrate import coefficients_from
from calibration.microbench import Measurements
from planner import catalog
from planner.perf import roofline
from planner.schema import KernelCost

VIEWS = {"aten.transpose.int", "aten.slice.Tensor", "aten.view.default", "aten._unsafe_view.default"}


class _CpuBackend:
    kind, device = "cpu", "cpu"

    def __init__(self, torch: object) -> None:
        self.torch = torch
        self.compute_dtype = torch.bfloat16  # type: ignore[attr-defined]


def _ops(torch: object, fn: object) -> list[str]:
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[str] = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Count():
        fn()  # type: ignore[operator]
    return [op for op in seen if op not in VIEWS]


@pytest.mark.parametrize("passes", [1, 3])
def test_layer_mix_launches_the_counted_kernels_per_pass(passes: int) -> None:
    torch = pytest.importorskip("torch")
    mix = small_kernels.layer_mix(_CpuBackend(torch), batch=2, hidden=64, heads=(4, 2, 16), passes=passes)
    ops = _ops(torch, mix)
    assert len(ops) == passes * small_kernels.MIX_KERNELS_PER_PASS
    # the kinds of kernel a transformers decode layer runs besides its matmuls and attention
    assert ops.count("aten.index_copy_.default") == 2 * passes  # k and v cache writes
    assert ops.count("aten.cat.default") == 2 * passes  # rotate_half of q and k
    assert ops.count("aten.mean.dim") == 4 * passes  # input, q-head, k-head and post-attention RMSNorm


def test_cpu_has_no_device_profiler_count() -> None:
    torch = pytest.importorskip("torch")
    assert small_kernels.count_kernels(_CpuBackend(torch), lambda: None) is None


def _meas(mode: str, rows: tuple[tuple[int, float], ...], **extra: object) -> Measurements:
    meas = Measurements(device="synthetic")
    for batch, us in rows:
        meas.add(
            "kernels",
            mode=mode,
            batch=batch,
            median_s=us * 1e-6,
            spread_fraction=0.0,
            samples_s=[us * 1e-6],
            **extra,
        )
    return meas


def test_calibrate_prefers_the_layer_mix_over_the_elementwise_chain() -> None:
    meas = _meas("decode_chain", ((1, 1.5), (8, 2.0)))
    for batch, us in ((1, 1.9), (8, 2.2), (64, 2.5)):
        meas.add(
            "kernels",
            mode="layer_mix",
            batch=batch,
            hidden=4096,
            median_s=us * 1e-6,
            spread_fraction=0.0,
            samples_s=[us * 1e-6],
        )
    c = coefficients_from(meas, catalog.load_card("nvidia-h200"), min_attn_bytes=0)
    assert c.kernel_overhead_us == pytest.approx(1.9)
    table = c.kernel_overhead_table or []
    assert [(k.tokens, k.kernel_us, k.hidden_size) for k in table] == [
        (1, pytest.approx(1.9), 4096),
        (8, pytest.approx(2.2), 4096),
        (64, pytest.approx(2.5), 4096),
    ]


def test_a_raw_file_without_the_mix_keeps_the_chain() -> None:
    c = coefficients_from(
        _meas("decode_chain", ((8, 2.0), (1, 1.5))), catalog.load_card("nvidia-h200"), min_attn_bytes=0
    )
    assert c.kernel_overhead_us == pytest.approx(1.5)
    assert [k.hidden_size for k in c.kernel_overhead_table or []] == [None, None]


def _coeff(hidden: int | None) -> object:
    hw = catalog.load_card("nvidia-h200")
    assert hw.measured is not None
    table = [KernelCost(tokens=t, kernel_us=us, hidden_size=hidden) for t, us in ((1, 2.0), (8, 3.0))]
    return hw.measured.coefficients.model_copy(update={"kernel_overhead_table": table})


@pytest.mark.parametrize(
    "model_hidden, expected", [(4096, (1.0, 8.0)), (1024, (4.0, 32.0)), (8192, (0.5, 4.0))]
)
def test_table_rows_stand_for_the_same_activation_elements(
    model_hidden: int, expected: tuple[float, ...]
) -> None:
    got = roofline.kernel_overhead_table(_coeff(4096), hidden_size=model_hidden)  # type: ignore[arg-type]
    assert got is not None
    log_tokens, ratio = got
    np.testing.assert_allclose(np.exp(log_tokens), expected)
    np.testing.assert_allclose(ratio, [1.0, 1.5])


def test_a_table_without_hidden_size_is_read_by_tokens() -> None:
    got = roofline.kernel_overhead_table(_coeff(None), hidden_size=1024)  # type: ignore[arg-type]
    assert got is not None
    np.testing.assert_allclose(np.exp(got[0]), [1.0, 8.0])


def test_a_narrower_model_pays_less_per_kernel_at_the_same_batch() -> None:
    from planner.deployment import Deployment  # noqa: F401  (the public path the plan uses)

    coeff = _coeff(4096)
    wide = roofline.kernel_overhead_table(coeff, hidden_size=4096)  # type: ignore[arg-type]
    narrow = roofline.kernel_overhead_table(coeff, hidden_size=1024)  # type: ignore[arg-type]
    assert wide is not None and narrow is not None
    at = np.log(8.0)
    assert np.interp(at, *narrow) < np.interp(at, *wide) == pytest.approx(1.5)


def test_repeat_runs_of_one_batch_pool_their_samples() -> None:
    meas = Measurements(device="two runs")
    for run_samples in ([1.8, 1.9, 2.0], [2.1, 2.2, 2.3]):
        us = sorted(run_samples)[1]
        meas.add(
            "kernels",
            mode="layer_mix",
            batch=1,
            hidden=4096,
            median_s=us * 1e-6,
            spread_fraction=0.0,
            samples_s=[s * 1e-6 for s in run_samples],
        )
    meas.add(
        "kernels",
        mode="layer_mix",
        batch=256,
        hidden=4096,
        median_s=3.6e-6,
        spread_fraction=0.0,
        samples_s=[3.6e-6],
    )
    rows = small_kernels.per_batch_rows(meas.rows)
    assert [r["batch"] for r in rows] == [1, 256]
    assert rows[0]["median_s"] == pytest.approx(2.05e-6) and rows[0]["runs"] == 2  # median of all six
    c = coefficients_from(meas, catalog.load_card("nvidia-h200"), min_attn_bytes=0)
    assert c.kernel_overhead_us == pytest.approx(2.05)
    assert [k.tokens for k in c.kernel_overhead_table or []] == [1, 256]


def _mix_row(**changes: object) -> dict[str, object]:
    """A raw layer_mix row at batch 1 (2 us median) whose kernels were not counted yet; `changes` override."""
    row: dict[str, object] = {"mode": "layer_mix", "batch": 1, "heads": [4, 2, 16], "hidden": 64}
    row.update(median_s=2e-6, kernels_counted=False, **changes)
    return row


def test_recount_rescales_the_mix_rows_to_the_profiled_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    per_pass = small_kernels.MIX_KERNELS_PER_PASS
    rows = [
        _mix_row(samples_s=[2e-6, 3e-6], kernels=2 * per_pass),
        {"mode": "decode_chain", "batch": 1, "median_s": 1e-6, "samples_s": [1e-6], "kernels": 11},
    ]
    monkeypatch.setattr(small_kernels, "count_kernels", lambda backend, fn: per_pass // 2)
    note = small_kernels.recount(rows, _CpuBackend(torch))
    assert note is not None and f"{per_pass // 2} device kernels per pass" in note
    assert rows[0]["median_s"] == pytest.approx(4e-6) and rows[0]["samples_s"] == pytest.approx([4e-6, 6e-6])
    assert rows[0]["kernels"] == per_pass and rows[0]["kernels_counted"] is True
    assert rows[1]["median_s"] == 1e-6  # the elementwise chain is left alone


def test_recount_without_a_profiler_keeps_the_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    rows = [_mix_row(samples_s=[2e-6], kernels=48)]
    assert small_kernels.recount(rows, _CpuBackend(torch)) is None  # cpu: no device profiler
    assert rows[0]["median_s"] == 2e-6 and rows[0]["kernels_counted"] is False
