"""`kvplan calibrate --check`: the environment, what would be measured on this SoC, and what is missing, in a
few seconds and without running a benchmark.

Sections: environment (python, torch, torch_npu, CANN and the settings that decide NPU timings), the version
check (calibration/npu_env.py: exactly what to install), the device (name, memory, count, whether a tiny
graph capture works and whether HCCL is registered), the SoC's benchmark plan (calibration/npu_caps.py), and
the list of what is missing. Works for cpu and cuda too (plan: every benchmark). Not run on an Ascend
machine: on one, the device lines come from torch_npu; here they come from tests/fake_npu.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import Any

from calibration import device as devmod
from calibration import npu_caps, npu_env
from planner.errors import KvplanError

CARD_FAMILY = {"atlas-300i-duo": "310p"}  # profiles whose id does not spell the SoC


@dataclass
class CheckReport:
    """Printable lines and the blocking problems among them (empty: ready to calibrate)."""

    lines: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def add(self, key: str, value: str) -> None:
        """One aligned `key  value` line."""
        self.lines.append(f"  {key:24s} {value}")


def card_family(card_id: str) -> str:
    """SoC family a hardware profile id names (ascend-910b4 -> 910b), for the card-vs-device check."""
    return CARD_FAMILY.get(card_id) or npu_caps.soc_family(card_id.replace("-", ""))


def _environment(report: CheckReport, kind: str, backend: devmod.Backend | None) -> npu_env.Installed:
    found = npu_env.installed()
    if backend is not None and kind == "npu":
        found = npu_env.merged(found, backend.versions(), torch_version=str(backend.torch.__version__))
    report.lines.append("environment")
    report.add("python", platform.python_version())
    report.add("torch", found.torch or "not installed")
    if kind == "npu":
        report.add("torch_npu", found.torch_npu or "not installed")
        report.add("CANN", f"{found.cann} ({found.cann_source})" if found.cann else "not found")
        values = npu_env.settings()
        for key, value in values.items():
            report.add(key, value)
        for finding in npu_env.settings_findings(values):
            report.add(finding.level, finding.text)
            report.missing.append(finding.text)
    return found


def _versions(report: CheckReport, found: npu_env.Installed) -> None:
    report.lines.append(f"version check ({npu_env.TABLE_SOURCE})")
    for finding in npu_env.compat_findings(found):
        report.add(finding.level, finding.text)
        if finding.level == "error":
            report.missing.append(finding.text)


def _graph_line(backend: devmod.Backend) -> str:
    """Try one tiny capture (the same path the benchmarks take); say what happened."""
    x = backend.torch.ones(8, device=backend.device, dtype=backend.compute_dtype)
    replay = backend.capture_graph(lambda: x.mul_(1))
    if replay is not None:
        return "works (graph benchmarks will replay captured graphs)"
    return f"unavailable: {backend.graph_state} (graph benchmarks will be timed eager and labelled eager)"


def _open(report: CheckReport, text: str) -> devmod.Backend | None:
    try:
        return devmod.open_backend(text)
    except KvplanError as exc:
        report.missing.append(str(exc))
        return None


def _device(report: CheckReport, backend: devmod.Backend | None, text: str) -> None:
    report.lines.append("device")
    if backend is None:
        report.add(text, "not opened (see missing)")
        return
    mem = backend.mem_get_info()
    memory = f", {mem[1] / 2**30:.1f} GiB ({mem[0] / 2**30:.1f} GiB free)" if mem else ""
    report.add(backend.spec.text, f"{backend.device_name()}{memory}, {backend.device_count()} visible")
    if backend.kind != "cpu":
        report.add("graph capture", _graph_line(backend))
    if backend.kind == "npu":
        report.add("hccl (all-reduce)", _hccl_line(backend.torch))
    for note in backend.notes:
        report.add("note", note)


def _hccl_line(torch: Any) -> str:
    dist = torch.distributed
    available = getattr(dist, "is_backend_available", None)
    if available is None:
        return "unknown (torch has no is_backend_available)"
    return "registered" if available("hccl") else "not registered (torch_npu did not register it)"


def _plan(report: CheckReport, backend: devmod.Backend | None, card_id: str | None) -> None:
    if backend is None or backend.caps is None:
        kind = backend.kind if backend is not None else "device not opened"
        report.lines.append(f"plan ({kind}): every benchmark; nothing SoC-specific to skip")
        return
    caps = backend.caps
    report.lines.append(f"plan on {caps.soc} (family {caps.family}; from torch_npu's op docs, not run on it)")
    for line in npu_caps.plan_lines(caps, devices=backend.device_count()):
        report.lines.append(f"  {line}")
    if card_id is not None and card_family(card_id) not in (caps.family, "unknown"):
        report.missing.append(
            f"--card {card_id} describes a {card_family(card_id)} but the device is {caps.soc} "
            f"({caps.family}); pass the matching --card"
        )


def check(device: str, *, card_id: str | None = None) -> CheckReport:
    """Everything `kvplan calibrate --check` prints; nothing is benchmarked."""
    spec = devmod.parse_device(device)
    report = CheckReport(lines=[f"kvplan calibrate --check --device {spec.text} (nothing is benchmarked)"])
    backend = _open(report, device)
    found = _environment(report, spec.kind, backend)
    if spec.kind == "npu":
        _versions(report, found)
    _device(report, backend, device)
    _plan(report, backend, card_id)
    report.lines.append("missing")
    report.lines.extend(f"  - {m}" for m in dict.fromkeys(report.missing))
    if not report.missing:
        report.lines.append("  nothing: ready to run `kvplan calibrate` (NPU path never run on hardware)")
    return report
