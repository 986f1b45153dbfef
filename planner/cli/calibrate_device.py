"""`kvplan calibrate` on a device: the microbenchmarks (--device, --dry-run, --raw, --budget-s) and `--check`
(parse -> call calibration/ -> format: text, or one JSON object with --json). torch is imported only inside
calibration/, when a run starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from planner.cli.options import print_json

if TYPE_CHECKING:
    from calibration.calibrate import CalibrationResult


def default_device(card: str) -> str:
    from planner import catalog

    return "npu:0" if catalog.resolve_card(card).vendor == "huawei" else "cuda:0"


def run_microbench(
    card: str,
    *,
    device: str,
    model: str | None,
    out: Path,
    force: bool,
    raw: Path | None,
    budget_s: float,
    as_json: bool = False,
) -> None:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from calibration.calibrate import run_calibration
    from calibration.profile_writer import write_atomic, write_profile
    from calibration.raw import write_raw

    for target in (out, raw):  # refuse before minutes of benchmarking, not after
        if target is not None and target.exists() and not force:
            write_atomic(target, "", force=False)  # raises OutputExistsError
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        transient=True,
        disable=as_json,
    ) as bar:
        task = bar.add_task("opening device", total=None)
        result = run_calibration(
            card,
            device=device,
            model=model,
            budget_s=budget_s,
            progress=lambda label: bar.update(task, description=label),
        )
    write_profile(result.source, result.measured, out=out, force=force)
    if raw is not None:
        write_raw(result, raw, force=force)
    if as_json:
        return print_json(microbench_json(result, card=card, device=device, written=out, raw=raw))
    _print_coefficients(
        result.measured.coefficients.model_dump(), title=f"measured on {result.measured.device_name}"
    )
    typer.echo(f"took {result.measurements.elapsed_s:.1f} s; wrote {out}")
    if result.measured.is_dry_run:
        typer.echo(f"{out}: {result.measured.status}; plans on it use the datasheet coefficients", err=True)
    for warning in _not_written(result):
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(f"notes: {result.measured.notes}")


def _not_written(result: CalibrationResult) -> list[str]:
    """The notes saying a coefficient was not written (a benchmark that did not run or hold)."""
    return [note for note in result.measured.notes.split("; ") if note.startswith("not written")]


def microbench_json(
    result: CalibrationResult, *, card: str, device: str, written: Path, raw: Path | None
) -> dict[str, object]:
    """`calibrate --json` after the microbenchmarks: the coefficients written (the profile's names and
    units), where they were measured, how long it took, the profile's calibration status, warnings, notes."""
    from planner import catalog

    measured = result.measured
    return {
        "card": catalog.resolve_card(card).id,
        "device": device,
        "device_name": measured.device_name,
        "backend": measured.backend,
        "dry_run": measured.is_dry_run,
        "status": measured.status,
        "coefficients": measured.coefficients.model_dump(mode="json"),
        "memory_bandwidth_gb_per_s": measured.memory_bandwidth_gb_per_s,
        "usable_memory_gib": measured.usable_memory_gib,
        "elapsed_s": result.measurements.elapsed_s,
        "warnings": _not_written(result),
        "notes": measured.notes,
        "written": str(written),
        "raw_written": None if raw is None else str(raw),
    }


def _print_coefficients(values: dict[str, object], *, title: str) -> None:
    typer.echo(f"coefficients ({title}):")
    for key, value in values.items():
        shown = (
            {k: round(v, 4) if isinstance(v, float) else f"{len(v)} points" for k, v in value.items()}
            if isinstance(value, dict) and key != "attention_kernels"
            else (round(value, 4) if isinstance(value, float) else value)
        )
        typer.echo(f"  {key:32s} {shown}")


def check_device(card: str, *, device: str, dry_run: bool) -> None:
    """Refuse, before any benchmark, a device that cannot measure the card (calibration/device.py)."""
    from calibration.device import check_measures_card, parse_device
    from planner import catalog

    hw = catalog.resolve_card(card)
    check_measures_card(parse_device(device), card_id=hw.id, vendor=hw.vendor, dry_run=dry_run)


def run_check(card: str, *, device: str, as_json: bool) -> None:
    """`--check` (calibration/npu_check.py): the report's lines (--json: with what is missing, each once);
    exit 2 when something is missing."""
    from calibration.npu_check import check
    from planner import catalog

    card_id = catalog.resolve_card(card).id
    report = check(device, card_id=card_id)
    if as_json:
        missing = list(dict.fromkeys(report.missing))
        print_json({"card": card_id, "device": device, "ready": not missing, "missing": missing,
                    "lines": report.lines})  # fmt: skip
    else:
        typer.echo("\n".join(report.lines))
    if report.missing:
        raise typer.Exit(code=2)
