"""torch_npu.profiler of the fake: writes ASCEND_PROFILER_OUTPUT/kernel_details.csv, one row per leaf aten op
(the CPU stand-in for a device kernel), under the folder given to tensorboard_trace_handler."""

from __future__ import annotations

import csv
import enum
import os
from pathlib import Path
from typing import Any

import torch


class ProfilerActivity(enum.Enum):
    CPU = "CPU"
    NPU = "NPU"


class ProfilerLevel(enum.Enum):
    Level0 = 0
    Level1 = 1


def tensorboard_trace_handler(
    dir_name: str, worker_name: str | None = None, analyse_flag: bool = True
) -> Any:
    def handler(prof: profile) -> None:
        out = Path(dir_name) / f"{worker_name or 'fake'}_{os.getpid()}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "kernel_details.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["Step Id", "Name", "Type", "Accelerator Core", "Duration(us)"])
            for name in prof.kernel_names:
                writer.writerow(["", name, name.split("::")[-1], "AI_VECTOR_CORE", "1.0"])

    return handler


class profile:  # noqa: N801 (torch_npu's name)
    def __init__(self, activities: Any = None, on_trace_ready: Any = None, **kwargs: Any) -> None:
        self.on_trace_ready = on_trace_ready
        self.kernel_names: list[str] = []
        self._inner = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])

    def __enter__(self) -> profile:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._inner.__exit__(*exc)
        self.kernel_names = [
            e.name for e in self._inner.events() if e.name.startswith("aten::") and not e.cpu_children
        ]
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)
