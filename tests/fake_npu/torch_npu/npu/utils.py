"""torch_npu.npu.utils of the fake: SoC and CANN queries."""

from __future__ import annotations

import os

from torch_npu.utils import get_cann_version

# [assumed] an integer per SoC, as torch_npu's get_soc_version returns; the values are placeholders
_SOC_IDS = {"Ascend910B4": 224, "Ascend910_9392": 251, "Ascend950PR": 260, "Ascend310P3": 202}


def get_soc_version() -> int:
    """An integer SoC id (placeholder values; production code records it, never interprets it)."""
    return _SOC_IDS.get(os.environ.get("FAKE_NPU_SOC", "Ascend910B4"), -1)


__all__ = ["get_cann_version", "get_soc_version"]
