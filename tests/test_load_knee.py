"""The load knee (planner/perf/load_knee.py): the analytic closed loop, vectorised over concurrency, against
the scalar closed loop and against full simulations (`kvplan simulate --search knee`'s definition)."""

from __future__ import annotations

import numpy as np
import pytest

from planner import catalog
from planner.deployment import Deployment
from planner.perf import closed_loop, load_knee
from planner.perf.closed_loop import BenchRun
from planner.sim import bench
from tests.helpers import deployment_950pr


def deployment(model: str = "qwen3.5-27b", **kw: object) -> Deployment:
    return deployment_950pr(model, ctx_tokens=32768, **kw)


@pytest.mark.parametrize("kw", [{}, {"mtp_tokens": 1}, {"engine": "vllm"}])
def test_waves_are_the_closed_loops_cycles(kw: dict[str, object]) -> None:
    """Every K: the vectorised wave's cycle equals closed_loop.serving_estimate's (to rounding)."""
    dep = deployment(**kw)
    wave = load_knee.waves(dep, tokens=(256, 128), max_users=120)
    for users in (1, 2, 7, 32, 33, 96, 97, 120):
        est = closed_loop.serving_estimate(dep, input_tokens=256, output_tokens=128, concurrency=users)
        got = wave.prefill_s[users - 1] + wave.decode_s[users - 1]
        assert got == pytest.approx(est.cycle_s, rel=1e-9)


def test_the_knee_is_where_simulated_power_peaks() -> None:
    """Simulate the closed loop at loads around the knee: the analytic power (throughput / P99 end-to-end)
    at each load is within 5 % of the simulated one, and both peak at the same load."""
    dep = deployment()
    knee = load_knee.load_knee(dep)
    loads = sorted({1, max(1, knee.users // 3), knee.users, 3 * knee.users})
    wave = load_knee.waves(dep, tokens=(256, 128), max_users=max(loads))
    analytic, simulated = [], []
    for users in loads:
        run = BenchRun(num_requests=8 * users)
        sim = bench.simulate_bench(dep, tokens=(256, 128), concurrency=users, bench=run).summary
        simulated.append(sim.throughput.output_tokens_per_s / sim.e2e_s.p99)
        cycle = wave.prefill_s[users - 1] + wave.decode_s[users - 1]
        analytic.append(users * 128 / cycle**2)
    assert np.asarray(simulated) == pytest.approx(np.asarray(analytic), rel=0.05)
    assert loads[int(np.argmax(simulated))] == loads[int(np.argmax(analytic))] == knee.users


def test_knee_fields_are_consistent() -> None:
    dep = deployment()
    knee = load_knee.load_knee(dep)
    assert 1 <= knee.users <= knee.max_users <= load_knee.MAX_KNEE_USERS
    assert knee.single_user_tpot_s < knee.tpot_p99_s < knee.e2e_p99_s
    assert knee.output_tokens_per_s == pytest.approx(knee.users * 128 / knee.e2e_p99_s)
    # a larger card memory holds more users, the knee (a speed property) stays put
    card = catalog.load_card("ascend-950pr").model_copy(update={"memory_capacity_gib": 64})
    small = load_knee.load_knee(deployment().model_copy(update={"hardware": card}))
    assert small.max_users < knee.max_users and small.users == knee.users


def test_prefill_pass_grid_is_the_closed_loops_pass() -> None:
    dep = deployment(mtp_tokens=1)
    sizes = np.arange(2, 40, dtype=np.float64)
    grid = load_knee.prefill_pass_s_grid(dep, prompts=sizes, prompt_tokens=300)
    want = [closed_loop.batched_prefill_s(dep, prompts=int(n), prompt_tokens=300) for n in sizes]
    assert grid == pytest.approx(np.asarray(want), rel=1e-9)


def test_the_mission_command_says_where_tails_blow_up() -> None:
    import json

    from typer.testing import CliRunner

    from planner.cli import app

    args = ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8"]
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0, text.output
    payload = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)
    knee = payload["load_knee"]
    assert f"Load knee: {knee['users']} users at 256 in / 128 out" in text.output
    assert knee["tpot_p99_s"] > knee["single_user_tpot_s"] and knee["users"] <= knee["max_users"]
