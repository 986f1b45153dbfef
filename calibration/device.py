"""One device abstraction over cpu, cuda and npu, so every microbenchmark runs the same code on each.

torch is imported lazily, inside `import_torch`, never at module import. An installed torch_npu registers a
`torch.backends` autoload entry point: without CANN, a plain `import torch` then fails ("Failed to load the
backend extension: torch_npu"). So, unless the npu device is requested, TORCH_DEVICE_BACKEND_AUTOLOAD=0 is set
before torch is imported, and torch_npu is imported only for `--device npu:N`.

The NPU-specific code is thin: the module names (torch.npu vs torch.cuda), the graph class (NPUGraph vs
CUDAGraph), and the quantized-matmul entry points that microbench.py asks for through `Backend.kind`.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from planner import units
from planner.errors import MissingDependencyError, PlanInputError

_DEVICE_RE = re.compile(r"^(cpu|cuda|npu)(?::(\d+))?$")
AUTOLOAD_ENV = "TORCH_DEVICE_BACKEND_AUTOLOAD"


@dataclass(frozen=True)
class DeviceSpec:
    """A parsed --device value: kind is cpu, cuda or npu; index is the ordinal (0 for cpu)."""

    kind: str
    index: int

    @property
    def text(self) -> str:
        """The canonical spelling: "cpu", "cuda:0", "npu:1"."""
        return "cpu" if self.kind == "cpu" else f"{self.kind}:{self.index}"


def parse_device(text: str) -> DeviceSpec:
    """Parse --device ("cpu", "cuda", "cuda:1", "npu:0"); PlanInputError names the accepted forms."""
    match = _DEVICE_RE.match(text.strip().lower())
    if match is None:
        raise PlanInputError(f"--device: unknown device (got {text!r}, expected cpu, cuda[:N] or npu[:N])")
    return DeviceSpec(kind=match.group(1), index=int(match.group(2) or 0))


def import_torch(kind: str) -> ModuleType:
    """Import torch for a device kind; torch_npu only when kind == "npu".

    Sets TORCH_DEVICE_BACKEND_AUTOLOAD=0 first (unless npu is wanted and the user set nothing), so that an
    installed torch_npu without CANN cannot break `import torch`. Raises MissingDependencyError with an
    install
    hint when torch (or torch_npu for npu) is absent or fails to load.
    """
    if kind != "npu":
        os.environ.setdefault(AUTOLOAD_ENV, "0")
    try:
        import torch
    except ImportError as exc:
        raise MissingDependencyError(
            f"--device {kind}: torch is not installed ({exc}); "
            "install it with `pip install 'kvplan-ascend[calibrate]'`"
        ) from exc
    except RuntimeError as exc:  # autoload of a broken backend extension (torch_npu without CANN)
        raise MissingDependencyError(
            f"--device {kind}: importing torch failed while auto-loading a device backend ({exc}); "
            f"set {AUTOLOAD_ENV}=0 or install the matching CANN toolkit"
        ) from exc
    if kind == "npu":
        _import_torch_npu()
    return torch


def _import_torch_npu() -> ModuleType:
    try:
        import torch_npu  # type: ignore[import-not-found]
    except ImportError as exc:
        raise MissingDependencyError(
            "--device npu: torch_npu is not importable "
            f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
            "install torch_npu matching your "
            "torch and run CANN's set_env.sh (`source /usr/local/Ascend/ascend-toolkit/set_env.sh`)"
        ) from exc
    return torch_npu  # type: ignore[no-any-return]


@dataclass
class Backend:
    """A torch device plus the few calls that differ between cpu, cuda and npu."""

    spec: DeviceSpec
    torch: Any
    device: Any
    accel: Any | None  # torch.cuda or torch.npu; None on cpu
    notes: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """cpu, cuda or npu."""
        return self.spec.kind

    def synchronize(self) -> None:
        """Wait for all queued device work (no-op on cpu)."""
        if self.accel is not None:
            self.accel.synchronize(self.device)

    def device_name(self) -> str:
        """The device's own name (e.g. "NVIDIA H200", "Ascend910B3"); the processor on cpu."""
        if self.accel is None:
            import platform

            return platform.processor() or platform.machine() or "cpu"
        return str(self.accel.get_device_name(self.spec.index))

    def device_count(self) -> int:
        """Visible devices of this kind (1 on cpu)."""
        return 1 if self.accel is None else int(self.accel.device_count())

    def mem_get_info(self) -> tuple[int, int] | None:
        """(free, total) device memory in bytes; None on cpu."""
        if self.accel is None:
            return None
        free, total = self.accel.mem_get_info(self.spec.index)
        return int(free), int(total)

    def memory_allocated(self) -> int:
        """Bytes held by torch's caching allocator for live tensors (0 on cpu)."""
        return 0 if self.accel is None else int(self.accel.memory_allocated(self.spec.index))

    def versions(self) -> dict[str, str]:
        """torch, and the device stack: CUDA and driver-visible capability, or torch_npu and CANN."""
        out = {"torch": str(self.torch.__version__)}
        if self.kind == "cuda":
            out["cuda"] = str(self.torch.version.cuda)
            major, minor = self.accel.get_device_capability(self.spec.index)  # type: ignore[union-attr]
            out["compute_capability"] = f"{major}.{minor}"
        elif self.kind == "npu":
            out.update(_npu_versions())
        return out

    def timer(self, fn: Callable[[], object], *, inner: int = 1) -> float:
        """Seconds per call: `inner` back-to-back calls timed with device events (host clock on cpu)."""
        if self.accel is None:
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            return (time.perf_counter() - start) / inner
        begin, end = self.accel.Event(enable_timing=True), self.accel.Event(enable_timing=True)
        begin.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        return float(begin.elapsed_time(end)) * units.MS_S / inner  # events report milliseconds

    def samples(self, fn: Callable[[], object], *, warmup: int, repeats: int, inner: int = 1) -> list[float]:
        """Warm up, then `repeats` timings of `inner` calls each, in seconds per call."""
        for _ in range(warmup):
            fn()
        self.synchronize()
        return [self.timer(fn, inner=inner) for _ in range(repeats)]

    def capture_graph(self, fn: Callable[[], object]) -> Callable[[], None] | None:
        """Capture fn into a device graph (CUDA graph / NPU aclgraph); its replay, or None if unsupported."""
        if self.accel is None:
            return None
        graph_cls = getattr(self.accel, "CUDAGraph", None) or getattr(self.accel, "NPUGraph", None)
        graph_ctx = getattr(self.accel, "graph", None)
        if graph_cls is None or graph_ctx is None:
            self.notes.append(f"{self.kind}: no graph capture in this torch build")
            return None
        stream = self.accel.Stream()
        stream.wait_stream(self.accel.current_stream())
        with self.accel.stream(stream):
            for _ in range(3):
                fn()
        self.accel.current_stream().wait_stream(stream)
        graph = graph_cls()
        with graph_ctx(graph):
            fn()
        self.synchronize()
        return graph.replay  # type: ignore[no-any-return]


def _npu_versions() -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        import torch_npu

        out["torch_npu"] = str(getattr(torch_npu, "__version__", "unknown"))
        soc = getattr(torch_npu.npu.utils, "get_soc_version", None)
        if soc is not None:
            out["soc_version"] = str(soc())
    except ImportError:
        out["torch_npu"] = "absent"
    cann = os.environ.get("ASCEND_TOOLKIT_HOME") or os.environ.get("ASCEND_HOME_PATH")
    if cann:
        out["cann_path"] = cann
        version_file = os.path.join(cann, "version.cfg")
        if os.path.isfile(version_file):
            with open(version_file, encoding="utf-8") as handle:
                out["cann"] = handle.read().strip().splitlines()[0][:120]
    return out


def open_backend(text: str) -> Backend:
    """Open --device: import torch (and torch_npu for npu), check the device exists, return its Backend.

    Raises PlanInputError when the device kind is known but absent (e.g. cuda:1 on a one-GPU host, or
    npu without devices), MissingDependencyError when torch / torch_npu cannot be imported.
    """
    spec = parse_device(text)
    torch = import_torch(spec.kind)
    if spec.kind == "cpu":
        return Backend(spec=spec, torch=torch, device=torch.device("cpu"), accel=None)
    accel = getattr(torch, spec.kind, None)
    available = accel is not None and bool(accel.is_available())
    count = int(accel.device_count()) if available else 0
    if spec.index >= count:
        raise PlanInputError(
            f"--device: {spec.text} is not present (got {spec.text}, {count} {spec.kind} device(s) visible); "
            "use --device cpu for a dry run"
        )
    accel.set_device(spec.index)
    return Backend(spec=spec, torch=torch, device=torch.device(spec.text), accel=accel)


def median_and_spread(values: list[float]) -> tuple[float, float]:
    """Median and relative spread ((max - min) / median) of timing samples."""
    middle = statistics.median(values)
    spread = (max(values) - min(values)) / middle if middle > 0 else 0.0
    return middle, spread
