"""What a `--from-bench` fit returns (planner/fit/solver.py): the fitted coefficients, every row's residual,
each term's value and uncertainty in log space, the rows' range and the fit's warnings. A record of its own,
so the command's report (planner/cli/calibrate_fit.py) reads it without importing the solver.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from planner.schema import PerfCoefficients

DATA_DECIDES = 0.5  # posterior sigma below this share of the prior's: the rows determined the value


@dataclass(frozen=True)
class FitResult:
    """Fitted coefficients, the relative residual of every row, each term's uncertainty, and warnings.

    residual_fractions: pred / measured - 1 of each step row, then each serving row's output tok/s.
    log_values, sigma_log: fitted value and posterior one-sigma of every FIT_PARAM in log space (the value is
    uncertain by a factor exp(sigma_log)); prior_sigma_log: the prior's; bounds: 'lower'/'upper'/'' each.
    fit_range: [batch min, batch max, ctx min, ctx max] the rows cover.
    """

    coefficients: PerfCoefficients
    residual_fractions: list[float]
    iterations: int
    converged: bool
    log_values: list[float] = field(default_factory=list)
    sigma_log: list[float] = field(default_factory=list)
    prior_sigma_log: list[float] = field(default_factory=list)
    bounds: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    fit_range: list[float] = field(default_factory=list)
    # parameter on a bound -> the observations that pull it there ('row (quantity)'), strongest first
    bound_pullers: dict[str, list[str]] = field(default_factory=dict)
    # the fit misses its own rows by more than fitted.POOR_FIT_FRACTION (its quality warning says so)
    poor_fit: bool = False

    @property
    def decided_by_data(self) -> list[bool]:
        """Per FIT_PARAM: True when the rows, not the prior, set the value."""
        return [s < DATA_DECIDES * p for s, p in zip(self.sigma_log, self.prior_sigma_log, strict=True)]

    @property
    def mape_fraction(self) -> float:
        """Mean absolute relative error."""
        return float(np.mean(np.abs(self.residual_fractions)))

    @property
    def worst_fraction(self) -> float:
        """Largest absolute relative error."""
        return float(np.max(np.abs(self.residual_fractions)))
