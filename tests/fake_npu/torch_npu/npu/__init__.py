"""The fake's torch.npu namespace: device queries, events, streams and a recording NPUGraph, all on CPU."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch_npu import failures
from torch_npu.npu import utils

fake_tensor_device = "cpu"  # the seam read by calibration.device.tensor_device
_GIB = 2**30
_HOST_SYNC_OPS = ("_local_scalar_dense", "item")


def is_available() -> bool:
    return True


def device_count() -> int:
    return int(os.environ.get("FAKE_NPU_COUNT", "1"))


def set_device(device: Any) -> None:
    index = device.index if isinstance(device, torch.device) else int(str(device).split(":")[-1])
    if index is not None and index >= device_count():
        raise RuntimeError(f"fake torch_npu: invalid device index {index}")


def current_device() -> int:
    return 0


def get_device_name(device: Any = None) -> str:
    return os.environ.get("FAKE_NPU_SOC", "Ascend910B4")


def synchronize(device: Any = None) -> None:
    return None


def mem_get_info(device: Any = None) -> tuple[int, int]:
    total = int(float(os.environ.get("FAKE_NPU_TOTAL_GIB", "32")) * _GIB)
    return total - _GIB, total


def memory_allocated(device: Any = None) -> int:
    return 0


def empty_cache() -> None:
    return None


class Event:
    """Host-clock event with torch.npu.Event's interface (elapsed_time in milliseconds)."""

    def __init__(self, enable_timing: bool = False) -> None:
        self.enable_timing = enable_timing
        self.at = 0.0

    def record(self, stream: Any = None) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end: Event) -> float:
        return (end.at - self.at) * 1e3


class Stream:
    def wait_stream(self, other: Any) -> None:
        return None

    def synchronize(self) -> None:
        return None


_CURRENT = Stream()


def current_stream(device: Any = None) -> Stream:
    return _CURRENT


@contextlib.contextmanager
def stream(s: Any) -> Iterator[None]:
    yield


class _Recorder(TorchDispatchMode):
    """Records every aten op run under it; a host sync inside a capture fails, as on a device."""

    def __init__(self, ops: list[tuple[Any, Any, Any]]) -> None:
        super().__init__()
        self.ops = ops

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if any(name in str(func) for name in _HOST_SYNC_OPS):
            raise RuntimeError("fake torch_npu: operation not permitted when stream is capturing")
        self.ops.append((func, args, kwargs or {}))
        return func(*args, **(kwargs or {}))


class NPUGraph:
    """Capture records aten ops; replay re-runs them on the captured tensors."""

    def __init__(self) -> None:
        self.ops: list[tuple[Any, Any, Any]] = []

    def replay(self) -> None:
        for func, args, kwargs in self.ops:
            func(*args, **kwargs)


@contextlib.contextmanager
def _graph(g: NPUGraph, pool: Any = None, stream: Any = None) -> Iterator[None]:
    if "capture_refused" in failures() or os.environ.get("TASK_QUEUE_ENABLE") == "2":
        raise RuntimeError(
            "fake torch_npu: capture_begin: graph capture is not supported with TASK_QUEUE_ENABLE=2"
        )
    with _Recorder(g.ops):
        yield


def _install_hccl() -> None:
    """Register "hccl" as gloo so all-reduce workers can form a process group on CPU."""
    import torch.distributed as dist

    if not dist.is_available() or "hccl" in dist.Backend.backend_list:
        return

    def create(store: Any, rank: int, size: int, timeout: Any) -> Any:
        return dist.ProcessGroupGloo(store, rank, size, timeout)

    dist.Backend.register_backend("hccl", create, devices=["cpu"])


if "no_npugraph" in failures():  # torch_npu builds for CANN 8.0.0 and older have no NPUGraph
    del NPUGraph
else:
    graph = _graph

__all__ = ["Event", "Stream", "current_stream", "device_count", "utils"]
