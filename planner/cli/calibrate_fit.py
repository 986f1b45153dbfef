"""`kvplan calibrate --from-bench`'s report of a fit (planner/fit/solver.py's FitResult): the fitted terms as
text or one JSON object, the held-out test over models the fit did not see (planner/fit/holdout.py), and the
profile's `measured` block. The fit and the refits are called by planner/cli/calibrate.py (fit_from_bench,
held_out_errors); the rows' reading and tables: calibrate_bench.py.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from planner import units
from planner.errors import PoorFitError

if TYPE_CHECKING:
    from planner.fit.holdout import HeldOut, HeldOutErrors
    from planner.fit.result import FitResult
    from planner.importers.benchpoints import BenchPoint, ServingPoint
    from planner.schema import HardwareProfile, MeasuredBlock


@dataclass(frozen=True)
class HeldOutReport:
    """Leave-one-model-out over a fit's serving rows: how many models they span, how many it needs, and what
    it found (None: not run, fewer models than needed, or no refit held)."""

    models: int
    models_needed: int
    found: HeldOut | None

    @property
    def tested(self) -> bool:
        return self.models >= self.models_needed

    def line(self) -> str:
        """The sentence printed and kept in the profile's notes."""
        if not self.tested:
            return (
                f"held out: not tested ({self.models} model(s); leave-one-model-out needs "
                f"{self.models_needed}): plans print the assumed fit range"
            )
        if self.found is None:
            return "held out: no refit without one model held"
        low, high, count = self.found.factors
        return (
            f"held out: {int(count)} rows of {self.found.models} models, each predicted by a fit without its "
            f"model: median |error| {units.fmt_fraction(self.found.median_abs_error)}; central 90 % ran at "
            f"{low:g}x-{high:g}x the estimate"
        )


def fit_block(
    result: FitResult,
    *,
    points: Sequence[BenchPoint],
    rows: Sequence[ServingPoint],
    held: HeldOutReport | None,
    points_csv: Path,
    hw: HardwareProfile,
) -> MeasuredBlock:
    """The profile's `measured` block of a --from-bench fit."""
    from planner.schema import MeasuredBlock

    return MeasuredBlock(
        tool="kvplan calibrate --from-bench",
        tool_version="0.1.0",
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        device_name=f"fit to {points_csv.name} ({len(points)} points"
        + (f", {len(rows)} serving rows" if rows else "")
        + f"; engine {', '.join(engines(points, rows))})",
        backend="bench-fit",
        coefficients=result.coefficients,
        memory_bandwidth_gb_per_s=hw.measured.memory_bandwidth_gb_per_s if hw.measured else None,
        usable_memory_gib=hw.measured.usable_memory_gib if hw.measured else None,
        samples=fit_samples(result, points=points, rows=rows, held_out=_kept(held)),
        notes=fit_notes(result, held_out=_kept(held)),
    )


def engines(points: Sequence[BenchPoint], rows: Sequence[ServingPoint]) -> list[str]:
    """The engines the rows ran on, sorted (a fit's rows share one: benchsetup.rows_for)."""
    return sorted({p.engine for p in points} | {r.engine for r in rows})


def _kept(held: HeldOutReport | None) -> tuple[list[float], str] | None:
    """(held_out_factors, line) the profile keeps: only where leave-one-model-out found something."""
    return None if held is None or held.found is None else (held.found.factors, held.line())


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
    typer.echo(
        "fitted terms (value, x/ one-sigma factor; 'rows' = set by the rows, 'prior' = held by the profile):"
    )
    for term in fitted_terms(result):
        mark = f", ON {str(term['bound']).upper()} BOUND" if term["bound"] else ""
        typer.echo(
            f"  {term['name']!s:32s} {term['value']:10.4g}  x/ {term['one_sigma_factor']:.2f}  "
            f"({term['set_by']}{mark}; {term['meaning']})"
        )
    low_b, high_b, low_c, high_c = result.fit_range
    typer.echo(f"fitted range: batch {low_b:g}-{high_b:g}, ctx {low_c:g}-{high_c:g} tokens")
    for line in result.warnings:
        typer.echo(f"warning: {line}")


def fitted_terms(result: FitResult) -> list[dict[str, object]]:
    """Every FIT_PARAM: value = exp(log value) in the term's own unit (its name's suffix), one-sigma factor =
    exp(sigma_log), set by 'rows' or 'prior', the bound it sits on ('lower', 'upper' or None)."""
    from planner.perf.fitted_params import FIT_PARAMS

    return [
        {"name": param.name, "value": math.exp(u), "one_sigma_factor": math.exp(sigma),
         "set_by": "rows" if decided else "prior", "bound": side or None, "meaning": param.meaning}
        for param, u, sigma, decided, side in zip(
            FIT_PARAMS, result.log_values, result.sigma_log, result.decided_by_data, result.bounds,
            strict=True,
        )
    ]  # fmt: skip


def fit_json(result: FitResult, *, held: HeldOutReport | None, written: Path) -> dict[str, object]:
    """`calibrate --from-bench --json` after the card, engine, file and rows_json's rows (each row's error:
    the fit's residual): the fit's quality, its terms, the coefficients written, the rows' range, the
    held-out test, the warnings and the profile written."""
    low_b, high_b, low_c, high_c = result.fit_range
    return {
        "mape_fraction": result.mape_fraction,
        "worst_fraction": result.worst_fraction,
        "iterations": result.iterations,
        "converged": result.converged,
        "fitted_terms": fitted_terms(result),
        "coefficients": result.coefficients.model_dump(mode="json"),
        "fit_range": {
            "batch_min": low_b,
            "batch_max": high_b,
            "ctx_min_tokens": low_c,
            "ctx_max_tokens": high_c,
        },
        "held_out": None if held is None else held_out_json(held),
        "warnings": list(result.warnings),
        "written": str(written),
    }


def held_out_json(held: HeldOutReport) -> dict[str, object]:
    """The held-out test: whether it ran (models >= models_needed), the rows and models it refitted without,
    the median |predicted / measured - 1| of those rows and the central range of measured / predicted
    (low_factor, high_factor: the profile's held_out_factors); None where it found nothing."""
    found = held.found
    return {
        "tested": held.tested,
        "models": held.models,
        "models_needed": held.models_needed,
        "rows": int(found.factors[2]) if found else 0,
        "models_refitted": found.models if found else 0,
        "median_abs_error_fraction": found.median_abs_error if found else None,
        "low_factor": found.factors[0] if found else None,
        "high_factor": found.factors[1] if found else None,
    }


def held_out(
    rows: list[ServingPoint], hw: HardwareProfile, *, say: bool, errors: HeldOutErrors
) -> HeldOutReport | None:
    """Leave-one-model-out over the serving rows (planner/fit/holdout.py; `errors`: the refit and prediction,
    calibrate.held_out_errors) when they span enough models (None without serving rows); `say`: print what it
    runs and finds (text; --json carries the report)."""
    from planner.fit import holdout

    if not rows:
        return None
    models = len({row.model for row in rows})
    report = HeldOutReport(models=models, models_needed=holdout.MIN_MODELS, found=None)
    if report.tested:
        if say:
            typer.echo(f"leave-one-model-out: refitting {models} times, each without one model's rows ...")
        report = HeldOutReport(
            models=models,
            models_needed=report.models_needed,
            found=holdout.summary(rows, hardware=hw, errors=errors),
        )
    if say and (report.found is not None or not report.tested):
        typer.echo(report.line())
    return report


WORST_ROWS_NAMED = 3  # rows a refused fit names, largest |residual| first


def poor_fit_error(
    result: FitResult, *, points: Sequence[BenchPoint], rows: Sequence[ServingPoint], points_csv: Path
) -> PoorFitError:
    """The refusal of a fit whose quality warning says not to trust it: its MAPE, the rows it misses most
    (their residuals), and the flag that writes it anyway."""
    from planner.perf.fitted import POOR_FIT_FRACTION

    wheres = [*(p.where for p in points), *(r.where for r in rows)]
    errors = result.residual_fractions
    order = sorted(range(len(errors)), key=lambda i: -abs(errors[i]))[:WORST_ROWS_NAMED]
    worst = ", ".join(f"{wheres[i]} {errors[i] * units.PERCENT:+.0f} %" for i in order)
    mape, limit = units.fmt_fraction(result.mape_fraction), units.fmt_fraction(POOR_FIT_FRACTION)
    return PoorFitError(
        f"--from-bench {points_csv}: the fit misses its own rows by {mape} on average, worst {worst} "
        f"(expected <= {limit}); nothing written: its profile would predict nothing right. Check those rows "
        "(ttft_s / tpot_s in seconds, one set-up per row) or pass --accept-poor-fit to write it anyway"
    )
