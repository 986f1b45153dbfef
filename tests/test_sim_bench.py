"""`kvplan serve` on the simulator (planner/sim/bench.py): agreement with the analytic closed loop (the
fits' fast path, planner/serving/closed_loop.py), the run's size, and the CLI's JSON (old keys kept)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.deployment import Deployment
from planner.serving import closed_loop
from planner.serving.closed_loop import BenchRun
from planner.sim import bench
from tests.helpers import deployment_950pr


def deployment(engine: str = "mindie", *, ctx: int, model: str = "qwen3.5-27b") -> Deployment:
    return deployment_950pr(model, engine=engine, ctx_tokens=ctx)


@pytest.mark.parametrize("users", [1, 8, 32])
@pytest.mark.parametrize("arrivals", ["waves", "staggered"])
def test_simulated_bench_agrees_with_the_analytic_closed_loop(users: int, arrivals: str) -> None:
    """Same deployment, same K users, same I/O: throughput and mean TPOT within 3 % (the analytic model
    times a cycle at its mean context; staggered spreads the output lengths around O)."""
    prompt, output = 1024, 256
    dep = deployment(ctx=prompt + output)
    run = BenchRun(arrivals=arrivals)  # type: ignore[arg-type]
    sim = bench.simulate_bench(dep, tokens=(prompt, output), concurrency=users, bench=run).summary
    est = closed_loop.serving_estimate(
        dep, input_tokens=prompt, output_tokens=output, concurrency=users, run=run
    )
    assert sim.throughput.output_tokens_per_s == pytest.approx(est.output_tokens_per_s, rel=0.03)
    assert sim.tpot_s.mean == pytest.approx(est.tpot_s, rel=0.03)
    assert sim.max_batch_reached == users and sim.preemptions == 0
    assert sim.ttft_s.p50 <= sim.ttft_s.p95 <= sim.ttft_s.p99


def test_queued_users_wait_for_a_slot() -> None:
    """K = 16 users on a cap of 4: the engine never runs more than 4; the analytic estimate agrees."""
    dep = deployment(ctx=512 + 128)
    run = BenchRun(max_batch=4)
    sim = bench.simulate_bench(dep, tokens=(512, 128), concurrency=16, bench=run).summary
    est = closed_loop.serving_estimate(dep, input_tokens=512, output_tokens=128, concurrency=16, run=run)
    assert sim.max_batch_reached == 4
    assert sim.throughput.output_tokens_per_s == pytest.approx(est.output_tokens_per_s, rel=0.03)
    assert sim.e2e_s.mean == pytest.approx(est.request_latency_s, rel=0.05)


@pytest.mark.parametrize(("users", "batch"), [(1, 1), (32, 32), (425, 425), (64, 8), (30_000, 30_000)])
def test_default_run_is_whole_waves(users: int, batch: int) -> None:
    count = bench.bench_requests(concurrency=users, running_batch=batch, num_requests=None)
    assert count >= users
    assert count % batch == 0
    assert count >= min(bench.MIN_BENCH_REQUESTS, bench.MAX_BENCH_REQUESTS // batch * batch)
    assert bench.bench_requests(concurrency=users, running_batch=batch, num_requests=7) == 7


def test_staggered_lengths_average_the_output() -> None:
    work = bench.bench_workload(tokens=(100, 200), concurrency=8, count=2000, arrivals="staggered")
    assert work.output_tokens.min() >= 100 and work.output_tokens.max() <= 300
    assert work.output_tokens.mean() == pytest.approx(200, rel=0.02)
    waves = bench.bench_workload(tokens=(100, 200), concurrency=8, count=50, arrivals="waves")
    assert set(waves.output_tokens.tolist()) == {200} and set(waves.input_tokens.tolist()) == {100}


def invoke(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["serve", "-m", "qwen3-27b", "--dtype", "fp8", *args, "--json"])
    assert result.exit_code == 0, result.output
    payload: dict[str, object] = json.loads(result.output)
    return payload


def test_serve_json_keeps_its_keys_and_adds_the_simulation() -> None:
    payload = invoke("--concurrency", "8", "--ttft-ms", "2000", "--tpot-ms", "100")
    assert {"slo", "estimate", "speed_range", "simulated"} <= set(payload)
    est, sim = payload["estimate"], payload["simulated"]
    assert isinstance(est, dict) and isinstance(sim, dict)
    for key in ("output_tokens_per_s", "ttft_s", "tpot_s", "request_latency_s", "per_user_tokens_per_s"):
        assert isinstance(est[key], float)
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        assert set(sim[key]) == {"mean", "p50", "p90", "p95", "p99"}
    assert sim["throughput"]["output_tokens_per_s"] == pytest.approx(est["output_tokens_per_s"], rel=0.03)
    assert sim["goodput_requests_per_s"] is not None
    assert sim["requests"] >= bench.MIN_BENCH_REQUESTS


def test_serve_prints_tails_beside_the_means() -> None:
    result = CliRunner().invoke(app, ["serve", "-m", "qwen3-27b", "--dtype", "fp8", "--concurrency", "8"])
    assert result.exit_code == 0, result.output
    for label in ("simulated (", "TTFT mean", "P99", "analytic steady state"):
        assert label in result.output


def test_serve_refuses_a_run_too_large_to_simulate() -> None:
    result = CliRunner().invoke(app, ["serve", "-m", "qwen3-8b", "--num-requests", "100000000"])
    assert result.exit_code == 2
    assert result.output.startswith("kvplan: error: --num-requests")
    assert "Traceback" not in result.output
