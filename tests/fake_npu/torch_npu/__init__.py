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
from torch_npu import npu, profiler, utils  # noqa: E402
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
