"""`kvplan calibrate` and `kvplan validate`: parse -> call -> format. torch is imported only inside calibrate.

kvplan calibrate --card CARD [--device npu:0|cuda:0|cpu] [--model MODEL] [--out FILE] [--force] [--json]
  (the microbenchmarks and --check: calibrate_device.py)
kvplan calibrate --from-bench POINTS.csv [--card CARD] [--engine E] [--out FILE] [--force] [--accept-poor-fit]
  [--json]
  (the fit's report and profile block: calibrate_fit.py; the fit itself and its held-out refits are called
  here, so the import chain cli -> command -> fit stays within tests/test_layering.py's bound)
kvplan calibrate --from-log VLLM.log --card CARD [--gpu-memory-utilization U] [--out FILE] [--force] [--json]
kvplan validate POINTS.csv [--card CARD] [--engine E] [--uncalibrated] [--json]
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from planner import atomic
from planner.cli import calibrate_bench as bench_rows
from planner.cli import calibrate_device as on_device
from planner.cli import calibrate_fit as fit_report
from planner.cli.calibrate_bench import card_of_bench, print_points, print_serving, read_rows, validation_json
from planner.cli.calibrate_log import calibrate_from_log
from planner.cli.options import FRACTION_FLAGS, FlagCommand, JsonOpt, fail, print_json
from planner.errors import KvplanError, PlanInputError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from planner.importers.benchpoints import ServingPoint
    from planner.schema import HardwareProfile

CARD_HELP = "Hardware profile id (hwprofiles/) or path to a profile YAML."
ENGINE_HELP = (
    "Engine that ran the points (mindie, vllm, transformers, sglang): fills empty engine cells; a row naming "
    "another engine refuses the file (exit 2)."
)


def fit_from_bench(
    card: str,
    *,
    points_csv: Path,
    out: Path,
    force: bool,
    engine: str | None,
    as_json: bool = False,
    accept_poor_fit: bool = False,
) -> None:
    """`--from-bench`: fit (planner/fit/solver.py), test on held-out models, write the profile; print the fit
    as text (the row tables, the terms, the held-out line) or, with --json, as calibrate_fit.fit_json. A fit
    whose quality warning says not to trust it is refused (PoorFitError, exit 4, nothing written) unless
    `accept_poor_fit`."""
    from calibration.profile_writer import write_profile
    from planner import catalog
    from planner.fit import solver

    hw = catalog.resolve_card(card)
    points, rows = read_rows(points_csv, hardware=hw, engine=engine, fit=True, as_json=as_json)
    result = solver.fit_coefficients(points, hardware=hw, serving=rows, source=f"--from-bench {points_csv}")
    step_errors = result.residual_fractions[: len(points)]
    serving_errors = result.residual_fractions[len(points) :]
    if not as_json:
        if points:
            print_points(points, step_errors, hw_id=hw.id)
        if rows:
            print_serving(rows, serving_errors, hw_id=hw.id)
        fit_report.print_fit(result)
    if result.poor_fit and not accept_poor_fit:
        raise fit_report.poor_fit_error(result, points=points, rows=rows, points_csv=points_csv)
    held = fit_report.held_out(rows, hw, say=not as_json, errors=held_out_errors)
    measured = fit_report.fit_block(result, points=points, rows=rows, held=held, points_csv=points_csv, hw=hw)
    source = (
        Path(card)
        if Path(card).suffix in (".yaml", ".yml")
        else catalog.data_dir("hwprofiles") / f"{hw.id}.yaml"
    )
    write_profile(source, measured, out=out, force=force)
    if as_json:
        head = {
            "card": hw.id,
            "engine": ", ".join(fit_report.engines(points, rows)),
            "source": str(points_csv),
        }
        rows_part = bench_rows.rows_json(points, step_errors, rows, serving_errors)
        return print_json(head | rows_part | fit_report.fit_json(result, held=held, written=out))
    typer.echo(f"wrote {out}")


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
    accept_poor_fit: Annotated[
        bool,
        typer.Option(
            "--accept-poor-fit",
            help="With --from-bench: write the profile even when the fit misses its own rows by more than "
            "15 % on average (refused otherwise: exit 4, nothing written).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Measure the card (microbenchmarks) or fit it to your benchmark; write a profile with `measured:`."""
    try:
        if card is None and from_bench is not None:
            card = card_of_bench(from_bench)
        if card is None:
            raise PlanInputError("--card: required (got nothing, expected a card id, e.g. ascend-950pr)")
        flags = {"--device": device, "--raw": raw, "--dry-run": dry_run, "--check": check}
        check_mode_flags(from_bench, from_log, model=model, microbench=flags, accept_poor_fit=accept_poor_fit)
        if check:
            on_device.run_check(card, device=device or on_device.default_device(card), as_json=as_json)
            return
        target = out or Path(f"{Path(card).stem}-calibrated.yaml")
        read = {"--from-log": from_log, "--from-bench": from_bench}  # never written over, --force or not
        atomic.check_new({"--out": target, "--raw": raw}, force=force, inputs=read)  # before minutes of work
        if from_log is not None:
            calibrate_from_log(
                card, log_path=from_log, out=target, force=force, util=gpu_memory_utilization, as_json=as_json
            )
        elif from_bench is not None:
            fit_from_bench(card, points_csv=from_bench, out=target, force=force, engine=engine,
                           as_json=as_json, accept_poor_fit=accept_poor_fit)  # fmt: skip
        else:
            on_device.check_device(card, device=device or on_device.default_device(card), dry_run=dry_run)
            on_device.run_microbench(
                card,
                device=device or on_device.default_device(card),
                model=model,
                out=target,
                force=force,
                raw=raw,
                budget_s=budget_s,
                as_json=as_json,
            )
    except KvplanError as exc:
        fail(exc)


def check_mode_flags(
    from_bench: Path | None,
    from_log: Path | None,
    *,
    model: str | None,
    microbench: Mapping[str, object],
    accept_poor_fit: bool,
) -> None:
    """Flags that belong to another mode refused, each named, rather than ignored: the microbenchmarks' own
    (`microbench`: --device, --raw, --dry-run, --check, given when not None or False) with a file the fit or
    the log reader reads; --from-bench with --from-log; --accept-poor-fit without --from-bench; then
    check_model_flag."""
    if from_bench is not None and from_log is not None:
        raise PlanInputError(
            f"--from-log: one file to learn from (got --from-bench {from_bench} and --from-log {from_log}, "
            "expected one of them: a bench fits speeds, a start-up log sets memory: one run each)"
        )
    reader = "--from-bench" if from_bench else "--from-log" if from_log else None
    typed = [flag for flag, value in microbench.items() if value not in (None, False)]
    if reader is not None and typed:
        value = "" if isinstance(microbench[typed[0]], bool) else f" {microbench[typed[0]]}"
        raise PlanInputError(
            f"{typed[0]}: only the microbenchmarks take it (got {typed[0]}{value} with {reader}, expected "
            f"one or the other; {reader} reads measurements already made)"
        )
    if accept_poor_fit and reader != "--from-bench":
        raise PlanInputError(
            "--accept-poor-fit: only a --from-bench fit can be poor "
            f"(got it with {reader or 'the microbenchmarks'}, expected --from-bench)"
        )
    check_model_flag(model, reader=reader)


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
    """Predicted vs measured per row (decode-step rows: step time; serving rows: output tok/s, and TTFT and
    TPOT where the rows state them), with MAPE and the worst error of each kind; a row whose tpot_s its own
    throughput rules out is named."""
    from planner import catalog
    from planner.fit import serving_rows, solver

    try:
        hw = catalog.resolve_card(card) if card is not None else None
        points, rows = read_rows(points_csv, hardware=hw, engine=engine, fit=False, as_json=as_json)
        if not uncalibrated:  # the card as the plan resolves it for the rows' engine (its shipped fit)
            hw = bench_rows.prediction_card(card, points=points, rows=rows) or hw
        step_errors = solver.prediction_errors(points, hardware=hw, calibrated=not uncalibrated)
        errors = serving_rows.serving_row_errors(rows, hardware=hw, calibrated=not uncalibrated)
        serving_errors, latency_errors = [e[0] for e in errors], [(e[1], e[2]) for e in errors]
        if as_json:
            found = validation_json(
                points, step_errors, rows, serving_errors, hardware=hw, latency_errors=latency_errors
            )
            return print_json(found)
        suffix = " uncalibrated" if uncalibrated else ""
        if points:
            hw_id = hw.id if hw else ", ".join(sorted({p.card for p in points}))
            print_points(points, step_errors, hw_id=hw_id + suffix)
        if rows:
            hw_id = hw.id if hw else ", ".join(sorted({r.card for r in rows}))
            print_serving(rows, serving_errors, hw_id=hw_id + suffix)
            bench_rows.print_latencies(rows, latency_errors, hw_id=hw_id + suffix)
    except KvplanError as exc:
        fail(exc)


def register(app: typer.Typer) -> None:
    """Add `calibrate` and `validate` to the kvplan app."""
    app.command("calibrate", cls=FlagCommand)(calibrate)
    summary = "Predicted vs measured for your bench rows (step time, tok/s, TTFT, TPOT), with MAPE."
    app.command("validate", cls=FlagCommand, short_help=summary)(validate)
