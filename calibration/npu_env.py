"""The Ascend software stack as `kvplan calibrate` sees it, read before torch_npu is imported.

    settings()          the environment variables that decide NPU timings (TASK_QUEUE_ENABLE, ...)
    installed()         torch / torch_npu versions from package metadata (no import) and the CANN version
                        from the toolkit's install-info file, or from torch_npu's own API once imported
    compat_findings()   that combination against torch_npu's published version table: what is wrong and
                        exactly what to install

The table is torch_npu's version mapping table, COMPATIBILITY.md of Ascend/pytorch (TABLE_SOURCE; the
README carried it until 2026-07-20); a newer release is reported as "not in the table", never as wrong.
NOTHING HERE HAS RUN ON AN ASCEND MACHINE: the file locations and version formats follow the CANN install
guides (`<toolkit>/<arch>-linux/ascend_toolkit_install.info`, `version=8.1.RC1`) and torch_npu's
`get_cann_version` documentation.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

# Settings that change what an NPU benchmark measures; recorded in the profile's provenance.
SETTING_KEYS = (
    "TASK_QUEUE_ENABLE",  # 2 (Huawei's recommendation for eager) makes torch_npu refuse graph capture
    "ASCEND_LAUNCH_BLOCKING",  # 1 turns the task queue off and serialises every launch
    "HCCL_OP_EXPANSION_MODE",  # AIV runs collectives on the vector cores (all-reduce latency)
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
    "ASCEND_RT_VISIBLE_DEVICES",
    "PYTORCH_NPU_ALLOC_CONF",
)
TOOLKIT_HOMES = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/cann")
EXTRA_INDEX = "https://download.pytorch.org/whl/cpu"  # x86 torch wheels that torch_npu pins (+cpu)
# 950 support starts with Ascend Extension for PyTorch 26.0.0, which pairs with CANN 9.0.0 (issue 16)
CANN_FOR_950 = (9, 0)


@dataclass(frozen=True)
class CompatRow:
    """One published pairing: torch_npu wheel version, the torch it pins, the CANN line it is built for."""

    torch_npu: str
    torch: str
    cann: str
    extension: str  # Ascend Extension for PyTorch release (the branch suffix, e.g. v2.5.1-7.0.0)


def _rows(cann: str, extension: str, pairs: str) -> tuple[CompatRow, ...]:
    return tuple(
        CompatRow(torch_npu=npu, torch=npu.split(".post")[0], cann=cann, extension=extension)
        for npu in pairs.split()
    )


# Where COMPAT_TABLE comes from: the "TorchNPU version mapping table" of Ascend/pytorch, master at commit
# 9e73e708ab9350d203475609f36f8a43f6a0c2ab (2026-08-21); the file last changed in b48e6481 (2026-08-20).
TABLE_SOURCE = "torch_npu's version table (Ascend/pytorch COMPATIBILITY.md, master 9e73e70, 2026-08-21)"
# [datasheet: TABLE_SOURCE]. Newest first; each line's first row is the one recommended for that CANN line.
# CANN 9.0.0 lists 2.9.0.post2, 2.8.0.post4, 2.7.1.post4 and no 2.10.0: the README listed "2.10.0,
# v2.10.0-26.0.0" under CANN 9.0.0 from 554f7cd1 (2026-06-16) until bba3d1dd (2026-07-20), which moved the
# table to COMPATIBILITY.md without that row (the v2.10.0-26.0.0 branch exists; no release in the table).
COMPAT_TABLE: tuple[CompatRow, ...] = (
    *_rows("9.1.0", "26.1.0", "2.12.0 2.11.0 2.10.0.post4 2.9.0.post6 2.7.1.post8"),
    *_rows("9.0.0", "26.0.0", "2.9.0.post2 2.8.0.post4 2.7.1.post4"),
    *_rows("8.5.0", "7.3.0", "2.9.0 2.8.0.post2 2.7.1.post2 2.6.0.post5"),
    *_rows("8.3.RC1", "7.2.0", "2.8.0 2.7.1 2.6.0.post3 2.1.0.post17"),
    *_rows("8.2.RC1", "7.1.0", "2.6.0 2.5.1.post1 2.1.0.post13"),
    *_rows("8.1.RC1", "7.0.0", "2.5.1 2.4.0.post4 2.3.1.post6 2.1.0.post12"),
    *_rows("8.0.0", "6.0.0", "2.4.0.post2 2.3.1.post4 2.1.0.post10"),
)


@dataclass(frozen=True)
class Finding:
    """One line of the compatibility check: level is ok, warn or error; text says what to do."""

    level: str
    text: str


@dataclass(frozen=True)
class Installed:
    """Versions found on this machine ("" when absent or unknown) and where CANN's came from."""

    torch: str
    torch_npu: str
    cann: str
    cann_source: str


def settings() -> dict[str, str]:
    """SETTING_KEYS -> value ("unset" when the variable is not set)."""
    return {key: os.environ.get(key, "unset") for key in SETTING_KEYS}


def settings_findings(values: dict[str, str]) -> list[Finding]:
    """Settings that would make the benchmarks measure something the engines do not run."""
    if values.get("TASK_QUEUE_ENABLE") == "2":
        return [
            Finding(
                "error",
                "TASK_QUEUE_ENABLE=2 makes torch_npu refuse graph capture, so decode would be timed eager "
                "while MindIE and vllm-ascend replay graphs; `export TASK_QUEUE_ENABLE=1` for calibration",
            )
        ]
    return []


def package_version(name: str) -> str:
    """Installed distribution version from its metadata (no import), "" when not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ""


def toolkit_homes() -> list[Path]:
    """Candidate CANN toolkit folders: set_env.sh's variables first, then the default install paths."""
    named = [os.environ.get(k, "") for k in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH")]
    return [Path(p) for p in dict.fromkeys([*named, *TOOLKIT_HOMES]) if p]


def cann_from_files() -> tuple[str, str]:
    """(version, file) from the first `<home>/<arch>-linux/ascend_toolkit_install.info` with a version=
    line; ("", "") when none is found."""
    arch = platform.machine() or "x86_64"
    for home in toolkit_homes():
        info = home / f"{arch}-linux" / "ascend_toolkit_install.info"
        try:
            text = info.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        match = re.search(r"^version=(\S+)", text, flags=re.MULTILINE)
        if match:
            return match.group(1), str(info)
    return "", ""


def cann_from_torch_npu(torch_npu: Any) -> str:
    """CANN version through torch_npu's own API (documented from CANN 8.1.RC1; "" before, or when the
    function is absent)."""
    for owner in (getattr(torch_npu, "utils", None), getattr(getattr(torch_npu, "npu", None), "utils", None)):
        query = getattr(owner, "get_cann_version", None)
        if query is None:
            continue
        try:
            return str(query(module="CANN"))
        except Exception:  # an old build's signature or a missing info file: fall back to the files
            continue
    return ""


def installed() -> Installed:
    """What is installed, without importing torch or torch_npu."""
    cann, source = cann_from_files()
    return Installed(
        torch=package_version("torch"),
        torch_npu=package_version("torch-npu") or package_version("torch_npu"),
        cann=cann,
        cann_source=source,
    )


def merged(found: Installed, versions: dict[str, str], *, torch_version: str = "") -> Installed:
    """found, completed by what the imported stack reports (calibration.device's versions(): torch_npu's
    __version__, its CANN query) where the metadata or the install-info file had nothing."""
    cann = versions.get("cann", "")
    return Installed(
        torch=found.torch or torch_version,
        torch_npu=found.torch_npu or versions.get("torch_npu", ""),
        cann=found.cann or (cann if cann != "unknown" else ""),
        cann_source=found.cann_source or ("torch_npu.utils.get_cann_version" if cann else ""),
    )


def base_version(version: str) -> str:
    """'2.5.1+cpu' -> '2.5.1', '2.5.1.post1' -> '2.5.1', '2.10.0rc2' -> '2.10.0'."""
    match = re.match(r"^(\d+\.\d+\.\d+)", version)
    return match.group(1) if match else version


def cann_line(version: str) -> tuple[int, int] | None:
    """(major, minor) of a CANN version ('8.1.RC1' -> (8, 1)); None when unparseable or an 8.0 RC
    (8.0.RCn predates 8.0.0 and the table)."""
    match = re.match(r"^(\d+)\.(\d+)\.(\w+)", version.strip())
    if match is None or (match.group(1, 2) == ("8", "0") and match.group(3).upper().startswith("RC")):
        return None
    return int(match.group(1)), int(match.group(2))


def install_command(row: CompatRow) -> str:
    """The pip commands for one table row (x86 takes torch's +cpu wheel from the PyTorch index)."""
    return (
        f"pip install torch-npu=={row.torch_npu} 'torch=={row.torch}' (aarch64); on x86: "
        f"pip install 'torch=={row.torch}+cpu' --index-url {EXTRA_INDEX} && "
        f"pip install torch-npu=={row.torch_npu}"
    )


def rows_for_cann(version: str) -> list[CompatRow]:
    """Published torch_npu rows for this CANN version's line, newest first."""
    line = cann_line(version)
    return [r for r in COMPAT_TABLE if line is not None and cann_line(r.cann) == line]


def _what_to_install(cann: str) -> str:
    rows = rows_for_cann(cann)
    if rows:
        return f"for CANN {cann}: {install_command(rows[0])}"
    return "install CANN first (README: calibration), then the torch_npu row for its line"


def compat_findings(found: Installed) -> list[Finding]:
    """The installed torch / torch_npu / CANN combination checked against COMPAT_TABLE."""
    if not found.torch_npu:
        return [Finding("error", f"torch_npu is not installed; {_what_to_install(found.cann)}")]
    out = [_torch_pin_finding(found)]
    if not found.cann:
        out.append(
            Finding(
                "warn",
                "CANN version not found (no ascend_toolkit_install.info under "
                f"{', '.join(str(h) for h in toolkit_homes())}); run `source <toolkit>/set_env.sh`",
            )
        )
        return out
    out.append(_cann_finding(found))
    return out


def _torch_pin_finding(found: Installed) -> Finding:
    want = base_version(found.torch_npu)
    if not found.torch:
        return Finding("error", f"torch is not installed; torch_npu {found.torch_npu} needs torch=={want}")
    if base_version(found.torch) != want:
        return Finding(
            "error",
            f"torch {found.torch} does not match torch_npu {found.torch_npu} (built for torch {want}); "
            f"pip install 'torch=={want}' (x86: 'torch=={want}+cpu' --index-url {EXTRA_INDEX})",
        )
    return Finding("ok", f"torch {found.torch} matches torch_npu {found.torch_npu}")


def _cann_finding(found: Installed) -> Finding:
    documented = [r for r in COMPAT_TABLE if r.torch_npu == found.torch_npu]
    line_rows = rows_for_cann(found.cann)
    if not documented and line_rows:  # the CANN line is known and this torch_npu is not one of its releases
        published = ", ".join(r.torch_npu for r in line_rows)
        return Finding(
            "error",
            f"torch_npu {found.torch_npu} is not published for CANN {found.cann} (its releases: {published}; "
            f"{TABLE_SOURCE}); {_what_to_install(found.cann)}",
        )
    if not documented:
        return Finding(
            "warn",
            f"torch_npu {found.torch_npu} is not in kvplan's version table ({TABLE_SOURCE}); CANN "
            f"{found.cann} not checked against it",
        )
    if any(cann_line(r.cann) == cann_line(found.cann) for r in documented):
        return Finding("ok", f"torch_npu {found.torch_npu} is published for CANN {found.cann}")
    lines = ", ".join(sorted({r.cann for r in documented}))
    return Finding(
        "error",
        f"torch_npu {found.torch_npu} is published for CANN {lines}, not {found.cann}; "
        f"{_what_to_install(found.cann)}",
    )


def soc_findings(soc: str, cann: str) -> list[Finding]:
    """SoC-specific requirements: the 950 needs CANN >= 9.0.0 (torch_npu extension >= 26.0.0)."""
    line = cann_line(cann) if cann else None
    if soc.startswith("Ascend950") and line is not None and line < CANN_FOR_950:
        rows = [r for r in COMPAT_TABLE if cann_line(r.cann) == CANN_FOR_950]
        return [
            Finding(
                "error",
                f"{soc} needs CANN >= 9.0.0 and torch_npu from Ascend Extension 26.0.0 (got CANN {cann}); "
                f"{install_command(rows[0])}",
            )
        ]
    return []
