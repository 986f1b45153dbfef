"""`kvplan calibrate` and `kvplan validate`: parse -> call -> format. torch is imported only inside calibrate.

kvplan calibrate --card CARD [--device npu:0|cuda:0|cpu] [--model MODEL] [--out FILE] [--force]
kvplan calibrate --from-bench POINTS.csv [--card CARD] [--engine E] [--out FILE] [--force]
kvplan calibrate --from-log VLLM.log --card CARD [--gpu-memory-utilization U] [--out FILE] [--force]
kvplan validate POINTS.csv [--card CARD] [--engine E] [--uncalibrated]
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from planner import atomic, units
from planner.cli import calibrate_bench as bench_rows
from planner.cli.calibrate_bench import card_of_bench, print_points, print_serving, read_rows, validation_json
from planner.cli.calibrate_log import calibrate_from_log
from planner.cli.options import FRACTION_FLAGS, FlagCommand, JsonOpt, fail, print_json
from planner.errors import KvplanError, PlanInputError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from planner.fit.solver import FitResult
    from planner.importers.benchpoints import BenchPoint, ServingPoint
    from planner.schema import HardwareProfile

CARD_HELP = "Hardware profile id (hwprofiles/) or path to a profile YAML."
ENGINE_HELP = (
    "Engine that ran the points (mindie, vllm, transformers, sglang): fills empty engine cells; a row naming "
    "another engine refuses the file (exit 2)."
)


def _default_device(card: str) -> str:
    from planner import catalog

    return "npu:0" if catalog.resolve_card(card).vendor == "huawei" else "cuda:0"


def _run_microbench(
    card: str, *, device: str, model: str | None, out: Path, force: bool, raw: Path | None, budget_s: float
) -> None:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from calibration.calibrate import run_calibration
    from calibration.profile_writer import write_atomic, write_profile
    from calibration.raw import write_raw

    for target in (out, raw):  # refuse before minutes of benchmarking, not after
        if target is not None and target.exists() and not force:
            write_atomic(target, "", force=False)  # raises OutputExistsError
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True
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
    _print_coefficients(
        result.measured.coefficients.model_dump(), title=f"measured on {result.measured.device_name}"
    )
    typer.echo(f"took {result.measurements.elapsed_s:.1f} s; wrote {out}")
    if result.measured.is_dry_run:
        typer.echo(f"{out}: {result.measured.status}; plans on it use the datasheet coefficients", err=True)
    for note in result.measured.notes.split("; "):
        if note.startswith("not written"):
            typer.echo(f"warning: {note}", err=True)
    typer.echo(f"notes: {result.measured.notes}")


def _print_coefficients(values: dict[str, object], *, title: str) -> None:
    typer.echo(f"coefficients ({title}):")
    for key, value in values.items():
        shown = (
            {k: round(v, 4) if isinstance(v, float) else f"{len(v)} points" for k, v in value.items()}
            if isinstance(value, dict) and key != "attention_kernels"
            else (round(value, 4) if isinstance(value, float) else value)
        )
        typer.echo(f"  {key:32s} {shown}")


def fit_from_bench(card: str, *, points_csv: Path, out: Path, force: bool, engine: str | None) -> None:
    from calibration.profile_writer import write_profile
    from planner import catalog
    from planner.fit import solver
    from planner.schema import MeasuredBlock

    hw = catalog.resolve_card(card)
    points, rows = read_rows(points_csv, hardware=hw, engine=engine, fit=True)
    result = solver.fit_coefficients(points, hardware=hw, serving=rows, source=f"--from-bench {points_csv}")
    if points:
        print_points(points, result.residual_fractions[: len(points)], hw_id=hw.id)
    if rows:
        print_serving(rows, result.residual_fractions[len(points) :], hw_id=hw.id)
    print_fit(result)
    held_out = _held_out(rows, hw)
    measured = MeasuredBlock(
        tool="kvplan calibrate --from-bench",
        tool_version="0.1.0",
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        device_name=f"fit to {points_csv.name} ({len(points)} points"
        + (f", {len(rows)} serving rows" if rows else "")
        + f"; engine {', '.join(sorted({p.engine for p in points} | {r.engine for r in rows}))})",
        backend="bench-fit",
        coefficients=result.coefficients,
        memory_bandwidth_gb_per_s=hw.measured.memory_bandwidth_gb_per_s if hw.measured else None,
        usable_memory_gib=hw.measured.usable_memory_gib if hw.measured else None,
        samples=fit_samples(result, points=points, rows=rows, held_out=held_out),
        notes=fit_notes(result, held_out=held_out),
    )
    source = (
        Path(card)
        if Path(card).suffix in (".yaml", ".yml")
        else catalog.data_dir("hwprofiles") / f"{hw.id}.yaml"
    )
    write_profile(source, measured, out=out, force=force)
    typer.echo(f"wrote {out}")


def fit_samples(
    result: FitResult,
    *,
    points: Sequence[BenchPoint],
    rows: Sequence[ServingPoint],
    held_out: tuple[list[float], str] | None,
) -> dict[str, list[float]]:
    """The measured block's samples of a --from-bench fit: residuals, the measured values, the fitted terms
    (log value, sigma), the fitted range, and the held-out factors when there are any."""
    return (
        {
            "fit_residual_fraction": result.residual_fractions,
            "measured_decode_step_s": [p.decode_step_s for p in points],
            "fit_log_value": result.log_values,
            "fit_sigma_log": result.sigma_log,
            "fit_range": result.fit_range,
        }
        | ({"measured_output_tokens_per_s": [r.output_tokens_per_s for r in rows]} if rows else {})
        | ({"held_out_factors": held_out[0]} if held_out else {})
    )


def fit_notes(result: FitResult, *, held_out: tuple[list[float], str] | None) -> str:
    """The measured block's notes of a --from-bench fit: which terms the rows set, iterations, MAPE and worst
    error, the held-out sentence, the fit's warnings."""
    from planner.perf.fitted_params import FIT_PARAMS

    decided = [p.name for p, d in zip(FIT_PARAMS, result.decided_by_data, strict=True) if d] or ["none"]
    return (
        "MAP fit toward the profile's values (fitted_params.py); set by the rows: "
        f"{', '.join(decided)}; "
        f"{result.iterations} iterations, MAPE {units.fmt_fraction(result.mape_fraction)}, worst "
        f"{units.fmt_fraction(result.worst_fraction)}"
        + (f"; {held_out[1]}" if held_out else "")
        + "".join(f"; warning: {w}" for w in result.warnings)
    )


def print_fit(result: FitResult) -> None:
    """Every fitted term: value, uncertainty factor, whether the rows or the prior set it; then warnings."""
    import math

    from planner.perf.fitted_params import FIT_PARAMS

    typer.echo(
        "fitted terms (value, x/ one-sigma factor; 'rows' = set by the rows, 'prior' = held by the profile):"
    )
    for param, u, sigma, decided, side in zip(
        FIT_PARAMS, result.log_values, result.sigma_log, result.decided_by_data, result.bounds, strict=True
    ):
        mark = f", ON {side.upper()} BOUND" if side else ""
        typer.echo(
            f"  {param.name:32s} {math.exp(u):10.4g}  x/ {math.exp(sigma):.2f}  "
            f"({'rows' if decided else 'prior'}{mark}; {param.meaning})"
        )
    low_b, high_b, low_c, high_c = result.fit_range
    typer.echo(f"fitted range: batch {low_b:g}-{high_b:g}, ctx {low_c:g}-{high_c:g} tokens")
    for line in result.warnings:
        typer.echo(f"warning: {line}")


def _held_out(rows: list[ServingPoint], hw: HardwareProfile) -> tuple[list[float], str] | None:
    """Leave-one-model-out over the serving rows (planner/fit/holdout.py) when they span enough models:
    (held_out_factors, the sentence printed and kept in the profile's notes); None otherwise."""
    from planner.fit import holdout

    models, needed = len({row.model for row in rows}), holdout.MIN_MODELS
    if models < needed:
        if rows:
            typer.echo(
                f"held out: not tested ({models} model(s); leave-one-model-out needs {needed}): plans print "
                "the assumed fit range"
            )
        return None
    typer.echo(f"leave-one-model-out: refitting {models} times, each without one model's rows ...")
    held = holdout.summary(rows, hardware=hw, errors=held_out_errors)
    if held is None:
        return None
    low, high, count = held.factors
    line = (
        f"held out: {int(count)} rows of {held.models} models, each predicted by a fit without its model: "
        f"median |error| {units.fmt_fraction(held.median_abs_error)}; central 90 % ran at {low:g}x-{high:g}x "
        "the estimate"
    )
    typer.echo(line)
    return held.factors, line


def held_out_errors(
    train: Sequence[ServingPoint], test: Sequence[ServingPoint], *, hardware: HardwareProfile
) -> list[float]:
    """predicted / measured - 1 of the `test` rows under a MAP fit on the `train` rows (fit/holdout.py's
    HeldOutErrors: the solver and the roofline prediction composed here, above both; KvplanError when the fit
    refuses the training rows)."""
    from planner.fit import serving_rows, solver

    result = solver.fit_coefficients([], hardware=hardware, serving=train)
    return serving_rows.serving_errors(
        test, hardware=hardware, coefficients=result.coefficients, calibrated=False
    )


def calibrate(
    card: Annotated[
        str | None,
        typer.Option(
            "--card",
            help=CARD_HELP + " With --from-bench: default the CSV's card; a row naming another card, or "
            "another engine than the first row's, refuses the file (exit 2).",
        ),
    ] = None,
    device: Annotated[
        str | None, typer.Option("--device", help="npu:N, cuda:N or cpu (default: by vendor).")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Take benchmark shapes from this model card.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Profile to write (default CARD-calibrated.yaml).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    from_bench: Annotated[
        Path | None,
        typer.Option(
            "--from-bench", help="Fit to measured decode points (CSV) instead of running microbenchmarks."
        ),
    ] = None,
    raw: Annotated[Path | None, typer.Option("--raw", help="Also write every raw sample as JSON.")] = None,
    budget_s: Annotated[
        float, typer.Option("--budget-s", min=1.0, max=600.0, help="Time budget of the microbenchmarks.")
    ] = 60.0,
    engine: Annotated[str | None, typer.Option("--engine", help=ENGINE_HELP)] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Print environment, SoC plan and what is missing; run nothing.")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="With --device cpu: exercise the calibration path on this CPU; the profile is marked "
            "uncalibrated (a CPU says nothing about the card).",
        ),
    ] = False,
    from_log: Annotated[
        Path | None,
        typer.Option(
            "--from-log",
            help="vLLM / vllm-ascend start-up log: learn the device total and the non-KV overheads.",
        ),
    ] = None,
    gpu_memory_utilization: Annotated[
        float | None,
        typer.Option(
            *FRACTION_FLAGS,  # the same share of memory, spelled as on every other command
            min=0.01,
            max=1.0,
            help="With --from-log, when the log does not say it.",
        ),
    ] = None,
) -> None:
    """Measure the card (microbenchmarks) or fit it to your benchmark; write a profile with `measured:`."""
    try:
        if card is None and from_bench is not None:
            card = card_of_bench(from_bench)
        if card is None:
            raise PlanInputError("--card: required (got nothing, expected a card id, e.g. ascend-950pr)")
        check_model_flag(model, reader="--from-bench" if from_bench else "--from-log" if from_log else None)
        if check:
            _check(card, device=device or _default_device(card))
            return
        target = out or Path(f"{Path(card).stem}-calibrated.yaml")
        atomic.check_new({"--out": target, "--raw": raw}, force=force)  # before minutes of work, not after
        if from_log is not None:
            calibrate_from_log(card, log_path=from_log, out=target, force=force, util=gpu_memory_utilization)
            return
        if from_bench is not None:
            fit_from_bench(card, points_csv=from_bench, out=target, force=force, engine=engine)
            return
        _check_device(card, device=device or _default_device(card), dry_run=dry_run)
        _run_microbench(
            card,
            device=device or _default_device(card),
            model=model,
            out=target,
            force=force,
            raw=raw,
            budget_s=budget_s,
        )
    except KvplanError as exc:
        fail(exc)


def check_model_flag(model: str | None, *, reader: str | None) -> None:
    """--model names the card whose shapes the microbenchmarks take: refused with a file the fit reads (its
    rows state their models), an unknown id refused before any device check."""
    if model is None:
        return
    if reader is not None:
        raise PlanInputError(
            f"--model: only the microbenchmarks take shapes from a card (got {model!r} with {reader}, "
            "expected no --model; the file states its models)"
        )
    from planner import catalog

    catalog.resolve_model(model)


def _check_device(card: str, *, device: str, dry_run: bool) -> None:
    """Refuse, before any benchmark, a device that cannot measure the card (calibration/device.py)."""
    from calibration.device import check_measures_card, parse_device
    from planner import catalog

    hw = catalog.resolve_card(card)
    check_measures_card(parse_device(device), card_id=hw.id, vendor=hw.vendor, dry_run=dry_run)


def _check(card: str, *, device: str) -> None:
    """`--check` (calibration/npu_check.py): exit 2 when something is missing."""
    from calibration.npu_check import check
    from planner import catalog

    report = check(device, card_id=catalog.resolve_card(card).id)
    typer.echo("\n".join(report.lines))
    if report.missing:
        raise typer.Exit(code=2)


def validate(
    points_csv: Annotated[Path, typer.Argument(help="CSV of measured decode-step and/or serving rows.")],
    card: Annotated[
        str | None,
        typer.Option("--card", help=CARD_HELP + " A row naming another card refuses the file (exit 2)."),
    ] = None,
    uncalibrated: Annotated[
        bool, typer.Option("--uncalibrated", help="Use datasheet defaults, not measured.")
    ] = False,
    engine: Annotated[str | None, typer.Option("--engine", help=ENGINE_HELP)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Predicted vs measured per row (decode-step rows: step time; serving rows: output tok/s), with MAPE
    and the worst error of each kind."""
    from planner import catalog
    from planner.fit import serving_rows, solver

    try:
        hw = catalog.resolve_card(card) if card is not None else None
        points, rows = read_rows(points_csv, hardware=hw, engine=engine, fit=False, as_json=as_json)
        if not uncalibrated:  # the card as the plan resolves it for the rows' engine (its shipped fit)
            hw = bench_rows.prediction_card(card, points=points, rows=rows) or hw
        step_errors = solver.prediction_errors(points, hardware=hw, calibrated=not uncalibrated)
        serving_errors = serving_rows.serving_errors(rows, hardware=hw, calibrated=not uncalibrated)
        if as_json:
            return print_json(validation_json(points, step_errors, rows, serving_errors, hardware=hw))
        suffix = " uncalibrated" if uncalibrated else ""
        if points:
            hw_id = hw.id if hw else ", ".join(sorted({p.card for p in points}))
            print_points(points, step_errors, hw_id=hw_id + suffix)
        if rows:
            hw_id = hw.id if hw else ", ".join(sorted({r.card for r in rows}))
            print_serving(rows, serving_errors, hw_id=hw_id + suffix)
    except KvplanError as exc:
        fail(exc)


def register(app: typer.Typer) -> None:
    """Add `calibrate` and `validate` to the kvplan app."""
    app.command("calibrate", cls=FlagCommand)(calibrate)
    app.command("validate", cls=FlagCommand)(validate)
