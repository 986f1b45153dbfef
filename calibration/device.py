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


# The device kind that measures each card vendor: numbers from one say nothing about another's card.
KIND_OF_VENDOR = {"huawei": "npu", "nvidia": "cuda"}


def check_measures_card(spec: DeviceSpec, *, card_id: str, vendor: str, dry_run: bool) -> None:
    """Refuse a device that cannot measure the card (PlanInputError, one line): a CPU measures this
    machine's CPU, a CUDA GPU not an Ascend card. `dry_run` allows the CPU only, as a test of the path."""
    want = KIND_OF_VENDOR[vendor]
    if dry_run and spec.kind != "cpu":
        raise PlanInputError(f"--dry-run: only with --device cpu (got --device {spec.text})")
    if spec.kind == "cpu" and not dry_run:
        raise PlanInputError(
            f"--device cpu: a CPU run measures this machine's CPU, not {card_id} (a {vendor} card), so it "
            f"cannot calibrate it (got cpu, expected {want}:N); run on the card, or add --dry-run to "
            "exercise the calibration path here (its profile is marked uncalibrated)"
        )
    if spec.kind not in ("cpu", want):
        raise PlanInputError(
            f"--device {spec.text}: measures a {spec.kind} device, not {card_id} (a {vendor} card) "
            f"(got {spec.kind}, expected {want}:N); pass the --card of the device you run on"
        )


TORCH_INSTALL_HINTS = {
    # torch_npu pins one torch per release and each CANN line supports only some releases
    "npu": "install the torch / torch_npu pair of your CANN line: `kvplan calibrate --check --device npu:0` "
    "names it (calibration/README.md, 'Ascend: install per CANN line')",
    # PyPI's default torch is the multi-GB CUDA build; PyTorch documents the CPU wheels' own index
    "cpu": "on a CPU-only machine: `pip install torch --index-url https://download.pytorch.org/whl/cpu`, "
    "then `pip install 'kvplan-ascend[calibrate]'`",
    "cuda": "`pip install 'kvplan-ascend[calibrate]'` (PyPI's torch is the CUDA build)",
}


def torch_install_hint(kind: str) -> str:
    """How to install torch for a device kind, as PyTorch and torch_npu document it."""
    return TORCH_INSTALL_HINTS[kind]


def import_torch(kind: str) -> ModuleType:
    """Import torch for a device kind; torch_npu only when kind == "npu".

    Sets TORCH_DEVICE_BACKEND_AUTOLOAD=0 first (unless npu is wanted and the user set nothing), so that an
    installed torch_npu without CANN cannot break `import torch`. Raises MissingDependencyError with an
    install hint when torch (or torch_npu for npu) is absent or fails to load; for npu the hint is the
    torch / torch_npu / CANN check of calibration/npu_env.py (what to install, exactly).
    """
    if kind != "npu":
        os.environ.setdefault(AUTOLOAD_ENV, "0")
    try:
        import torch
    except ImportError as exc:
        raise MissingDependencyError(
            f"--device {kind}: torch is not installed ({exc}); {torch_install_hint(kind)}"
        ) from exc
    except RuntimeError as exc:  # autoload of a broken backend extension (torch_npu without CANN)
        raise MissingDependencyError(
            f"--device {kind}: importing torch failed while auto-loading a device backend "
            f"({_first_line(exc)}); set {AUTOLOAD_ENV}=0 or install the matching CANN toolkit"
            + (f"; {_install_hint()}" if kind == "npu" else "")
        ) from exc
    if kind == "npu":
        import_torch_npu()
    return torch


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__


def _install_hint() -> str:
    """The errors and warnings of the version check, one clause each (empty when all is well)."""
    from calibration import npu_env

    found = npu_env.compat_findings(npu_env.installed())
    return "; ".join(f.text for f in found if f.level != "ok") or "torch / torch_npu versions look consistent"


def import_torch_npu() -> ModuleType:
    """Import torch_npu; any failure (ImportError, RuntimeError, or the plain Exception torch_npu raises for
    a missing driver) becomes one MissingDependencyError line that says what to install."""
    try:
        import torch_npu  # type: ignore[import-not-found]
    except Exception as exc:  # torch_npu raises ImportError, RuntimeError and plain Exception at import
        raise MissingDependencyError(
            f"--device npu: torch_npu is not importable ({_first_line(exc)}); {_install_hint()}; "
            "and run CANN's set_env.sh (`source /usr/local/Ascend/ascend-toolkit/set_env.sh`)"
        ) from exc
    return torch_npu  # type: ignore[no-any-return]


def tensor_device(torch: Any, accel: Any, spec: DeviceSpec) -> Any:
    """torch.device for tensors of `spec`. The one seam for tests/fake_npu: a device module that sets
    `fake_tensor_device` (the CPU test double) places tensors there; real torch.cuda / torch.npu do not."""
    fake = getattr(accel, "fake_tensor_device", None)
    return torch.device(fake if isinstance(fake, str) else spec.text)


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.OutOfMemoryError, or a RuntimeError whose text says so ("NPU out of memory", CUDA's)."""
    return type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower()


@dataclass
class Backend:
    """A torch device plus the few calls that differ between cpu, cuda and npu."""

    spec: DeviceSpec
    torch: Any
    device: Any
    accel: Any | None  # torch.cuda or torch.npu; None on cpu
    notes: list[str] = field(default_factory=list)
    caps: Any | None = None  # npu_caps.SocCaps on npu: what this SoC measures, skips, attempts
    graph_state: str = "untried"  # "captured" once a capture worked; else why graphs are off

    @property
    def kind(self) -> str:
        """cpu, cuda or npu."""
        return self.spec.kind

    @property
    def compute_dtype(self) -> Any:
        """The dtype of the "bf16" benchmarks: bfloat16, or float16 on a SoC without bf16 (310P)."""
        name = self.caps.compute_dtype if self.caps is not None else "bf16"
        return self.torch.float16 if name == "fp16" else self.torch.bfloat16

    def empty_cache(self) -> None:
        """Release cached device memory (after an out-of-memory benchmark)."""
        import gc

        gc.collect()
        if self.accel is not None and hasattr(self.accel, "empty_cache"):
            self.accel.empty_cache()

    def run_guarded(self, label: str, bench: Callable[[], object], notes: list[str]) -> bool:
        """Run one benchmark so that it can only fail alone: a skip from the SoC plan, an out-of-memory
        error or any other exception becomes one line in `notes`; rows it recorded before are kept."""
        verdict, reason = self.caps.decision(label) if self.caps is not None else ("measure", "")
        if verdict == "skip":
            notes.append(f"{label}: skipped on {self.caps.soc} ({reason})")  # type: ignore[union-attr]
            return False
        try:
            bench()
        except Exception as exc:  # isolation is the point: one benchmark's failure never ends the run
            self.empty_cache()
            what = "out of memory" if is_out_of_memory(exc) else "failed"
            tried = f" [{reason}]" if verdict == "attempt" else ""
            notes.append(f"{label}: {what} ({_first_line(exc)}){tried}; rows measured before it are kept")
            return False
        return True

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
        return time_calls(self.accel, fn, inner=inner)

    def samples(self, fn: Callable[[], object], *, warmup: int, repeats: int, inner: int = 1) -> list[float]:
        """Warm up, then `repeats` timings of `inner` calls each, in seconds per call."""
        for _ in range(warmup):
            fn()
        self.synchronize()
        return [self.timer(fn, inner=inner) for _ in range(repeats)]

    def capture_graph(self, fn: Callable[[], object]) -> Callable[[], None] | None:
        """Capture fn into a device graph (CUDA graph / NPU aclgraph); its replay, or None: on cpu, when this
        build has no graph class (torch_npu for CANN 8.0.0), or when capture is refused (torch_npu with
        TASK_QUEUE_ENABLE=2) or fails. The first refusal is noted and later captures are not retried, so
        callers label those timings eager."""
        if self.accel is None or self.graph_state not in ("untried", "captured"):
            return None
        graph_cls = getattr(self.accel, "CUDAGraph", None) or getattr(self.accel, "NPUGraph", None)
        graph_ctx = getattr(self.accel, "graph", None)
        if graph_cls is None or graph_ctx is None:
            self._graphs_off(f"no graph class in this {self.kind} build (torch_npu for CANN 8.0.0 has none)")
            return None
        try:
            graph = _capture(self.accel, fn, graph_cls(), graph_ctx)
        except Exception as exc:  # capture refused or failed: fall back to eager, say why once
            self._graphs_off(f"graph capture failed ({_first_line(exc)}){_task_queue_hint(self.kind)}")
            return None
        self.graph_state = "captured"
        return graph.replay  # type: ignore[no-any-return]

    def _graphs_off(self, reason: str) -> None:
        self.graph_state = reason
        self.notes.append(f"{self.kind}: {reason}; graph benchmarks timed eager and labelled eager")

    def provenance(self) -> dict[str, str]:
        """versions() plus, on npu, the settings that decide the numbers and the graph mode used."""
        out = self.versions()
        if self.kind == "npu":
            from calibration import npu_env

            out.update({f"env.{k}": v for k, v in npu_env.settings().items()})
        if self.kind != "cpu":
            out["graph_mode"] = "graph" if self.graph_state == "captured" else f"eager ({self.graph_state})"
        return out


def _capture(accel: Any, fn: Callable[[], object], graph: Any, graph_ctx: Any) -> Any:
    """Warm fn up on a side stream, then capture one call into `graph` (the CUDA-graph recipe)."""
    stream = accel.Stream()
    stream.wait_stream(accel.current_stream())
    with accel.stream(stream):
        for _ in range(3):
            fn()
    accel.current_stream().wait_stream(stream)
    with graph_ctx(graph):
        fn()
    accel.synchronize()
    return graph


def _task_queue_hint(kind: str) -> str:
    if kind == "npu" and os.environ.get("TASK_QUEUE_ENABLE") == "2":
        return "; torch_npu refuses capture with TASK_QUEUE_ENABLE=2: set TASK_QUEUE_ENABLE=1 to time graphs"
    return ""


def _npu_versions() -> dict[str, str]:
    """torch_npu, CANN (torch_npu's own API, else the toolkit's install-info file), SoC name and id."""
    from calibration import npu_env

    out: dict[str, str] = {}
    try:
        import torch_npu

        out["torch_npu"] = str(getattr(torch_npu, "__version__", "unknown"))
        out["cann"] = npu_env.cann_from_torch_npu(torch_npu) or npu_env.cann_from_files()[0] or "unknown"
        out["soc_name"] = str(torch_npu.npu.get_device_name(0))
        soc = getattr(torch_npu.npu.utils, "get_soc_version", None)
        if soc is not None:
            out["soc_version"] = str(soc())
    except Exception as exc:  # provenance is best effort; the benchmarks already imported torch_npu
        out["torch_npu"] = out.get("torch_npu", f"query failed ({_first_line(exc)})")
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
    backend = Backend(spec=spec, torch=torch, device=tensor_device(torch, accel, spec), accel=accel)
    if spec.kind == "npu":
        _plan_npu(backend)
    return backend


def _plan_npu(backend: Backend) -> None:
    """Attach the SoC's benchmark plan and note the version check's warnings (errors stop the run)."""
    from calibration import npu_caps, npu_env

    backend.caps = npu_caps.caps_for(backend.device_name())
    found = npu_env.merged(npu_env.installed(), _npu_versions(), torch_version=str(backend.torch.__version__))
    findings = npu_env.compat_findings(found) + npu_env.soc_findings(backend.caps.soc, found.cann)
    errors = [f.text for f in findings if f.level == "error"]
    if errors:
        raise MissingDependencyError(f"--device {backend.spec.text}: {'; '.join(errors)}")
    backend.notes.extend(f"version check: {f.text}" for f in findings if f.level == "warn")


def time_calls(accel: Any | None, fn: Callable[[], object], *, inner: int) -> float:
    """Seconds per call of `inner` back-to-back calls: timed with the accelerator module's events (torch.cuda,
    torch.npu), or with the host clock when `accel` is None (cpu)."""
    if accel is None:
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        return (time.perf_counter() - start) / inner
    begin, end = accel.Event(enable_timing=True), accel.Event(enable_timing=True)
    begin.record()
    for _ in range(inner):
        fn()
    end.record()
    end.synchronize()
    return float(begin.elapsed_time(end)) * units.MS_S / inner  # events report milliseconds


def square_gemm(backend: Any, n: int, dtype: Any) -> Callable[[], Callable[[], object]]:
    """A factory of an n x n x n matmul closure in `dtype` on the backend's device (inputs made when called,
    so an unsupported dtype raises there)."""
    torch, dev = backend.torch, backend.device

    def make() -> Callable[[], object]:
        a, b = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
        return lambda: a @ b

    return make


def median_and_spread(values: list[float]) -> tuple[float, float]:
    """Median and relative spread ((max - min) / median) of timing samples."""
    middle = statistics.median(values)
    spread = (max(values) - min(values)) / middle if middle > 0 else 0.0
    return middle, spread
