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
    repeats counted once."""
    from planner.importers.benchpoints import read_bench_rows
    from planner.importers.benchsetup import rows_for

    steps, serving = read_bench_rows(points_csv)
    kept = rows_for(steps, serving, hardware=hardware, engine=engine, one_engine=fit)
    return unique_rows(*kept, to_stderr=as_json)


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
            units.fmt_ms(p.decode_step_s),
            units.fmt_ms(p.decode_step_s * (1 + error)),
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
) -> dict[str, object]:
    """`validate --json`: the card predicted with (None: each row's own) and rows_json's rows and MAPEs."""
    return {
        "card": None if hardware is None else hardware.id,
        **rows_json(points, step_errors, rows, serving_errors),
    }


def rows_json(
    points: Sequence[BenchPoint],
    step_errors: Sequence[float],
    rows: Sequence[ServingPoint],
    serving_errors: Sequence[float],
) -> dict[str, object]:
    """Every row measured vs predicted (decode step in s; serving output tok/s), its relative error
    (predicted / measured - 1), the mean absolute error of each kind (None without rows): `validate --json`
    and `calibrate --from-bench --json` (there the error is the fit's residual)."""
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
         "predicted_output_tokens_per_s": r.output_tokens_per_s * (1 + e), "error_fraction": e}
        for r, e in zip(rows, serving_errors, strict=True)
    ]  # fmt: skip
    return {
        "decode_steps": steps,
        "decode_step_mape_fraction": _error_summary(list(step_errors))[0] if step_errors else None,
        "serving": serving,
        "serving_mape_fraction": _error_summary(list(serving_errors))[0] if serving_errors else None,
    }


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
