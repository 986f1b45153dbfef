"""`kvplan calibrate --from-bench` and `kvplan validate`'s rows: read a bench CSV, fit or predict, print
each row predicted vs measured (rich tables), and write the fitted profile (parse -> call -> format).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from planner import units
from planner.errors import PlanInputError

if TYPE_CHECKING:
    from planner.importers.benchpoints import BenchPoint, ServingPoint
    from planner.schema import HardwareProfile


def read_rows(
    points_csv: Path,
    *,
    hardware: HardwareProfile | None,
    engine: str | None,
    fit: bool,
    as_json: bool = False,
) -> tuple[list[BenchPoint], list[ServingPoint]]:
    """The CSV's rows a command reads for --card `hardware` and --engine (planner/importers/benchsetup.py:
    a row of another card, or of another engine, refuses the file; a fit's rows share one engine), exact
    repeats counted once; as text, a warning line per row whose tpot_s its own throughput rules out."""
    from planner.importers.benchpoints import read_bench_rows
    from planner.importers.benchsetup import rows_for

    steps, serving = read_bench_rows(points_csv)
    kept = rows_for(steps, serving, hardware=hardware, engine=engine, one_engine=fit)
    points, rows = unique_rows(*kept, to_stderr=as_json)
    for line in [] if as_json else tpot_warnings(rows):  # --json: each row's tpot_warning (rows_json)
        typer.echo(f"warning: {line}")
    return points, rows


def tpot_warnings(rows: Sequence[ServingPoint]) -> list[str]:
    """The rows whose tpot_s their own throughput and concurrency rule out (importers/rowchecks.py)."""
    from planner.importers.rowchecks import tpot_warning

    return [line for line in map(tpot_warning, rows) if line is not None]


def _print_errors(
    title: str, columns: tuple[str, ...], cells: list[list[str]], errors: list[float], *, width: int
) -> tuple[float, int]:
    """Print a predicted-vs-measured table (each row's cells, then its error in %); (MAPE, worst row)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in (*columns, "error"):
        table.add_column(column, justify="left" if column in ("point", "model") else "right")
    for row, error in zip(cells, errors, strict=True):
        table.add_row(*row, f"{error * units.PERCENT:+.1f} %")
    Console(width=width).print(table)
    return _error_summary(errors)


def print_points(points: list, errors: list[float], *, hw_id: str) -> None:  # type: ignore[type-arg]
    cells = [
        [
            p.where.rsplit("/", 1)[-1],
            p.model,
            str(p.tp),
            str(p.batch),
            str(p.ctx_tokens),
            units.fmt_duration(p.decode_step_s),
            units.fmt_duration(p.decode_step_s * (1 + error)),
        ]
        for p, error in zip(points, errors, strict=True)
    ]
    columns = ("point", "model", "tp", "batch", "ctx", "measured", "predicted")
    mape, worst = _print_errors(
        f"decode step, predicted vs measured ({hw_id})", columns, cells, errors, width=120
    )
    typer.echo(
        f"MAPE {units.fmt_fraction(mape)}; worst {errors[worst] * units.PERCENT:+.1f} % at "
        f"{points[worst].where} ({points[worst].model}, batch {points[worst].batch}, "
        f"ctx {points[worst].ctx_tokens})"
    )


def _error_summary(errors: list[float]) -> tuple[float, int]:
    """(mean absolute error, index of the largest absolute error) of relative errors (non-empty)."""
    return sum(abs(e) for e in errors) / len(errors), max(range(len(errors)), key=lambda i: abs(errors[i]))


def print_serving(rows: list, errors: list[float], *, hw_id: str) -> None:  # type: ignore[type-arg]
    cells = [
        [
            r.where.rsplit("/", 1)[-1],
            r.model,
            str(r.tp) + (f" x dp{r.dp}" if r.dp > 1 else "") + (f" ep{r.ep}" if r.ep > 1 else ""),
            str(r.concurrency),
            f"{r.input_tokens}/{r.output_tokens}",
            str(r.mtp),
            units.fmt_tokens_per_s(r.output_tokens_per_s),
            units.fmt_tokens_per_s(r.output_tokens_per_s * (1 + error)),
        ]
        for r, error in zip(rows, errors, strict=True)
    ]
    columns = ("point", "model", "tp", "conc", "in/out", "mtp", "measured", "predicted")
    arrivals = ", ".join(dict.fromkeys(r.arrivals for r in rows))  # the rows' own (column arrivals)
    title = f"serving output tok/s, predicted vs measured ({hw_id}; closed loop, {arrivals})"
    mape, worst = _print_errors(title, columns, cells, errors, width=140)
    typer.echo(
        f"serving MAPE {units.fmt_fraction(mape)}; worst {errors[worst] * units.PERCENT:+.1f} % at "
        f"{rows[worst].where} ({rows[worst].model}, concurrency {rows[worst].concurrency})"
    )


def card_of_bench(points_csv: Path) -> str:
    """The one card a bench CSV's rows name (its `card` column), for --from-bench without --card."""
    from planner.importers.benchpoints import read_bench_rows

    steps, serving = read_bench_rows(points_csv)
    cards = sorted({str(row.card) for row in steps} | {str(row.card) for row in serving})
    if len(cards) != 1:
        raise PlanInputError(
            f"--card: required when {points_csv} names more than one card "
            f"(got {', '.join(cards) or 'none'}, expected one card column value or --card)"
        )
    return cards[0]


def unique_rows(
    points: list[BenchPoint], rows: list[ServingPoint], *, to_stderr: bool = False
) -> tuple[list[BenchPoint], list[ServingPoint]]:
    """The rows with exact repeats dropped (each costs a fit or a prediction), said in one line (on stderr
    with `to_stderr`: --json's stdout holds the result alone; else on stdout, where an error line stays
    stderr's only line)."""
    from planner.importers.benchpoints import without_repeats

    (points, dropped_points), (rows, dropped_rows) = without_repeats(points), without_repeats(rows)
    if dropped_points or dropped_rows:
        typer.echo(
            f"note: {dropped_points + dropped_rows} repeated row(s) (every column equal to an earlier row) "
            f"counted once",
            err=to_stderr,
        )
    return points, rows


def validation_json(
    points: list[BenchPoint],
    step_errors: list[float],
    rows: list[ServingPoint],
    serving_errors: list[float],
    *,
    hardware: HardwareProfile | None,
    latency_errors: Sequence[LatencyErrors] | None = None,
) -> dict[str, object]:
    """`validate --json`: the card predicted with (None: each row's own) and rows_json's rows and MAPEs."""
    return {
        "card": None if hardware is None else hardware.id,
        **rows_json(points, step_errors, rows, serving_errors, latency_errors=latency_errors),
    }


LatencyErrors = tuple[
    float | None, float | None
]  # predicted / measured - 1 of (TTFT, TPOT); None: not stated


def rows_json(
    points: Sequence[BenchPoint],
    step_errors: Sequence[float],
    rows: Sequence[ServingPoint],
    serving_errors: Sequence[float],
    *,
    latency_errors: Sequence[LatencyErrors] | None = None,
) -> dict[str, object]:
    """Every row measured vs predicted (decode step in s; serving output tok/s), its relative error
    (predicted / measured - 1), the mean absolute error of each kind (None without rows): `validate --json`
    and `calibrate --from-bench --json` (there the error is the fit's residual). A serving row also carries
    its tpot_warning (importers/rowchecks.py; None: consistent or no TPOT) and, with `latency_errors`
    (validate), its TTFT and TPOT measured, predicted and error (None where the row states none), with
    their MAPEs over the rows that state them."""
    from planner.importers.rowchecks import tpot_warning

    steps = [
        {"where": p.where, "model": p.model, "card": p.card, "engine": p.engine, "tp": p.tp, "batch": p.batch,
         "ctx_tokens": p.ctx_tokens, "measured_decode_step_s": p.decode_step_s,
         "predicted_decode_step_s": p.decode_step_s * (1 + e), "error_fraction": e}
        for p, e in zip(points, step_errors, strict=True)
    ]  # fmt: skip
    serving = [
        {"where": r.where, "model": r.model, "card": r.card, "engine": r.engine, "tp": r.tp, "dp": r.dp,
         "ep": r.ep, "concurrency": r.concurrency, "input_tokens": r.input_tokens,
         "output_tokens": r.output_tokens, "mtp": r.mtp,
         "measured_output_tokens_per_s": r.output_tokens_per_s,
         "predicted_output_tokens_per_s": r.output_tokens_per_s * (1 + e), "error_fraction": e,
         "tpot_warning": tpot_warning(r)}
        for r, e in zip(rows, serving_errors, strict=True)
    ]  # fmt: skip
    latency: dict[str, object] = {}
    if latency_errors is not None:
        for row, (r, errors) in zip(serving, zip(rows, latency_errors, strict=True), strict=True):
            row.update(_latency_json(r, errors))
        latency = {
            f"{name}_mape_fraction": _mape([e[i] for e in latency_errors]) for i, name in enumerate(LATENCIES)
        }
    return {
        "decode_steps": steps,
        "decode_step_mape_fraction": _error_summary(list(step_errors))[0] if step_errors else None,
        "serving": serving,
        "serving_mape_fraction": _error_summary(list(serving_errors))[0] if serving_errors else None,
        **latency,
    }


LATENCIES = ("ttft", "tpot")


def _latency_json(row: ServingPoint, errors: LatencyErrors) -> dict[str, float | None]:
    """measured_<x>_s, predicted_<x>_s = measured x (1 + error), <x>_error_fraction for TTFT and TPOT."""
    out: dict[str, float | None] = {}
    for name, measured, error in zip(LATENCIES, (row.ttft_s, row.tpot_s), errors, strict=True):
        out[f"measured_{name}_s"] = measured
        out[f"predicted_{name}_s"] = None if measured is None or error is None else measured * (1 + error)
        out[f"{name}_error_fraction"] = error
    return out


def _mape(errors: Sequence[float | None]) -> float | None:
    """Mean |error| over the rows that have one; None when none has."""
    stated = [e for e in errors if e is not None]
    return _error_summary(stated)[0] if stated else None


def print_latencies(rows: Sequence[ServingPoint], errors: Sequence[LatencyErrors], *, hw_id: str) -> None:
    """validate's TTFT / TPOT table (the rows stating either: measured, predicted, error; '-' where a row
    states one and not the other), then each quantity's MAPE and worst row."""
    from rich.console import Console
    from rich.table import Table

    stated = [
        (r, e) for r, e in zip(rows, errors, strict=True) if r.ttft_s is not None or r.tpot_s is not None
    ]
    if not stated:
        return
    table = Table(title=f"serving TTFT and TPOT, predicted vs measured ({hw_id})")
    for column in ("point", "conc", "in/out", *(f"{x} {y}" for x in ("TTFT", "TPOT") for y in TRIPLE)):
        table.add_column(column, justify="left" if column == "point" else "right")
    for row, row_errors in stated:
        cells = [_triple(m, e) for m, e in zip((row.ttft_s, row.tpot_s), row_errors, strict=True)]
        table.add_row(row.where.rsplit("/", 1)[-1], str(row.concurrency),
                      f"{row.input_tokens}/{row.output_tokens}", *cells[0], *cells[1])  # fmt: skip
    Console(width=140).print(table)
    for i, name in enumerate(("TTFT", "TPOT")):
        found = [(r.where, error) for r, e in stated if (error := e[i]) is not None]
        if found:
            mape, worst = _error_summary([error for _, error in found])
            typer.echo(
                f"{name} MAPE {units.fmt_fraction(mape)} over {len(found)} row(s); worst "
                f"{found[worst][1] * units.PERCENT:+.1f} % at {found[worst][0]}"
            )


TRIPLE = ("measured", "predicted", "error")


def _triple(measured: float | None, error: float | None) -> tuple[str, str, str]:
    """(measured, predicted, error) cells of one latency; '-' where the row or the prediction has none."""
    if measured is None or error is None:
        return (units.fmt_duration(measured) if measured is not None else "-", "-", "-")
    return (
        units.fmt_duration(measured),
        units.fmt_duration(measured * (1 + error)),
        f"{error * units.PERCENT:+.1f} %",
    )


def prediction_card(
    card: str | None,
    *,
    points: Sequence[BenchPoint],
    rows: Sequence[ServingPoint],
) -> HardwareProfile | None:
    """The profile `kvplan validate` predicts with: --card, else the rows' one card, resolved as the plan
    resolves it for the rows' one engine (its shipped fit: catalog.resolve_card), so validate predicts what
    the plan prints; None where the rows name several cards or engines (each row's own card then)."""
    from planner import catalog
    from planner.engines import registry

    cards = {card} if card is not None else {p.card for p in (*points, *rows)}
    engines = {p.engine for p in points} | {r.engine for r in rows}
    if len(cards) != 1 or len(engines) != 1:
        return None
    engine = engines.pop()
    return catalog.resolve_card(
        cards.pop(), engine=engine, profile_engine=registry.fitted_profile_engine(engine)
    )
