"""Closed-loop serving estimate (planner/serving/closed_loop.py): what a benchmark at fixed concurrency
sees."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.deployment import Deployment
from planner.perf import roofline
from planner.serving import closed_loop, estimate
from planner.serving.closed_loop import BenchRun
from tests.helpers import deployment_950pr


def deployment(model_id: str = "qwen3.5-27b", **kw: object) -> Deployment:
    return deployment_950pr(model_id, **kw)


def test_single_stream_is_the_decode_speed() -> None:
    """One client: nothing to interleave. TTFT = prefill; O - 1 verify steps of t / a each after it."""
    dep = deployment("qwen3.5-0.8b", weight_scheme_name="bf16", mtp_tokens=1, mtp_acceptance_fraction=0.896)
    est = closed_loop.serving_estimate(dep, input_tokens=862, output_tokens=64, concurrency=1)
    step_s = roofline.decode_step_s(dep, batch=1, ctx_tokens=862 + 32)
    assert est.per_user_tokens_per_s == pytest.approx(1.896 / step_s, rel=1e-12)
    assert est.ttft_s == pytest.approx(roofline.ttft_s(dep, prompt_tokens=862), rel=1e-12)
    assert est.request_latency_s == pytest.approx(est.ttft_s + 63 * step_s / 1.896, rel=1e-12)


def test_waves_within_one_prefill_pass_have_no_interference() -> None:
    """8 prompts of 256 tokens fit one 8192-token prefill pass: every request's first token comes at the
    end of that pass and its TPOT window holds only decode steps, so per-user = a / t exactly."""
    dep = deployment(weight_scheme_name="fp8")
    est = closed_loop.serving_estimate(dep, input_tokens=256, output_tokens=128, concurrency=8)
    step_s = roofline.decode_step_s(dep, batch=8, ctx_tokens=256 + 64)
    assert (est.prefill_batch, est.running_batch) == (8, 8)
    assert est.tpot_s == pytest.approx(step_s, rel=1e-12)
    assert est.ttft_s == pytest.approx(est.prefill_pass_s, rel=1e-12)
    # one batched pass of 8 prompts costs more than one prompt and less than 8 separate ones
    assert est.prefill_s < est.prefill_pass_s < 8 * est.prefill_s


def test_littles_law_and_prefill_share() -> None:
    dep = deployment(mtp_tokens=1, mtp_acceptance_fraction=0.9)
    est = closed_loop.serving_estimate(dep, input_tokens=1024, output_tokens=256, concurrency=32)
    assert est.request_latency_s == pytest.approx(32 / est.requests_per_s, rel=1e-12)
    assert est.output_tokens_per_s == pytest.approx(est.requests_per_s * 256, rel=1e-12)
    decode_only = 32 * est.tokens_per_step / est.decode_step_s
    assert est.output_tokens_per_s < decode_only  # prefill only takes engine time away
    assert 0 < est.prefill_time_fraction < 1


def test_staggered_arrivals_put_other_prefills_in_every_window() -> None:
    """Staggered: window = decode + (b - 1) single prefills, so TPOT is the step plus (b - 1) P / (O - 1)."""
    dep = deployment(weight_scheme_name="fp8")
    run = BenchRun(arrivals="staggered")
    est = closed_loop.serving_estimate(dep, input_tokens=256, output_tokens=128, concurrency=16, run=run)
    expected = est.decode_step_s + 15 * est.prefill_s / 127
    assert est.tpot_s == pytest.approx(expected, rel=1e-12)
    waves = closed_loop.serving_estimate(dep, input_tokens=256, output_tokens=128, concurrency=16)
    assert est.per_user_tokens_per_s < waves.per_user_tokens_per_s


def test_queueing_beyond_max_batch() -> None:
    """K > max_batch: the engine runs max_batch; throughput is that of K = max_batch, latency grows K / b."""
    dep = deployment(weight_scheme_name="fp8")
    capped = closed_loop.serving_estimate(
        dep, input_tokens=512, output_tokens=128, concurrency=64, run=BenchRun(max_batch=16)
    )
    alone = closed_loop.serving_estimate(dep, input_tokens=512, output_tokens=128, concurrency=16)
    assert capped.running_batch == 16
    assert capped.output_tokens_per_s == pytest.approx(alone.output_tokens_per_s, rel=1e-12)
    assert capped.request_latency_s == pytest.approx(4 * alone.request_latency_s, rel=1e-12)
    assert capped.ttft_s > alone.ttft_s + 2.9 * alone.cycle_s  # waits about 3 cycles in the queue


def test_finite_run_counts_its_partial_last_wave() -> None:
    dep = deployment(weight_scheme_name="fp8")
    steady = closed_loop.serving_estimate(dep, input_tokens=256, output_tokens=128, concurrency=32)
    whole = closed_loop.serving_estimate(
        dep, input_tokens=256, output_tokens=128, concurrency=32, run=BenchRun(num_requests=96)
    )
    ragged = closed_loop.serving_estimate(
        dep, input_tokens=256, output_tokens=128, concurrency=32, run=BenchRun(num_requests=97)
    )
    assert whole.output_tokens_per_s == pytest.approx(steady.output_tokens_per_s, rel=1e-12)
    assert ragged.output_tokens_per_s < whole.output_tokens_per_s  # a 1-request wave at the end


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(concurrency=st.integers(1, 200), arrivals=st.sampled_from(["waves", "staggered"]))
def test_throughput_grows_with_concurrency(concurrency: int, arrivals: str) -> None:
    dep = deployment()
    run = BenchRun(arrivals=arrivals)  # type: ignore[arg-type]
    low = closed_loop.serving_estimate(
        dep, input_tokens=512, output_tokens=128, concurrency=concurrency, run=run
    )
    high = closed_loop.serving_estimate(
        dep, input_tokens=512, output_tokens=128, concurrency=concurrency + 1, run=run
    )
    assert high.output_tokens_per_s >= low.output_tokens_per_s * (1 - 1e-9)
    assert high.request_latency_s >= low.request_latency_s


def test_serve_cli_json_matches_the_library() -> None:
    import json

    from typer.testing import CliRunner

    from planner import inputs
    from planner.cli import app

    args = ["serve", "-m", "qwen3-8b", "--card", "ascend-910b3", "--input-tokens", "1k"]
    args += [
        "--output-tokens",
        "256",
        "--concurrency",
        "64",
        "--max-batch",
        "16",
        "--engine",
        "vllm",
        "--json",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)["estimate"]
    request = inputs.PlanRequest(model="qwen3-8b", card="ascend-910b3", ctx="1280", engine="vllm")
    want = closed_loop.serving_estimate(
        inputs.to_deployment(request),
        input_tokens=1024,
        output_tokens=256,
        concurrency=64,
        run=BenchRun(max_batch=16),
    )
    assert got["running_batch"] == 16
    assert got["output_tokens_per_s"] == pytest.approx(want.output_tokens_per_s, rel=1e-12)
    bad = CliRunner().invoke(app, ["serve", "-m", "qwen3-8b", "--arrivals", "poisson"])
    assert bad.exit_code == 2
    assert "--arrivals" in bad.output


def test_random_arrivals_share_prefill_passes() -> None:
    """Random: prompts arriving in one decode step share a pass. Few arrivals per step: "staggered" (one
    prompt per pass); many: fewer passes, so TPOT grows slower than staggered's b - 1 single prefills."""
    dep = deployment(weight_scheme_name="fp8")
    kw = {"input_tokens": 256, "output_tokens": 128}
    for concurrency, close in ((2, True), (96, False)):
        rand = closed_loop.serving_estimate(
            dep, concurrency=concurrency, run=BenchRun(arrivals="random"), **kw
        )
        stag = closed_loop.serving_estimate(
            dep, concurrency=concurrency, run=BenchRun(arrivals="staggered"), **kw
        )
        assert rand.tpot_s <= stag.tpot_s * (1 + 1e-12)
        assert (rand.tpot_s == pytest.approx(stag.tpot_s, rel=0.01)) is close
    busy = closed_loop.serving_estimate(dep, concurrency=400, run=BenchRun(arrivals="random"), **kw)
    assert busy.prefill_batch == 3  # ~3.1 arrivals per step: most passes hold several prompts


def test_merged_pass_formula() -> None:
    """n = lam / (1 - exp(-lam)) prompts per pass; prefill of b prompts = b / n passes of P(n), P affine
    between whole prompt counts."""
    dep = deployment(weight_scheme_name="fp8")
    timer = closed_loop.RooflineTimer(dep)
    assert closed_loop.prompts_per_merged_pass(0.0) == 1.0
    assert closed_loop.prompts_per_merged_pass(1.0) == pytest.approx(1 / (1 - math.exp(-1)), rel=1e-12)
    assert closed_loop.prompts_per_merged_pass(50.0) == pytest.approx(50.0, rel=1e-9)
    total_s, pass_s = closed_loop.merged_prefill_s(timer, prompt_tokens=256, batch=127, steps=127.0)
    n = 1 / (1 - math.exp(-1))
    p1, p2 = (timer.prefill_s(prompts=k, prompt_tokens=256) for k in (1, 2))
    assert pass_s == pytest.approx(p1 + (n - 1) * (p2 - p1), rel=1e-12)
    assert total_s == pytest.approx(127 / n * pass_s, rel=1e-12)
    assert closed_loop.merged_prefill_s(timer, prompt_tokens=256, batch=0, steps=127.0) == (0.0, 0.0)


def test_random_pass_holds_no_more_prompts_than_the_budget() -> None:
    """Random arrivals: the reported prompts per pass is the merged count capped by the pass's token budget
    (MindIE maxPrefillTokens, vLLM max_num_batched_tokens), the count its pass time was timed at. 4096-token
    prompts, 8192-token budget: 2 per pass, though ~4 arrive per step at 64 users and 16 output tokens."""
    dep = deployment(weight_scheme_name="fp8", max_prefill_tokens=8192)
    run = BenchRun(arrivals="random")
    est = closed_loop.serving_estimate(dep, input_tokens=4096, output_tokens=16, concurrency=64, run=run)
    timer = closed_loop.RooflineTimer(dep)
    steps = 15 / timer.tokens_per_step
    assert closed_loop.prompts_per_merged_pass(64 / steps) > 3.0  # uncapped: more than the budget holds
    assert est.prefill_batch == 2
    assert est.prefill_pass_s == pytest.approx(timer.prefill_s(prompts=2, prompt_tokens=4096), rel=1e-12)


@pytest.mark.parametrize(("engine", "cap"), [("mindie", 50), ("vllm", 81)])
def test_a_pass_holds_no_more_prompts_than_the_engine_batches(engine: str, cap: int) -> None:
    """Short prompts: 100-token prompts under an 8192-token budget fill 81 per pass by tokens, but MindIE
    batches at most maxPrefillBatchSize (default 50, as its simulator scheduler and the configs kvplan
    writes keep it) prompts per prefill; vLLM has no such count. The staggered wave takes min(that, users);
    the load knee's per-pass cap reads the same function."""
    dep = deployment(weight_scheme_name="fp8", max_prefill_tokens=8192, engine=engine)
    timer = closed_loop.RooflineTimer(dep)
    assert timer.max_prompts_per_pass == (50 if engine == "mindie" else None)
    assert estimate.prompts_per_prefill_pass(timer, prompt_tokens=100, running_batch=200) == cap
    assert estimate.prompts_per_prefill_pass(timer, prompt_tokens=100, running_batch=30) == 30
