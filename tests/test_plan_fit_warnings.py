"""A plan whose speeds come from a --from-bench profile says when it is used outside the fitted range
(the CLI's notes and --json warnings, not only the dashboard badge)."""

from __future__ import annotations

import json

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
