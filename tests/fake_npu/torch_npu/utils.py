"""torch_npu.utils of the fake: only get_cann_version."""

from __future__ import annotations

import os


def get_cann_version(module: str = "CANN") -> str:
    """The CANN version the fake reports (FAKE_NPU_CANN); "" as torch_npu returns before CANN 8.1.RC1."""
    return os.environ.get("FAKE_NPU_CANN", "8.1.RC1") if module == "CANN" else ""
