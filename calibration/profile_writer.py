"""Write a hardware profile with a new `measured:` block; every other line of the source is kept verbatim.

The block replaces the source's top-level `measured:` entry (or is appended), the result is validated as a
HardwareProfile before anything is written, and the write is atomic (temp file in the target folder, then
os.replace). An existing output file is overwritten only with force=True.
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from planner import units
from planner.errors import DataFileError, OutputExistsError
from planner.schema import HardwareProfile, MeasuredBlock

_TOP_LEVEL_KEY = re.compile(r"^[A-Za-z_][\w-]*:")
SIGNIFICANT_DIGITS = 5  # measured values carry ~1 % spread; five digits keep rounding far below it


class _FlowListDumper(yaml.SafeDumper):
    """Lists of scalars in flow style ([1, 2, 3]) so sample lists stay one line each."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(not isinstance(item, (dict, list)) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_FlowListDumper.add_representer(list, _represent_list)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def measured_yaml(measured: MeasuredBlock) -> str:
    """The `measured:` block as YAML text (top-level key included), floats to SIGNIFICANT_DIGITS digits."""
    body = _rounded(measured.model_dump(mode="json"))
    text = yaml.dump(
        {"measured": body}, Dumper=_FlowListDumper, sort_keys=False, width=110, allow_unicode=True
    )
    return "# written by `kvplan calibrate`; do not edit by hand (re-run it instead)\n" + text


def replace_measured(source_text: str, block_text: str) -> str:
    """Source YAML with its top-level `measured:` entry (and its indented lines) replaced by block_text."""
    lines = source_text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("measured:")), None)
    if start is None:
        prefix = source_text if source_text.endswith("\n") else source_text + "\n"
        return prefix + block_text
    end = start + 1
    while end < len(lines) and not _TOP_LEVEL_KEY.match(lines[end]):
        end += 1
    while start > 0 and lines[start - 1].startswith("# written by `kvplan calibrate`"):
        start -= 1
    return "".join(lines[:start]) + block_text + "".join(lines[end:])


def profile_with_measured(source: Path, measured: MeasuredBlock) -> tuple[str, HardwareProfile]:
    """(new YAML text, validated profile) for the profile at `source` with `measured` set."""
    text = replace_measured(source.read_text(encoding="utf-8"), measured_yaml(measured))
    return text, validated_profile(text, where=str(source), what="the new measured block")


def validated_profile(text: str, *, where: str, what: str) -> HardwareProfile:
    """`text` as a HardwareProfile; one DataFileError line naming `where` and `what` was added when it is no
    longer YAML (a profile written as one flow mapping, `{...}`, takes no block appended to it) or fails
    validation (its first error)."""
    try:
        return HardwareProfile.model_validate(yaml.safe_load(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise DataFileError(
            f"{where}: cannot take {what} (the result is not YAML{at}; expected a block-style profile, one "
            "`key: value` per line as hwprofiles/*.yaml, not a flow mapping {...})"
        ) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "profile"
        raise DataFileError(
            f"{where}: the profile with {what} fails validation "
            f"({field}: {first['msg'].removeprefix('Value error, ')})"
        ) from None


def profile_with_coefficients(
    source: Path, measured: MeasuredBlock, updates: dict[str, Any], *, notes: tuple[str, ...]
) -> tuple[str, HardwareProfile]:
    """profile_with_measured for `measured` (the profile's own block) with its coefficients updated by
    `updates` and each of `notes` appended to its notes once (a rerun does not repeat them)."""
    coefficients = measured.coefficients.model_copy(update=updates)
    text = measured.notes or ""
    for note in notes:
        if note not in text:
            text = f"{text}; {note}" if text else note
    return profile_with_measured(
        source, measured.model_copy(update={"coefficients": coefficients, "notes": text})
    )


def write_if_asked(path: Path, text: str) -> None:
    """With --write among the arguments, replace the shipped profile at `path` by `text` (atomically)."""
    if "--write" in sys.argv:
        write_atomic(path, text, force=True)
        print(f"wrote {path}")


def write_atomic(path: Path, text: str, *, force: bool) -> None:
    """Write text atomically via planner.atomic (a .bak keeps what --force replaces).

    OutputExistsError, naming --out, if path exists and not force.
    """
    from planner import atomic

    if atomic.check_replaceable(path) and not force:
        raise OutputExistsError(
            f"--out: {path} already exists (got an existing file, expected a new path); "
            "pass --force to overwrite it (the old file is kept as a .bak)"
        )
    atomic.check_directory(path)  # the rule of every writer: a missing directory is refused, not created
    atomic.write_atomic(path, text, force=force)


def write_profile(source: Path, measured: MeasuredBlock, *, out: Path, force: bool) -> HardwareProfile:
    """Validate the source profile plus `measured`, then write it atomically to `out`; returns the profile."""
    text, profile = profile_with_measured(source, measured)
    write_atomic(out, text, force=force)
    return profile


def samples_from(meas: Any) -> dict[str, list[float]]:
    """Compact sample lists for the profile (datasheet units, overheads in us); raw rows go to JSON."""
    out: dict[str, list[float]] = {}
    for row in meas.rows.get("kernels", []):
        suffix = f"_b{row['batch']}" if "batch" in row else ""
        out[f"kernel_{row['mode']}{suffix}_us"] = [s / units.US_S for s in row["samples_s"]]
    for row in meas.rows.get("step", []):
        out["step_overhead_us"] = [s / units.US_S for s in row["samples_s"]]
    for row in meas.rows.get("stream", []):
        out[f"stream_{row['op']}_gb_per_s"] = [row["bytes"] / s / units.GB_BYTES for s in row["samples_s"]]
    for row in meas.rows.get("gemv", []):  # attention rates live in coefficients.attention_table
        key = f"gemv_{row.get('dtype', 'bf16')}_gb_per_s"
        out.setdefault(key, []).append(row["bytes"] / row["median_s"] / units.GB_BYTES)
    for bench in ("gemm", "prefill_gemm"):
        for row in meas.rows.get(bench, []):
            key = f"{bench}_{row['dtype']}_tflop_per_s"
            out.setdefault(key, []).append(row["flop"] / row["median_s"] / units.TFLOP)
    out.update(moe_and_link_samples(meas))
    spreads = [r["spread_fraction"] for rows in meas.rows.values() for r in rows]
    if spreads:
        out["spread_fraction_median_max"] = [statistics.median(spreads), max(spreads)]
    out["elapsed_s"] = [meas.elapsed_s]
    return out


def moe_and_link_samples(meas: Any) -> dict[str, list[float]]:
    """Grouped expert GEMM rates (GB/s), whole experts-op and all-reduce medians (us), in row order."""
    out: dict[str, list[float]] = {}
    for row in meas.rows.get("grouped_gemm", []):
        out.setdefault(f"grouped_gemm_{row['op']}_gb_per_s", []).append(
            row["bytes"] / row["median_s"] / units.GB_BYTES
        )
    for row in meas.rows.get("moe_experts", []):
        out.setdefault("moe_experts_op_us", []).append(row["median_s"] / units.US_S)
    for row in meas.rows.get("allreduce", []):
        out.setdefault(f"allreduce_{row['mode']}_us", []).append(row["median_s"] / units.US_S)
    return out
