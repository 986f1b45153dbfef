"""One-sided residuals of floor rows (planner/fit/censored.py): a CI baseline bounds the truth from below."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from planner.errors import DataFileError
from planner.fit import censored, serving_rows, solver
from planner.importers.benchpoints import ServingPoint, read_bench_rows
from tests.helpers import write_csv

HEADER = (
    "model,card,dtype,kv_dtype,tp,engine,concurrency,input_tokens,output_tokens,output_tokens_per_s,"
    "floor_fraction\n"
)
ROW = "qwen3-8b,ascend-910b3,bf16,bf16,1,vllm"


def test_floor_fraction_column_is_read_and_checked(tmp_path: Path) -> None:
    rows = (f"{ROW},8,1024,256,500,0.97", f"{ROW},16,1024,256,800,")
    _, (floor, measured) = read_bench_rows(write_csv(tmp_path / "rows.csv", HEADER, *rows))
    assert (floor.floor_fraction, measured.floor_fraction) == (0.97, None)
    with pytest.raises(DataFileError, match="floor_fraction: must be a fraction"):
        read_bench_rows(write_csv(tmp_path / "bad.csv", HEADER, f"{ROW},8,1024,256,500,1.5"))


def test_censored_log_ratio_counts_only_a_shortfall_below_the_threshold() -> None:
    """min(0, log(pred / (f * floor))): above 0.97 x floor nothing, below it the log shortfall; NaN:
    two-sided; with a ceiling, above (1 + h) x floor the log excess."""
    logs = np.log([1.5, 0.96, 0.5, 1.5, 1.05, 1.5])
    nan = math.nan
    bounds = np.array([[0.97, 0.97, 0.97, nan, 0.97, 0.97], [nan, nan, nan, nan, 1.1, 1.1], [nan] * 6])
    out = censored.censored_log_ratios(logs, bounds, noise_fraction=0.05)
    assert out[0] == 0.0
    assert out[1] == pytest.approx(math.log(0.96 / 0.97))
    assert out[2] == pytest.approx(math.log(0.5 / 0.97))
    assert out[3] == pytest.approx(math.log(1.5))
    assert out[4] == 0.0  # inside the band [0.97, 1.1] x floor
    assert out[5] == pytest.approx(math.log(1.5 / 1.1))  # above the assumed ceiling
    assert censored.floor_shortfalls([0.5, -0.5, 0.5], [0.97, 0.97, None]) == pytest.approx(
        [0.0, 0.5 / 0.97 - 1, 0.5]
    )
    assert censored.floor_shortfalls([0.5, 0.05], [0.97, 0.97], [0.1, 0.1]) == pytest.approx(
        [1.5 / 1.1 - 1, 0.0]
    )


def test_margin_weighs_an_excess_above_the_threshold_as_a_measurement_that_wide() -> None:
    """Hand-worked, noise s = 0.05, floor f = 0.97, margin m = 0.2 (weight s / m = 0.25):
    pred 1.2 x floor: x = log(1.2 / 0.97) = 0.21278, r = 0.25 x 0.21278 = 0.053195 (as a 5.3 % miss);
    pred 0.9 x floor: x = log(0.9 / 0.97) = -0.074901, r = x (full weight, the margin does not apply below);
    pred 0.97 x floor: r = 0; a measured row (NaN) keeps log(1.2) = 0.18232; with a ceiling 1.1 and the
    margin, pred 1.5 x floor: 0.25 x log(1.5 / 0.97) + log(1.5 / 1.1) = 0.10898 + 0.31015 = 0.41914."""
    nan = math.nan
    logs = np.log([1.2, 0.9, 0.97, 1.2, 1.5])
    bounds = np.array([[0.97, 0.97, 0.97, nan, 0.97], [nan, nan, nan, nan, 1.1], [0.2, 0.2, 0.2, nan, 0.2]])
    out = censored.censored_log_ratios(logs, bounds, noise_fraction=0.05)
    assert out[0] == pytest.approx(0.25 * math.log(1.2 / 0.97), rel=1e-12)
    assert out[0] == pytest.approx(0.053195, abs=1e-6)
    assert out[1] == pytest.approx(math.log(0.9 / 0.97), rel=1e-12)
    assert out[2] == pytest.approx(0.0, abs=1e-15)
    assert out[3] == pytest.approx(math.log(1.2), rel=1e-12)
    assert out[4] == pytest.approx(0.41914, abs=1e-5)


def test_margin_column_is_read_into_the_fit_band(tmp_path: Path) -> None:
    """floor_margin_fraction reaches ServingPoint and the third row of the fit's band; a TTFT row adds a
    two-sided (NaN) observation after its output tok/s."""
    header = HEADER.rstrip("\n") + ",floor_margin_fraction,ttft_s\n"
    rows = (f"{ROW},8,1024,256,500,0.97,0.2,", f"{ROW},1,1024,256,50,,,0.3")
    _, points = read_bench_rows(write_csv(tmp_path / "rows.csv", header, *rows))
    assert [p.floor_margin_fraction for p in points] == [0.2, None]
    band = censored.observation_floors(points)
    assert band.shape == (3, 3)
    assert band[:, 0].tolist()[0] == 0.97 and math.isnan(band[1, 0]) and band[2, 0] == 0.2
    assert np.isnan(band[:, 1:]).all()


def _rows() -> list[ServingPoint]:
    """Three measured rows exactly at the card's own prediction, so the fit alone stays where it starts."""
    template = ServingPoint(
        model="qwen3-8b", card="ascend-910b3", dtype="bf16", kv_dtype="bf16", tp=1, engine="vllm",
        concurrency=1, input_tokens=1024, output_tokens=256, output_tokens_per_s=1.0, where="synthetic",
    )  # fmt: skip
    rows = []
    for concurrency in (1, 4, 16, 64):
        point = dataclasses.replace(template, concurrency=concurrency, where=f"synthetic:{concurrency}")
        predicted = serving_rows.predicted_output_tokens_per_s(
            serving_rows.prepare([point], calibrated=False)[0]
        )
        rows.append(dataclasses.replace(point, output_tokens_per_s=predicted))
    return rows


def test_floor_above_the_prediction_is_ignored_and_one_below_pulls() -> None:
    """A floor row at half its prediction changes nothing (as a measurement it would drag the fit down); a
    floor at twice its prediction pulls the fitted prediction of that row up toward 0.97 x floor."""
    measured, target = _rows()[:3], _rows()[3]
    alone = solver.fit_coefficients([], serving=measured)
    predicted = (
        serving_rows.serving_errors([target], coefficients=alone.coefficients, calibrated=False)[0] + 1.0
    )
    low = dataclasses.replace(
        target, output_tokens_per_s=0.5 * target.output_tokens_per_s, floor_fraction=0.97
    )
    with_low = solver.fit_coefficients([], serving=[*measured, low])
    assert _values(with_low.coefficients) == pytest.approx(_values(alone.coefficients), rel=1e-9)
    # reported against the published figure: pred / (0.5 x target) - 1
    assert with_low.residual_fractions[-1] == pytest.approx(2 * predicted - 1, rel=1e-6)
    high = dataclasses.replace(low, output_tokens_per_s=2.0 * target.output_tokens_per_s)
    with_high = solver.fit_coefficients([], serving=[*measured, high])
    pulled = serving_rows.serving_errors([target], coefficients=with_high.coefficients, calibrated=False)[0]
    assert pulled + 1.0 > 1.1 * predicted
    as_measured = solver.fit_coefficients(
        [], serving=[*measured, dataclasses.replace(low, floor_fraction=None)]
    )
    assert _values(as_measured.coefficients) != pytest.approx(_values(alone.coefficients), rel=1e-3)


def _values(coefficients: object) -> list[float]:
    """Every number of a PerfCoefficients, flattened (per-dtype tables included)."""
    out: list[float] = []
    for value in coefficients.model_dump().values():  # type: ignore[attr-defined]
        out += (
            sorted(value.values()) if isinstance(value, dict) else [value] if isinstance(value, float) else []
        )
    return out
