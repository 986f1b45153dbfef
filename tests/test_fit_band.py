"""Where a speed figure comes from and its range (planner/perf/fit_band.py), and `kvplan serve` showing it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner import catalog, inputs
from planner.perf import fit_band
from tests.helpers import kvplan

SEED = Path(__file__).resolve().parents[1] / "docs/examples/seed-950pr-qwen3-27b.csv"


def test_uncalibrated_card_gets_the_published_spread() -> None:
    dep = inputs.to_deployment(inputs.PlanRequest(model="qwen3-8b", card="ascend-910b3", ctx="4k"))
    band = fit_band.speed_band(dep, batch=8, ctx_tokens=4096)
    assert band.source.startswith("datasheet peaks")
    assert (band.low_factor, band.high_factor) == (
        1 / fit_band.UNCALIBRATED_SLOW_FACTOR,
        fit_band.UNCALIBRATED_FAST_FACTOR,
    )


def test_microbenchmarked_card_is_narrow() -> None:
    dep = inputs.to_deployment(inputs.PlanRequest(model="qwen3-8b", card="nvidia-h200", ctx="4k"))
    band = fit_band.speed_band(dep, batch=8, ctx_tokens=4096)
    assert band.source.startswith("microbenchmarks")
    assert band.high_factor - band.low_factor == pytest.approx(2 * fit_band.MICROBENCH_FRACTION)


def test_fit_widens_outside_its_range(tmp_path: Path) -> None:
    """The seed fit saw ctx 384 only: at 32k the range widens by one axis and says why."""
    out = tmp_path / "seed.yaml"
    kvplan("calibrate --card ascend-950pr --from-bench", SEED, "--out", out)
    request = inputs.PlanRequest(model="qwen3-27b", card=str(out), dtype="fp8", ctx="32k")
    dep = inputs.to_deployment(request)
    inside = fit_band.speed_band(dep, batch=8, ctx_tokens=384)
    outside = fit_band.speed_band(dep, batch=8, ctx_tokens=32768)
    assert inside.notes == [] and inside.source.startswith("fit")
    assert outside.high_factor - inside.high_factor == pytest.approx(fit_band.EXTRAPOLATION_FRACTION)
    assert outside.notes[0].startswith("ctx 32768 is outside the fitted range")
    serve = "serve -m qwen3-27b --dtype fp8 --input-tokens 30k --output-tokens 2k --concurrency 4 --json"
    served = kvplan(serve, "--card", out)
    band = json.loads(served.output)["speed_range"]
    estimate = json.loads(served.output)["estimate"]["output_tokens_per_s"]
    assert band["output_tokens_per_s_low"] < estimate < band["output_tokens_per_s_high"]
    assert band["notes"] and band["source"].startswith("fit")
    assert catalog.resolve_card(str(out)).measured is not None
