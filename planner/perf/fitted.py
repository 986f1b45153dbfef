"""What a --from-bench fit refuses (garbage) and what it warns about (bounds, quality, the fitted range).

Refused with one line (PlanInputError / DataFileError, exit 2): fewer than MIN_ROWS rows; two rows of the
same set-up whose measurements differ by more than CONTRADICTION_RATIO; a fit that ends non-finite.
Warned: a parameter on its bound, a fit whose MAPE exceeds POOR_FIT_FRACTION (`kvplan calibrate` then writes
no profile: exit 4 unless --accept-poor-fit), and (at prediction time) a batch or context outside the range
the fit saw (`range_warnings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from planner.deployment import Deployment
from planner.errors import DataFileError, PlanInputError
from planner.perf.fitted_params import FIT_PARAMS

if TYPE_CHECKING:  # annotations only: the plan path imports this module, not the bench-row parser
    from planner.importers.benchpoints import BenchPoint, ServingPoint

MIN_ROWS = 2  # one row cannot tell a slope from a level
CONTRADICTION_RATIO = 1.5  # [assumed: run-to-run spread on one set-up is a few %, ACCURACY.md Repeatability]
POOR_FIT_FRACTION = 0.15  # a fit that misses its own rows by more than this is reported as poor
EXTRAPOLATION_FACTOR = 2.0  # a batch or ctx beyond 2x the fitted range (or below half) is extrapolated


def _step_key(p: BenchPoint) -> tuple[object, ...]:
    return (p.model, p.card, p.dtype, p.kv_dtype, p.tp, p.engine, p.batch, p.ctx_tokens)


def _serving_key(p: ServingPoint) -> tuple[object, ...]:
    return (
        p.model, p.card, p.dtype, p.kv_dtype, p.tp, p.engine, p.concurrency, p.input_tokens,
        p.output_tokens, p.mtp, p.mtp_acceptance_fraction, p.speculative_method, p.dp, p.ep, p.max_batch,
        p.prefill_tokens, p.memory_gib, p.engine_version, p.request_rate_per_s,
    )  # fmt: skip


def check_rows(points: Sequence[BenchPoint], serving: Sequence[ServingPoint], *, source: str) -> None:
    """Refuse too few rows and contradictory duplicates (same set-up, measurements > ratio apart)."""
    count = len(points) + len(serving)
    if count < MIN_ROWS:
        raise PlanInputError(
            f"{source}: a fit needs at least {MIN_ROWS} measured rows (got {count}); one row cannot "
            "separate a per-step cost from a bandwidth"
        )
    seen: dict[tuple[object, ...], tuple[str, float]] = {}
    keyed = [(_step_key(p), p.where, p.decode_step_s) for p in points]
    keyed += [(_serving_key(s), s.where, s.output_tokens_per_s) for s in serving]
    for key, where, value in keyed:
        first = seen.setdefault(key, (where, value))
        ratio = max(value, first[1]) / min(value, first[1])
        if ratio > CONTRADICTION_RATIO:
            raise DataFileError(
                f"{where}: contradicts {first[0]}: the same set-up measured {value:.6g} and {first[1]:.6g} "
                f"({ratio:.2f}x apart, expected within {CONTRADICTION_RATIO}x); drop one or tell them apart "
                "(engine, engine_version, dtype, max_num_seqs columns)"
            )


def fitted_range(points: Sequence[BenchPoint], serving: Sequence[ServingPoint]) -> list[float]:
    """[batch min, batch max, ctx min, ctx max] the rows cover (serving: concurrency and input + output)."""
    batches = [p.batch for p in points] + [min(s.concurrency, s.max_batch or s.concurrency) for s in serving]
    contexts = [p.ctx_tokens for p in points] + [s.input_tokens + s.output_tokens for s in serving]
    return [float(min(batches)), float(max(batches)), float(min(contexts)), float(max(contexts))]


def range_warnings(
    fit_range: Sequence[float], *, batch: int, ctx_tokens: int, covered: str = "the fitted range"
) -> list[str]:
    """Lines naming a batch or context outside `covered` ([batch min, batch max, ctx min, ctx max]: the
    fitted range, or a profile's measured tables) by more than EXTRAPOLATION_FACTOR."""
    lines = []
    for label, value, low, high in (
        ("batch", batch, fit_range[0], fit_range[1]),
        ("ctx", ctx_tokens, fit_range[2], fit_range[3]),
    ):
        if value > EXTRAPOLATION_FACTOR * high or value < low / EXTRAPOLATION_FACTOR:
            lines.append(f"{label} {value} is outside {covered} {low:g}-{high:g}: the speed is extrapolated")
    return lines


def bound_warnings(
    values: Sequence[float], bounds: Sequence[str], *, pullers: Mapping[str, Sequence[str]] | None = None
) -> list[str]:
    """One line per parameter that sits on its box, naming the observations that pull it there."""
    lines = []
    for param, value, side in zip(FIT_PARAMS, values, bounds, strict=True):
        if side:
            limit = param.lower if side == "lower" else param.upper
            named = (pullers or {}).get(param.name, [])
            by = f"; pulled there by {', '.join(named)}" if named else ""
            lines.append(
                f"{param.name} = {value:.4g} sits on its {side} bound ({limit:g}): the rows want it beyond "
                f"physical limits; another effect (not in the model) or inconsistent rows{by}"
            )
    return lines


def quality_warnings(mape_fraction: float, worst: str) -> list[str]:
    """A line when the fit misses its own rows by more than POOR_FIT_FRACTION on average."""
    if mape_fraction <= POOR_FIT_FRACTION:
        return []
    return [
        f"the fit misses its own rows by {mape_fraction:.0%} on average (worst {worst}): the model does not "
        "explain these rows; do not trust predictions from this profile"
    ]


def profile_warnings(dep: Deployment, *, batch: int, ctx_tokens: int) -> list[str]:
    """What a --from-bench profile warns about when used at (batch, ctx_tokens): the parameters its fit
    left on a bound (the "warning:" parts of its notes) and a batch or context outside the fitted range.
    Empty for datasheet, microbenchmark-calibrated or --uncalibrated plans."""
    measured = dep.hardware.measured
    if measured is None or measured.backend != "bench-fit" or not dep.calibrated:
        return []
    lines = [part.strip() for part in measured.notes.split("; warning: ")[1:]]
    fit_range = measured.samples.get("fit_range", [])
    if len(fit_range) == 4:
        lines += range_warnings(fit_range, batch=batch, ctx_tokens=ctx_tokens)
    return lines
