"""Fake torch_npu for the CPU test suite (see tests/fake_npu/README.md). Not torch_npu: no code from it."""

from __future__ import annotations

import multiprocessing
import os


def failures() -> set[str]:
    """The failure modes switched on through FAKE_NPU_FAIL (read at every call)."""
    return {f.strip() for f in os.environ.get("FAKE_NPU_FAIL", "").split(",") if f.strip()}


# a spawned worker: another pid than the test process that set FAKE_NPU_PARENT_PID
_in_worker = multiprocessing.parent_process() is not None or os.environ.get(
    "FAKE_NPU_PARENT_PID", str(os.getpid())
) != str(os.getpid())
if "import_runtime" in failures() or (_in_worker and "worker_import_runtime" in failures()):
    # what an ABI-mismatched torch_npu / missing CANN runtime library looks like at import time
    raise RuntimeError("fake torch_npu: libascendcl.so: cannot open shared object file (CANN not sourced)")
if "import_exception" in failures():
    raise Exception("fake torch_npu: the NPU driver is not installed")

import torch  # noqa: E402
from torch_npu import _ops, npu, profiler, utils  # noqa: E402
from torch_npu._ops import (  # noqa: E402
    get_npu_format,
    npu_format_cast,
    npu_fused_infer_attention_score,
    npu_quant_matmul,
    npu_weight_quant_batchmatmul,
)

__version__ = os.environ.get("FAKE_NPU_VERSION", "2.5.1")

if "no_grouped_matmul" not in failures():
    from torch_npu._ops import npu_grouped_matmul  # noqa: F401

torch.npu = npu  # torch_npu registers its device module as torch.npu
npu._install_hccl()


def _is_bf16(value: object) -> bool:
    return value is torch.bfloat16 or (isinstance(value, torch.Tensor) and value.dtype == torch.bfloat16)


class No310PBf16(torch.overrides.TorchFunctionMode):
    """A 310P has no bfloat16 at all (not only in torch_npu's ops): any torch call on a bf16 tensor, or one
    asking for dtype=torch.bfloat16, fails as on the device. Active from import until the harness drops the
    fake; a no-op on other SoCs (FAKE_NPU_SOC is read at each call)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if _ops._soc().startswith("Ascend310P") and any(_is_bf16(v) for v in (*args, *kwargs.values())):
            raise RuntimeError(f"fake torch_npu: {_ops._soc()} does not support bfloat16 ({func.__name__})")
        return func(*args, **kwargs)


BF16_GUARD = No310PBf16()
BF16_GUARD.__enter__()

__all__ = [
    "get_npu_format",
    "npu",
    "npu_format_cast",
    "npu_fused_infer_attention_score",
    "npu_quant_matmul",
    "npu_weight_quant_batchmatmul",
    "profiler",
    "utils",
]
