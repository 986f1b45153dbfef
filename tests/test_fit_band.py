"""Where a speed figure comes from and its range (planner/perf/ranges.py): the bands per source, the
measured constants against lab/accuracy/speed_band_sources.py, and every command that prints a speed showing
the range."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import catalog, inputs, units
from planner.deployment import Deployment
from planner.errors import KvplanError
from planner.perf import ranges
from tests.helpers import kvplan

SEED = Path(__file__).resolve().parents[1] / "docs/examples/seed-950pr-qwen3-27b.csv"
CARDS = catalog.card_ids()


def deployment(card: str, *, model: str = "qwen3-8b", ctx: str = "4k", calibrated: bool = True) -> Deployment:
    return inputs.to_deployment(
        inputs.PlanRequest(model=model, card=card, ctx=ctx, dtype="int8", calibrated=calibrated)
    )


def test_uncalibrated_cards_get_their_vendors_measured_pair() -> None:
    """Ascend: the published-row pair; NVIDIA (the H200 with --uncalibrated, an H100 with no measured
    block): the H200 datasheet pair."""
    for card, calibrated, pair, ttft in (
        ("ascend-910b3", True, ranges.ASCEND_DATASHEET_FACTORS, ranges.ASCEND_DATASHEET_TTFT_FACTORS),
        ("nvidia-h100", True, ranges.GPU_DATASHEET_FACTORS, ranges.GPU_DATASHEET_TTFT_FACTORS),
        ("nvidia-h200", False, ranges.GPU_DATASHEET_FACTORS, ranges.GPU_DATASHEET_TTFT_FACTORS),
    ):
        band = ranges.speed_band(deployment(card, calibrated=calibrated), batch=8, ctx_tokens=4096)
        assert band.source.startswith("datasheet peaks") and band.label == "uncalibrated"
        assert (band.low_factor, band.high_factor) == pair
        assert (band.ttft_low_factor, band.ttft_high_factor) == ttft
        assert "lab/accuracy/speed_band_sources.py" in band.notes[0]
    assert ranges.ASCEND_DATASHEET_FACTORS != ranges.GPU_DATASHEET_FACTORS


@pytest.mark.lab
def test_measured_constants_agree_with_the_script() -> None:
    """The pairs in ranges.py are what lab/accuracy/speed_band_sources.py computes from the repo's data
    (published Ascend rows, H200 end-to-end decode points and TTFTs): they cannot drift silently. When this
    fails, run the script and copy its pairs (and the numbers in their comments) into ranges.py."""
    from lab.accuracy import speed_band_sources

    assert len(speed_band_sources.ascend_decode_ratios()) == ranges.ASCEND_PUBLISHED_ROWS
    computed = speed_band_sources.factors()
    assert computed == {
        "ascend_decode": ranges.ASCEND_DATASHEET_FACTORS,
        "ascend_ttft": ranges.ASCEND_DATASHEET_TTFT_FACTORS,
        "gpu_decode": ranges.GPU_DATASHEET_FACTORS,
        "gpu_ttft": ranges.GPU_DATASHEET_TTFT_FACTORS,
        "microbench_decode": ranges.MICROBENCH_FACTORS,
        "microbench_ttft": ranges.MICROBENCH_TTFT_FACTORS,
        "microbench_ttft_untabled": ranges.MICROBENCH_UNTABLED_TTFT_FACTORS,
    }, f"the data moved: copy these into ranges.py (and their comments' numbers): {computed}"


def test_microbenchmarked_card_is_narrow_and_widens_beyond_its_tables() -> None:
    """H200 (microbenchmarks): MICROBENCH_FACTORS inside the attention tables (batch 1-256 at most);
    batch 1024 (> 2 x the largest measured) widens one axis and says so in perf.fitted's words."""
    dep = deployment("nvidia-h200")
    inside = ranges.speed_band(dep, batch=8, ctx_tokens=4096)
    assert inside.source.startswith("microbenchmarks") and not inside.extrapolated
    assert (inside.low_factor, inside.high_factor) == ranges.MICROBENCH_FACTORS
    cover = ranges.attention_coverage(dep.hardware.measured)
    assert cover is not None
    beyond = int(3 * cover[1])
    outside = ranges.speed_band(dep, batch=beyond, ctx_tokens=4096)
    assert outside.extrapolated
    assert outside.high_factor - inside.high_factor == pytest.approx(ranges.EXTRAPOLATION_FRACTION)
    assert outside.notes == [
        f"batch {beyond} is outside the profile's attention tables {cover[0]:g}-{cover[1]:g}: the speed is "
        "extrapolated"
    ]


def test_microbenchmark_prefill_band_depends_on_the_engine() -> None:
    """The H200's prefill tables time transformers only: another engine gets the untabled pair."""
    for engine, pair in (
        ("transformers", ranges.MICROBENCH_TTFT_FACTORS),
        ("vllm", ranges.MICROBENCH_UNTABLED_TTFT_FACTORS),
    ):
        request = inputs.PlanRequest(model="qwen3-8b", card="nvidia-h200", ctx="4k", engine=engine)
        band = ranges.speed_band(inputs.to_deployment(request), batch=8, ctx_tokens=4096)
        assert (band.ttft_low_factor, band.ttft_high_factor) == pair


def test_fit_widens_outside_its_range(tmp_path: Path) -> None:
    """The seed fit saw ctx 384 only: at 32k the range widens by one axis and says why."""
    out = tmp_path / "seed.yaml"
    kvplan("calibrate --card ascend-950pr --from-bench", SEED, "--out", out)
    request = inputs.PlanRequest(model="qwen3-27b", card=str(out), dtype="fp8", ctx="32k")
    dep = inputs.to_deployment(request)
    inside = ranges.speed_band(dep, batch=8, ctx_tokens=384)
    outside = ranges.speed_band(dep, batch=8, ctx_tokens=32768)
    assert inside.notes == [] and inside.source.startswith("fit") and "engine mindie" in inside.source
    assert outside.high_factor - inside.high_factor == pytest.approx(ranges.EXTRAPOLATION_FRACTION)
    assert outside.notes[0].startswith("ctx 32768 is outside the fitted range")
    serve = "serve -m qwen3-27b --dtype fp8 --input-tokens 30k --output-tokens 2k --concurrency 4 --json"
    served = kvplan(serve, "--card", out)
    band = json.loads(served.output)["speed_range"]
    estimate = json.loads(served.output)["estimate"]
    assert (
        band["output_tokens_per_s_low"] < estimate["output_tokens_per_s"] < band["output_tokens_per_s_high"]
    )
    assert band["ttft_s_low"] < estimate["ttft_s"] < band["ttft_s_high"]
    assert band["notes"] and band["source"].startswith("fit") and band["extrapolated"]
    assert catalog.resolve_card(str(out)).measured is not None


@pytest.mark.lab
def test_fitted_profile_prints_its_own_leave_one_model_out_range() -> None:
    """The shipped 910C vllm-ascend profile carries the central 90 % of its LOMO rows' truth / estimate
    (fit-residuals.csv error_lomo), and plans on it print that range instead of FIT_FRACTION."""
    import csv

    hw = catalog.resolve_card("ascend-910c", engine="vllm")
    assert hw.measured is not None
    pair = ranges.held_out_pair(hw.measured)
    assert pair is not None
    residuals = Path(__file__).resolve().parents[1] / "lab" / "published" / "fit-residuals.csv"
    with residuals.open(encoding="utf-8") as handle:
        lomo = [
            float(r["error_lomo"])
            for r in csv.DictReader(handle)
            if r["card"] == "ascend-910c" and r["engine"] == "vllm" and r["error_lomo"]
        ]
    ratios = [1.0 / (1.0 + e) for e in lomo]
    assert pair == (*ranges.central_band(ratios, central=ranges.HELD_OUT_CENTRAL_FRACTION), len(lomo))
    request = inputs.PlanRequest(
        model="qwen3.5-27b", card="ascend-910c", engine="vllm", dtype="int8", ctx="4k", tp=2
    )
    band = ranges.speed_band(inputs.to_deployment(request), batch=8, ctx_tokens=4096)
    assert band.label == "fitted profile" and f"{len(lomo)} rows" in band.ttft_source
    assert band.low_factor <= pair[0] and band.high_factor >= pair[1]
    assert (band.low_factor, band.high_factor) != (1 - ranges.FIT_FRACTION, 1 + ranges.FIT_FRACTION)


@pytest.mark.parametrize("held", [[0.8, 1.2], [1.1, 1.3, 5.0], [0.5, 0.9, 4.0], [0.8, 1.2, 0.0]])
def test_malformed_held_out_factors_name_the_field(held: list[float]) -> None:
    hw = catalog.resolve_card("ascend-910c", engine="vllm")
    assert hw.measured is not None
    measured = hw.measured.model_copy(update={"samples": {**hw.measured.samples, "held_out_factors": held}})
    with pytest.raises(KvplanError, match="held_out_factors"):
        ranges.fitted_band(measured, batch=8, ctx_tokens=4096)


@settings(max_examples=60, deadline=None)
@given(
    card=st.sampled_from(CARDS),
    batch=st.integers(min_value=1, max_value=4096),
    ctx=st.integers(min_value=16, max_value=1 << 20),
    calibrated=st.booleans(),
)
def test_every_band_brackets_its_estimate(card: str, batch: int, ctx: int, calibrated: bool) -> None:
    """On every card in hwprofiles/, calibrated or not, at any batch and context: low <= 1 <= high for the
    decode and the prefill pair, and the vectorised grid (kvplan sweep, dashboard) equals speed_band."""
    try:
        dep = deployment(card, calibrated=calibrated)
    except KvplanError:  # qwen3-8b int8 does not fit or the card lacks int8: another model then
        dep = deployment(card, model="qwen3-0.6b", calibrated=calibrated)
    band = ranges.speed_band(dep, batch=batch, ctx_tokens=ctx)
    assert 0 < band.low_factor <= 1.0 <= band.high_factor
    assert 0 < band.ttft_low_factor <= 1.0 <= band.ttft_high_factor
    assert band.extrapolated == bool(band.notes) or band.label == "uncalibrated"
    low, high = ranges.factor_grid(dep, batch=[batch], ctx_tokens=[ctx])
    assert (float(low[0, 0]), float(high[0, 0])) == pytest.approx((band.low_factor, band.high_factor))


@settings(max_examples=30, deadline=None)
@given(
    fitted=st.sampled_from([("ascend-910c", "vllm"), ("ascend-910b3", "vllm"), ("ascend-950pr", "mindie")]),
    batch=st.integers(min_value=1, max_value=4096),
    ctx=st.integers(min_value=16, max_value=1 << 18),
)
def test_sweep_grid_of_a_fitted_profile_is_its_band(fitted: tuple[str, str], batch: int, ctx: int) -> None:
    """The shipped fitted profiles (some with a held-out range, some with +-FIT_FRACTION): the vectorised
    grid of `kvplan sweep` and the dashboard gives the same factors as the plan's speed_band."""
    card, engine = fitted
    dep = inputs.to_deployment(
        inputs.PlanRequest(model="qwen3-8b", card=card, ctx="4k", dtype="int8", engine=engine)
    )
    assert dep.hardware.measured is not None and dep.hardware.measured.backend == "bench-fit"
    band = ranges.speed_band(dep, batch=batch, ctx_tokens=ctx)
    low, high = ranges.factor_grid(dep, batch=[batch], ctx_tokens=[ctx])
    assert (float(low[0, 0]), float(high[0, 0])) == pytest.approx((band.low_factor, band.high_factor))


@pytest.mark.parametrize("card", CARDS)
def test_plan_json_always_carries_the_range_with_its_source(card: str) -> None:
    """Every card's plan: performance.speed_range present, named, and bracketing each figure."""
    result = kvplan("--model qwen3-0.6b --ctx 4k --dtype int8 --json --card", card)
    perf = json.loads(result.output)["performance"]
    band = perf["speed_range"]
    assert band["source"] and band["label"] in {"uncalibrated", "microbenchmarks", "fitted profile"}
    for name in ("decode_step_s", "tokens_per_s", "per_user_tokens_per_s", "ttft_s"):
        assert band[f"{name}_low"] <= perf[name] <= band[f"{name}_high"], name


def test_uncalibrated_plan_text_prints_ranges_and_where_they_come_from() -> None:
    """The brief's example: qwen3-32b int8 on a 910B4 (uncalibrated) gives a range for TPOT, both rates and
    TTFT, with the measured source of the range in a note."""
    text = kvplan("--model qwen3-32b --ctx 8k --dtype int8 --card ascend-910b4 --tp 2").output
    payload = json.loads(
        kvplan("--model qwen3-32b --ctx 8k --dtype int8 --card ascend-910b4 --tp 2 --json").output
    )
    band = payload["performance"]["speed_range"]
    span = units.fmt_span(band["decode_step_s_low"] * 1000, band["decode_step_s_high"] * 1000)
    assert f"(range {span} ms, uncalibrated)" in " ".join(text.split())
    assert "datasheet prefill" in text
    assert ranges.DATASHEET["huawei"][2] in " ".join(text.split())


def test_sweep_outputs_carry_the_range() -> None:
    """kvplan sweep: CSV columns and JSON arrays of the step's range, bracketing the step; the table's
    range column and source."""
    csv_text = kvplan("sweep -m qwen3-8b --card ascend-910b4 --batch 1,8 --ctx 1k,4k --format csv").output
    header, *rows = [line.split(",") for line in csv_text.strip().splitlines()]
    at = {name: header.index(name) for name in ("decode_step_s", "decode_step_s_low", "decode_step_s_high")}
    for row in rows:
        low, step, high = (
            float(row[at[name]]) for name in ("decode_step_s_low", "decode_step_s", "decode_step_s_high")
        )
        assert low <= step <= high and low < high  # the Ascend datasheet pair's high side is the estimate
    payload = json.loads(
        kvplan("sweep -m qwen3-8b --card nvidia-h200 --batch 1,8 --ctx 4k --format json").output
    )
    step = np.asarray(payload["decode_step_s"])
    band = payload["speed_range"]
    assert band["label"] == "microbenchmarks"
    assert np.all(np.asarray(band["decode_step_s_low"]) < step) and np.all(step < band["decode_step_s_high"])
    table = kvplan("sweep -m qwen3-8b --card ascend-910b4 --batch 1 --ctx 4k").output
    assert "TPOT ms" in table and "range" in table and "uncalibrated" in table


def test_simulate_search_and_layout_print_the_range() -> None:
    """kvplan simulate: a range line and the range's source in text and JSON; --search and kvplan layout:
    one line of factors and the source."""
    base = "simulate -m qwen3-8b --card ascend-910b4 --input-tokens 512 --output-tokens 128 --requests 200"
    text = kvplan(base + " --rate 1").output
    assert "range (uncalibrated): output" in text and ranges.DATASHEET["huawei"][2] in text
    payload = json.loads(kvplan(base + " --rate 1 --json").output)
    assert payload["speed_range"]["low_factor"] == ranges.ASCEND_DATASHEET_FACTORS[0]
    found = kvplan(base + " --concurrency 8 --search max-concurrency --tpot-ms 80").output
    assert "speed range (uncalibrated): each figure above may be off by TPOT x" in found
    layout = kvplan(
        "layout --model qwen3-8b --card ascend-910c --dtype int8 --ctx 4k --budget-devices 2"
    ).output
    low = ranges.ASCEND_DATASHEET_FACTORS[0]
    assert "speed: uncalibrated (datasheet peaks" in layout and f"tok/s x {low:g}-1" in layout
