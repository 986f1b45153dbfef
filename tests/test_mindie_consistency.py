"""lab/published/mindie_consistency.py: its bounded least squares, and the finding docs/accuracy.md states."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "lab" / "published"))
    import mindie_consistency

    return mindie_consistency


@pytest.mark.lab
def test_bounded_fit_recovers_terms_inside_their_bounds() -> None:
    rng = np.random.default_rng(7)
    x = np.column_stack([np.ones(8), rng.uniform(5, 30, 8), rng.uniform(0, 100, 8)])
    truth = np.array([4.0, 0.9, 0.05])
    terms, sse = _script().bounded_fit(x, x @ truth, np.array([0.0, 0.625, 0.0]))
    np.testing.assert_allclose(terms, truth, rtol=1e-9)
    assert sse < 1e-18


@pytest.mark.lab
def test_bounded_fit_holds_a_term_at_its_bound_when_the_data_want_less() -> None:
    x = np.column_stack([np.ones(6), np.linspace(5, 30, 6)])
    y = 10.0 + 0.3 * x[:, 1]  # 0.3 ms per GB: faster than the 0.625 bound allows
    terms, _ = _script().bounded_fit(x, y, np.array([0.0, 0.625]))
    assert terms[1] == pytest.approx(0.625)
    assert terms[0] >= 0.0


@pytest.mark.lab
def test_no_admissible_cost_set_fits_mindie_910b3_rows() -> None:
    script = _script()
    terms, errors, table = script.fitted(rates=(1.0, 2.0, 3.0))
    assert len(table) == 12
    peak_ms_per_gb = 1e3 / 1600
    assert terms[1] == pytest.approx(peak_ms_per_gb)  # streaming pinned at the card's peak bandwidth
    assert float(np.max(np.abs(errors))) > 0.2  # and still a row off by more than 20 %
