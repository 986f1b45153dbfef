"""Leave-one-model-out: how a `--from-bench` fit predicts a model none of its rows came from.

For every model among the serving rows, the fit is redone on the other models' rows (the same MAP fit, the
same card) and that model's rows are predicted; the errors are what a user of the profile should expect for a
model the profile was not fitted on. `kvplan calibrate --from-bench` records their central
ranges.HELD_OUT_CENTRAL_FRACTION as the profile's speed range (measured.samples.held_out_factors) when the
rows span at least MIN_MODELS models; lab/published/fit_profiles.py reports them per model. The refit and
the prediction come in as one function (HeldOutErrors: planner/cli/calibrate.py held_out_errors composes
fit/solver.py and fit/serving_rows.py), so this loop sits below both.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from planner.errors import KvplanError
from planner.importers.benchpoints import ServingPoint
from planner.perf import ranges
from planner.schema import HardwareProfile

MIN_MODELS = 4  # fewer: each fit would stand on two or three models, too few to say what a new one does


class HeldOutErrors(Protocol):
    """predicted / measured - 1 of the `test` rows under a fit on the `train` rows (KvplanError when the fit
    refuses the training rows): planner/cli/calibrate.py held_out_errors."""

    def __call__(
        self, train: Sequence[ServingPoint], test: Sequence[ServingPoint], *, hardware: HardwareProfile
    ) -> list[float]: ...


def leave_one_model_out(
    rows: Sequence[ServingPoint], *, hardware: HardwareProfile, errors: HeldOutErrors
) -> dict[str, list[float]]:
    """model -> predicted / measured - 1 of its rows under a fit on every other model's rows (`errors`).

    Empty below MIN_MODELS models; a model whose training rows the fit refuses is left out.
    """
    models = sorted({row.model for row in rows})
    if len(models) < MIN_MODELS:
        return {}
    out: dict[str, list[float]] = {}
    for model in models:
        train = [row for row in rows if row.model != model]
        test = [row for row in rows if row.model == model]
        try:
            out[model] = errors(train, test, hardware=hardware)
        except KvplanError:
            continue
    return out


@dataclass(frozen=True)
class HeldOut:
    """What leave-one-model-out found: [low, high, rows] of truth / estimate (held_out_factors), the median
    |error| of the held-out rows, and how many models were refitted without."""

    factors: list[float]
    median_abs_error: float
    models: int


def summary(
    rows: Sequence[ServingPoint], *, hardware: HardwareProfile, errors: HeldOutErrors
) -> HeldOut | None:
    """leave_one_model_out over the rows, summarised (None: fewer than MIN_MODELS models, or no fit held).

    Formula: median_abs_error = median over every held-out row of |predicted / measured - 1|.
    """
    held = leave_one_model_out(rows, hardware=hardware, errors=errors)
    found = [e for model_errors in held.values() for e in model_errors]
    if not found:
        return None
    return HeldOut(
        factors=held_out_factors(found),
        median_abs_error=statistics.median(abs(e) for e in found),
        models=len(held),
    )


def held_out_factors(errors: Sequence[float]) -> list[float]:
    """[low, high, rows]: truth / estimate = 1 / (1 + error) of the held-out rows, their central
    ranges.HELD_OUT_CENTRAL_FRACTION (ranges.central_band: rounded outward, containing 1)."""
    ratios = [1.0 / (1.0 + e) for e in errors]
    low, high = ranges.central_band(ratios, central=ranges.HELD_OUT_CENTRAL_FRACTION)
    return [low, high, float(len(errors))]
