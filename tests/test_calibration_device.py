"""The device abstraction and the microbenchmark suite, run on CPU at tiny sizes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from calibration import device
from calibration.microbench import Suite
from calibration.shapes import TINY, TINY_SHAPES, shapes_from_card
from planner import catalog
from planner.errors import MissingDependencyError, PlanInputError


def test_parse_device() -> None:
    assert device.parse_device("cpu").text == "cpu"
    assert device.parse_device("cuda").text == "cuda:0"
    assert device.parse_device("NPU:3") == device.DeviceSpec("npu", 3)
    with pytest.raises(PlanInputError, match=r"^--device: unknown device \(got 'tpu:0', expected cpu"):
        device.parse_device("tpu:0")


def test_shapes_from_card_fuse_qkv() -> None:
    shapes = shapes_from_card(catalog.load_model("qwen3-8b"))
    # q 32*128 + k 8*128 + v 8*128 = 6144 outputs from hidden 4096; then o, gate_up, down
    assert shapes.linears == ((4096, 6144), (4096, 4096), (4096, 24576), (12288, 4096))


@pytest.mark.slow  # torch (~4 s of CPU to import; tests/conftest.py)
def test_import_torch_disables_backend_autoload_unless_npu() -> None:
    code = (
        "import os; os.environ.pop('TORCH_DEVICE_BACKEND_AUTOLOAD', None)\n"
        "from calibration import device\n"
        "try:\n    device.import_torch('cpu')\nexcept Exception:\n    pass\n"
        "print(os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert out.stdout.strip() == "0"


@pytest.mark.slow  # torch (~4 s of CPU to import; tests/conftest.py)
def test_npu_without_torch_npu_is_a_clear_error() -> None:
    pytest.importorskip("torch")
    try:
        import torch_npu  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("torch_npu is installed here")
    with pytest.raises(MissingDependencyError, match=r"^--device npu: torch_npu is not importable"):
        device.open_backend("npu:0")


@pytest.mark.slow  # torch (~4 s of CPU to import; tests/conftest.py)
def test_absent_cuda_device_is_a_clear_error() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(PlanInputError, match=r"^--device: cuda:0 is not present"):
        device.open_backend("cuda:0")


@pytest.mark.slow  # torch (~4 s of CPU to import; tests/conftest.py)
def test_suite_runs_every_benchmark_on_cpu() -> None:
    pytest.importorskip("torch")
    backend = device.open_backend("cpu")
    meas = Suite(backend=backend, sizes=TINY, shapes=TINY_SHAPES, budget_s=60).run()
    dense = {"kernels", "step", "stream", "gemv", "attention", "gemm", "prefill_gemm"}
    moe = {"grouped_gemm"}  # TINY_SHAPES has MoE shapes
    if importlib.util.find_spec("transformers") is not None:
        moe.add("moe_experts")  # the cross-check times transformers' own experts module
    else:
        assert any(n.startswith("moe_experts: transformers not importable") for n in meas.notes)
    assert set(meas.rows) == dense | moe
    assert any(n.startswith("allreduce_*: one device visible") for n in meas.notes)
    for rows in meas.rows.values():
        for row in rows:
            assert len(row["samples_s"]) >= TINY.repeats and row["median_s"] > 0
    assert any("quantized GEMV" in n for n in meas.notes)  # Ascend-only kernels are skipped with a note


@pytest.mark.slow  # torch (~4 s of CPU to import; tests/conftest.py)
def test_suite_stops_when_budget_is_spent() -> None:
    pytest.importorskip("torch")
    meas = Suite(backend=device.open_backend("cpu"), sizes=TINY, shapes=TINY_SHAPES, budget_s=0).run()
    assert meas.rows == {}
    assert all("time budget" in n for n in meas.notes)


@pytest.mark.slow  # torch (~4 s of CPU to import; tests/conftest.py)
def test_gqa_attention_matches_repeated_kv_reference() -> None:
    torch = pytest.importorskip("torch")
    from calibration.microbench import decode_attention_fn

    backend = device.open_backend("cpu")
    q, k, v = torch.randn(2, 8, 1, 16), torch.randn(2, 2, 40, 16), torch.randn(2, 2, 40, 16)
    out = decode_attention_fn(backend, q, k, v)()
    ref = torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)
    )
    assert torch.allclose(out, ref, atol=1e-5)
