"""A plan whose speeds come from a --from-bench profile says when it is used outside the fitted range
(the CLI's notes and --json warnings, not only the dashboard badge)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()
MISSION = ["--model", "qwen3-27b", "--dtype", "fp8", "--card", "ascend-950pr", "--engine", "mindie", "--json"]


def warnings_at(*extra: str) -> list[str]:
    result = runner.invoke(app, [*MISSION, *extra])
    assert result.exit_code == 0, result.output
    return list(json.loads(result.output)["warnings"])


def test_fitted_profile_far_outside_its_context_says_extrapolated() -> None:
    lines = warnings_at("--ctx", "32k")
    assert any(
        w.startswith("speed from a fitted profile: ctx 32768 is outside the fitted range") for w in lines
    )


def test_fitted_profile_inside_its_range_adds_no_range_warning() -> None:
    lines = warnings_at("--ctx", "384", "--batch", "8")
    assert not any("outside the fitted range" in w for w in lines)


def test_uncalibrated_plan_has_no_fit_warning() -> None:
    assert not any("fitted profile" in w for w in warnings_at("--ctx", "32k", "--uncalibrated"))


def performance_at(*extra: str) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(app, [*MISSION, *extra])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output)["performance"])


def test_fitted_profile_gives_a_speed_range_widened_outside_its_range() -> None:
    """The plan's TPOT and tokens/s come with the fit's range (fit_band): +-15 % inside the fitted range,
    +-40 % with one axis (ctx 32k vs 384) outside it; the text line prints it next to the TPOT."""
    from planner.perf import ranges

    inside, outside = performance_at("--ctx", "384", "--batch", "8"), performance_at("--ctx", "32k")
    for perf, widen, extrapolated in ((inside, 0.0, False), (outside, ranges.EXTRAPOLATION_FRACTION, True)):
        band = perf["speed_range"]
        high = 1 + ranges.FIT_FRACTION + widen
        assert band["decode_step_s_low"] * high == pytest.approx(perf["decode_step_s"], rel=1e-9)
        assert band["tokens_per_s_high"] == pytest.approx(perf["tokens_per_s"] * high, rel=1e-9)
        assert band["decode_step_s_low"] < perf["decode_step_s"] < band["decode_step_s_high"]
        assert band["extrapolated"] is extrapolated
    text = runner.invoke(app, [*MISSION[:-1], "--ctx", "32k"]).output
    low, high = (round(outside["speed_range"][k] * 1000) for k in ("decode_step_s_low", "decode_step_s_high"))
    assert f"(range {low}-{high} ms, fitted profile, extrapolated)" in text


def test_uncalibrated_plan_carries_the_datasheet_range() -> None:
    """--uncalibrated on the 950PR: the range is Ascend's datasheet pair (fit_band), not the fit's."""
    from planner.perf import ranges

    perf = performance_at("--ctx", "32k", "--uncalibrated")
    band = perf["speed_range"]
    low, high = ranges.ASCEND_DATASHEET_FACTORS
    assert band["label"] == "uncalibrated" and band["source"].startswith("datasheet peaks")
    assert band["tokens_per_s_low"] == pytest.approx(perf["tokens_per_s"] * low, rel=1e-9)
    assert band["tokens_per_s_high"] == pytest.approx(perf["tokens_per_s"] * high, rel=1e-9)
