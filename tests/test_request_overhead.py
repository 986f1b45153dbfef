"""Per-request cost outside the forward pass (PerfCoefficients.request_overhead_us) and the open-loop estimate
(planner/perf/open_loop.py): the cost adds to TTFT only and never stalls a running decode."""

from __future__ import annotations

import numpy as np
import pytest

from planner.deployment import Deployment
from planner.errors import DataFileError
from planner.fit import serving_rows as fit_serving
from planner.fit import solver as fit
from planner.importers.benchpoints import parse_serving_row
from planner.perf import fitted_params as fit_params
from planner.perf import roofline
from planner.serving import closed_loop, open_loop
from planner.sim import run
from planner.sim import workload as wl
from tests.helpers import deployment_950pr

REQUEST_US = 150_000.0  # 0.15 s: larger than a prefill here, so a misplaced charge shows


def with_request_cost(dep: Deployment, request_us: float) -> Deployment:
    coeff = dep.hardware.coefficients(calibrated=False).model_copy(update={"request_overhead_us": request_us})
    hw = dep.hardware.model_copy(update={"default_coefficients": coeff, "measured": None})
    return dep.model_copy(update={"hardware": hw, "calibrated": False})


def pair(engine: str = "vllm") -> tuple[Deployment, Deployment]:
    base = deployment_950pr("qwen3-8b", scheme="bf16", engine=engine)
    return base, with_request_cost(base, REQUEST_US)


def test_closed_loop_request_cost_is_ttft_only_at_low_load() -> None:
    """One client: TTFT grows by exactly the request cost; the decode step and TPOT do not move."""
    base, slow = pair()
    a = closed_loop.serving_estimate(base, input_tokens=1024, output_tokens=128, concurrency=1)
    b = closed_loop.serving_estimate(slow, input_tokens=1024, output_tokens=128, concurrency=1)
    assert b.ttft_s - a.ttft_s == pytest.approx(REQUEST_US * 1e-6, rel=1e-9)
    assert b.tpot_s == pytest.approx(a.tpot_s, rel=1e-12)
    assert b.decode_step_s == pytest.approx(a.decode_step_s, rel=1e-12)
    # the single client waits for it, so its throughput falls by the longer round trip
    assert b.output_tokens_per_s == pytest.approx(128 / (a.request_latency_s + REQUEST_US * 1e-6), rel=1e-9)


def test_closed_loop_request_cost_hides_behind_a_queue() -> None:
    """More clients than the engine runs: the engine is the bottleneck, its throughput does not change."""
    base, slow = pair()
    run_ = closed_loop.BenchRun(max_batch=4)
    a = closed_loop.serving_estimate(base, input_tokens=512, output_tokens=64, concurrency=64, run=run_)
    b = closed_loop.serving_estimate(slow, input_tokens=512, output_tokens=64, concurrency=64, run=run_)
    assert b.output_tokens_per_s == pytest.approx(a.output_tokens_per_s, rel=1e-12)
    assert b.tpot_s == pytest.approx(a.tpot_s, rel=1e-12)


def test_prefill_passes_do_not_pay_the_request_cost() -> None:
    """The per-request cost is no pass cost: a prompt's prefill (the plan's TTFT ledger) is unchanged."""
    base, slow = pair()
    assert roofline.ttft_s(slow, prompt_tokens=2048) == roofline.ttft_s(base, prompt_tokens=2048)
    assert roofline.request_overhead_s(slow) == pytest.approx(0.15)


@pytest.mark.parametrize("engine", ["vllm", "mindie"])
def test_simulator_adds_the_cost_to_ttft_and_stalls_no_decode(engine: str) -> None:
    """Poisson arrivals: every request's TTFT grows by the cost (its engine sees it later); the others' TPOT
    and every decode step stay as they were (the old per-pass constant stalled all running decodes)."""
    base, slow = pair(engine)
    lengths = (wl.LengthDist("fixed", 512, 512), wl.LengthDist("fixed", 128, 128))
    work = wl.synthetic(lengths=lengths, count=300, rate_per_s=2.0, seed=3)
    a, b = run.simulate(base, work), run.simulate(slow, work)
    assert b.summary.ttft_s.p50 - a.summary.ttft_s.p50 == pytest.approx(0.15, rel=0.05)
    assert b.summary.tpot_s.mean == pytest.approx(a.summary.tpot_s.mean, rel=0.02)
    # ends shift with their starts: the engine's work per request is the same
    assert np.median(b.records.e2e_s - b.records.ttft_s) == pytest.approx(
        np.median(a.records.e2e_s - a.records.ttft_s), rel=0.02
    )


@pytest.mark.parametrize(("engine", "output"), [("vllm", 128), ("mindie", 1), ("mindie", 64)])
def test_mean_in_system_counts_the_request_cost(engine: str, output: int) -> None:
    """Little's law holds exactly with a request cost: a request is in the system from its send time, also
    while the API server holds it (was 0.595 against 3.85 for one-token outputs and 4 clients)."""
    _, slow = pair(engine)
    lengths = (wl.LengthDist("fixed", 256, 256), wl.LengthDist("fixed", output, output))
    work = wl.synthetic(lengths=lengths, count=120, rate_per_s=3.0, seed=5)
    for workload in (work, wl.Workload(work.input_tokens, work.output_tokens, arrival_s=None, concurrency=4)):
        result = run.simulate(slow, workload)
        records = result.records
        little = float(np.sum(records.finish_s - records.arrival_s)) / float(np.max(records.finish_s))
        assert result.summary.mean_in_system == pytest.approx(little, rel=1e-9)


def test_open_loop_at_a_trickle_is_one_request_alone() -> None:
    """A rate far below capacity: TTFT = request cost + one prompt's prefill, TPOT = the batch-1 step."""
    _, slow = pair()
    timer = closed_loop.RooflineTimer(slow)
    est = open_loop.open_loop_estimate_with(
        timer, workload=(1024, 128), rate_per_s=1e-4, max_batch=64, calibrated=False
    )
    step = roofline.decode_step_s(slow, batch=1, ctx_tokens=1024 + 64)
    assert est.ttft_s == pytest.approx(0.15 + roofline.ttft_s(slow, prompt_tokens=1024), rel=1e-3)
    assert est.tpot_s == pytest.approx(step, rel=1e-3)
    assert est.output_tokens_per_s == pytest.approx(1e-4 * 128, rel=1e-12)


def test_open_loop_batch_obeys_littles_law_and_grows_with_rate() -> None:
    base, _ = pair()
    timer = closed_loop.RooflineTimer(base)
    slow_rate, fast_rate = (
        open_loop.open_loop_estimate_with(
            timer, workload=(512, 256), rate_per_s=r, max_batch=256, calibrated=False
        )
        for r in (1.0, 8.0)
    )
    for rate, est in ((1.0, slow_rate), (8.0, fast_rate)):
        assert est.running_batch == pytest.approx(rate * 255 * est.tpot_s, abs=1.0)
    assert fast_rate.tpot_s > slow_rate.tpot_s


def test_open_loop_past_capacity_is_the_saturated_closed_loop() -> None:
    base, _ = pair()
    timer = closed_loop.RooflineTimer(base)
    est = open_loop.open_loop_estimate_with(
        timer, workload=(512, 256), rate_per_s=1e4, max_batch=8, calibrated=False
    )
    assert est.running_batch == 8
    assert est.output_tokens_per_s < 1e4 * 256


ROW = {
    "model": "qwen3-8b", "card": "ascend-950pr", "dtype": "bf16", "kv_dtype": "", "tp": "1", "engine": "vllm",
    "concurrency": "", "input_tokens": "512", "output_tokens": "128", "output_tokens_per_s": "256",
    "ttft_s": "0.2", "tpot_s": "0.03", "request_rate": "2",
}  # fmt: skip


def test_open_loop_row_concurrency_from_littles_law() -> None:
    point = parse_serving_row(ROW, where="rows.csv:2")
    assert point.request_rate_per_s == 2.0
    assert point.concurrency == 9  # ceil(2 * (0.2 + 127 * 0.03)) = ceil(8.02)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"request_rate": "-1"}, "request_rate"),
        ({"request_rate": "fast"}, "request_rate"),
        ({"ttft_s": ""}, "Little's law"),
        ({"request_rate": ""}, "concurrency"),
    ],
)
def test_open_loop_row_is_validated_strictly(change: dict[str, str], needle: str) -> None:
    with pytest.raises(DataFileError, match=needle):
        parse_serving_row(ROW | change, where="rows.csv:2")


def test_fit_finds_a_per_request_cost_from_ttft_rows() -> None:
    """Rows made by a known request cost: the fit recovers it and leaves the per-pass cost near its prior,
    because only TTFT moves with it."""
    base = deployment_950pr("qwen3-8b", scheme="bf16", engine="vllm")
    truth = base.hardware.coefficients(calibrated=False).model_copy(update={"request_overhead_us": 200_000.0})
    rows = []
    for i, (rate, prompt) in enumerate([(0.5, 256), (1.0, 512), (2.0, 1024), (4.0, 256), (1.0, 2048)]):
        point = parse_serving_row(
            ROW | {"request_rate": str(rate), "input_tokens": str(prompt)}, where=f"r:{i}"
        )
        est = fit_serving.estimate(
            fit_serving.prepare([point], hardware=base.hardware, calibrated=False)[0], truth
        )
        rows.append(
            parse_serving_row(
                ROW | {"request_rate": str(rate), "input_tokens": str(prompt), "ttft_s": f"{est.ttft_s:.6g}",
                       "tpot_s": f"{est.tpot_s:.6g}",
                       "output_tokens_per_s": f"{est.output_tokens_per_s:.6g}"},
                where=f"r:{i}",
            )
        )  # fmt: skip
    result = fit.fit_coefficients([], hardware=base.hardware, serving=rows)
    assert result.coefficients.request_overhead_us == pytest.approx(200_000.0, rel=0.1)
    assert result.coefficients.prefill_pass_overhead_us < 20_000.0


def test_a_parameter_on_its_bound_names_the_rows_pulling_it() -> None:
    """TTFTs no per-request cost within the box can explain (60 s at a trickle): the request cost sits on its
    upper bound and the warning names the TTFT observations that pull it there."""
    base = deployment_950pr("qwen3-8b", scheme="bf16", engine="vllm")
    rows = [
        parse_serving_row(
            ROW | {"request_rate": "0.5", "ttft_s": "60", "input_tokens": str(p)}, where=f"r:{p}"
        )
        for p in (256, 512)
    ]
    result = fit.fit_coefficients([], hardware=base.hardware, serving=rows)
    index = fit_params.PARAM_NAMES.index("request_overhead_us")
    assert result.bounds[index] == "upper"
    assert "r:256 (TTFT)" in result.bound_pullers["request_overhead_us"]
    assert any(
        "request_overhead_us" in w and "pulled there by" in w and "(TTFT)" in w for w in result.warnings
    )


def test_plan_ttft_names_what_a_client_sees_as_serve_does() -> None:
    """The mission plan's TTFT is the engine's prefill of a 256-token prompt alone (75 ms on the seed fit);
    the fitted profile also charges 333 ms per request outside the forward pass, which `kvplan serve` at
    one user includes (the seed measured 410 ms). The plan carries that cost and prints the client's sum,
    equal to serve's TTFT at concurrency 1 (same workload prompt), instead of leaving 75 ms unqualified."""
    import json

    from typer.testing import CliRunner

    from planner.cli import app

    runner = CliRunner()
    flags = ["-m", "qwen3-27b", "--dtype", "fp8"]
    plan = runner.invoke(app, [*flags, "--ctx", "32k", "--json"])
    perf = json.loads(plan.output)["performance"]
    assert perf["ttft_prompt_tokens"] == 256 and perf["request_overhead_s"] > 0.3
    serve = runner.invoke(app, ["serve", *flags, "--concurrency", "1", "--json"])
    client_s = json.loads(serve.output)["simulated"]["ttft_s"]["mean"]
    assert perf["ttft_s"] + perf["request_overhead_s"] == pytest.approx(client_s, rel=1e-3)
    text = " ".join(runner.invoke(app, [*flags, "--ctx", "32k"], terminal_width=400).output.split())
    assert f"a client sees {client_s * 1e3:.1f} ms" in text
