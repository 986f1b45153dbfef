"""The raw rows of a calibration run as JSON (every sample), and the measured block re-derived from them on
any machine: `python -m calibration.calibrate --from-raw RAW CARD OUT` after a change of the mapping in
calibration/calibrate.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from calibration.calibrate import TOOL, TOOL_VERSION, CalibrationResult, coefficients_from, stream_bytes_per_s
from calibration.microbench import Measurements
from calibration.profile_writer import samples_from
from calibration.shapes import FULL
from planner import catalog, units
from planner.schema import MeasuredBlock


def write_raw(result: CalibrationResult, path: Path, *, force: bool = True) -> None:
    """Every raw benchmark row (all samples) as JSON; atomic, no clobber unless force."""
    from planner import atomic

    payload = {
        "device": result.measured.device_name,
        "date": result.measured.date,
        "versions": result.measured.versions,
        "elapsed_s": result.measurements.elapsed_s,
        "notes": result.measurements.notes,
        "rows": result.measurements.rows,
    }
    atomic.write_atomic(path, json.dumps(payload, indent=1) + "\n", force=force)


def rebuild_from_raw(card: str, raw: Path) -> MeasuredBlock:
    """The measured block re-derived on any machine from a raw JSON of write_raw (same mapping as a run).

    For mapping changes after a device run: the rows are the measurement, the block is derived from them.
    usable_memory_gib (not in the raw rows) is kept from the card's current measured block.
    """
    payload = json.loads(raw.read_text(encoding="utf-8"))
    hw = catalog.resolve_card(card)
    meas = Measurements(device=payload["device"], rows=payload["rows"], notes=list(payload["notes"]))
    meas.elapsed_s = float(payload["elapsed_s"])
    bandwidth = stream_bytes_per_s(meas)
    return MeasuredBlock(
        tool=TOOL,
        tool_version=TOOL_VERSION,
        date=payload["date"],
        device_name=payload["device"],
        backend="cuda" if "cuda" in payload["versions"] else "npu",
        versions=payload["versions"],
        coefficients=coefficients_from(meas, hw, min_attn_bytes=FULL.attn_min_fit_bytes),
        memory_bandwidth_gb_per_s=bandwidth / units.GB_BYTES if bandwidth else None,
        usable_memory_gib=hw.measured.usable_memory_gib if hw.measured else None,
        samples=samples_from(meas),
        notes="; ".join(
            [
                "shapes: standard-8b-class",
                "sizes: full",
                f"took {meas.elapsed_s:.1f} s",
                *dict.fromkeys(meas.notes),
                f"re-derived from {raw.name} by calibration.calibrate --from-raw",
            ]
        ),
    )
