"""One-sided (censored) residuals of floor rows: a pass threshold is a lower bound, not a measurement.

A vllm-ascend CI baseline is the base of a pass test (the nightly run passes at >= 0.97 x baseline), so the
run's true output tok/s is at or above floor_fraction x the published figure by a margin nobody published.
A serving row that says so (benchpoints.ServingPoint.floor_fraction) constrains the fit from below: a
prediction under the threshold is an error at the solver's full weight. Above it, a prediction costs nothing,
or, with a margin (ServingPoint.floor_margin_fraction m), costs as a measurement m wide would: the truth is
above the threshold by a margin nobody published, so a floor says little about how far above. Its TTFT and
TPOT, and every other row, keep the two-sided residual. The solver (planner/fit/solver.py) applies this to
its log residuals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from planner.arrays import FloatArray


class Floored(Protocol):
    """What the band reads of a serving row (benchpoints.ServingPoint): its floor, which phases it gives."""

    @property
    def floor_fraction(self) -> float | None: ...
    @property
    def floor_headroom_fraction(self) -> float | None: ...
    @property
    def floor_margin_fraction(self) -> float | None: ...
    @property
    def ttft_s(self) -> float | None: ...
    @property
    def tpot_s(self) -> float | None: ...


def observation_floors(points: Sequence[Floored]) -> FloatArray:
    """Per observation, in prepared.observation_residuals' order, [lower, upper, margin] of the published
    figure: a floor row's output tok/s [floor_fraction, 1 + floor_headroom_fraction, floor_margin_fraction]
    (NaN where the row states none), all NaN elsewhere (a measured row, any TTFT or TPOT: two-sided).
    Shape (3, observations)."""
    out: list[tuple[float, float, float]] = []
    for point in points:
        if point.floor_fraction is None:
            out.append((math.nan, math.nan, math.nan))
        else:
            headroom, margin = point.floor_headroom_fraction, point.floor_margin_fraction
            out.append(
                (
                    point.floor_fraction,
                    math.nan if headroom is None else 1.0 + headroom,
                    math.nan if margin is None else margin,
                )
            )
        out += [(math.nan, math.nan, math.nan)] * ((point.ttft_s is not None) + (point.tpot_s is not None))
    return np.asarray(out, dtype=np.float64).T.reshape(3, -1)


def problem_floors(steps: int, points: Sequence[Floored]) -> FloatArray | None:
    """observation_floors after `steps` two-sided decode-step rows; None when no row is a floor."""
    if not any(point.floor_fraction is not None for point in points):
        return None
    return np.concatenate([np.full((3, steps), np.nan), observation_floors(points)], axis=1)


def censored_log_ratios(log_ratios: FloatArray, bounds: FloatArray, *, noise_fraction: float) -> FloatArray:
    """Each log(pred / published), one-sided (or a band, or margin-weighted) where a floor is given.

    Formula, where lo_i = bounds[0, i] (the floor_fraction f_i) is finite, x_i = log_ratio_i - log(lo_i):
        r_i = min(0, x_i) + max(0, log_ratio_i - log(hi_i)) + (s / m_i) * max(0, x_i)
        lo_i * published_i   the pass threshold: the run's true value is at or above it
        hi_i = bounds[1, i]  1 + an assumed headroom above the floor (NaN: no ceiling, that term is 0)
        m_i = bounds[2, i]   the assumed margin of the truth above the threshold (NaN: that term is 0)
        s                    noise_fraction, the width every measured residual is divided by (solver)
    so a prediction under the threshold pulls as a measurement would; above it, it costs nothing, or with a
    margin costs (x / m)^2 where a measurement costs (x / s)^2 (an excess of m weighs as a miss of s), and
    past a ceiling it pulls fully again; where lo_i is NaN, r_i = log_ratio_i (two-sided).
    """
    lower, upper, margin = bounds
    bounded, capped, weighted = np.isfinite(lower), np.isfinite(upper), np.isfinite(margin)
    out = np.array(log_ratios, dtype=np.float64)
    excess = np.where(bounded, out - np.log(np.where(bounded, lower, 1.0)), 0.0)
    above_ceiling = np.maximum(0.0, out[capped] - np.log(upper[capped]))
    out[bounded] = np.minimum(0.0, excess[bounded])
    out[capped] += above_ceiling
    out[weighted] += noise_fraction / margin[weighted] * np.maximum(0.0, excess[weighted])
    return out


def floor_shortfalls(
    errors: Sequence[float], floors: Sequence[float | None], headroom: Sequence[float | None] | None = None
) -> list[float]:
    """Each row's error as the fit sees it: pred / published - 1, or for a floor row only how far it falls
    outside [f x floor, (1 + h) x floor].

    Formula: e_i' = min(0, (1 + e_i) / f_i - 1) + max(0, (1 + e_i) / (1 + h_i) - 1) where f_i is given
    (the second term only with h_i), else e_i.
    """
    out = []
    for e, f, h in zip(errors, floors, headroom or [None] * len(errors), strict=True):
        above = 0.0 if h is None else max(0.0, (1.0 + e) / (1.0 + h) - 1.0)
        out.append(e if f is None else min(0.0, (1.0 + e) / f - 1.0) + above)
    return out
