"""The load knee (planner/serving/knee.py): the analytic closed loop, vectorised over concurrency, against
the scalar closed loop and against full simulations (`kvplan simulate --search knee`'s definition)."""

from __future__ import annotations

import numpy as np
import pytest

from planner import capacity, catalog, inputs
from planner.deployment import Deployment
from planner.perf import prefill, roofline
from planner.serving import closed_loop
from planner.serving import knee as load_knee
from planner.serving.closed_loop import BenchRun
from planner.sim import bench
from planner.sim import run as sim_run
from planner.sim.metrics import SimSummary
from tests.helpers import deployment_950pr

SEED_CARD = catalog.load_card("ascend-950pr").model_copy(update={"memory_capacity_gib": 64})  # seed's card


def deployment(model: str = "qwen3.5-27b", **kw: object) -> Deployment:
    """An uncalibrated 950PR deployment; fitted=True: the mission on the seed's 64 GiB card with the default
    (fitted MindIE) profile, whose prefill passes carry a fitted per-pass overhead."""
    if kw.get("fitted"):
        request = inputs.PlanRequest(model="qwen3-27b", ctx="32k", dtype="fp8", memory_gib=64.0)
        return inputs.to_deployment(request)
    return deployment_950pr(model, ctx_tokens=32768, **kw)


@pytest.mark.parametrize("kw", [{}, {"mtp_tokens": 1}, {"engine": "vllm"}, {"fitted": True}])
def test_cycles_are_the_closed_loops_random_cycles(kw: dict[str, object]) -> None:
    """Every K: the vectorised cycle and TPOT window equal closed_loop.serving_estimate's under "random"
    arrivals (to rounding)."""
    dep = deployment(**kw)
    cyc = load_knee.cycles(dep, tokens=(256, 128), max_users=120)
    for users in (1, 2, 7, 32, 33, 96, 97, 120):
        est = closed_loop.serving_estimate(
            dep, input_tokens=256, output_tokens=128, concurrency=users, run=BenchRun(arrivals="random")
        )
        got = cyc.prefill_s[users - 1] + cyc.decode_s[users - 1]
        window = cyc.decode_s[users - 1] + cyc.others_prefill_s[users - 1]
        assert got == pytest.approx(est.cycle_s, rel=1e-9)
        assert window / 127 == pytest.approx(est.tpot_s, rel=1e-9)


def prefill_at_once(dep: Deployment, *, users: int) -> SimSummary:
    """bench.simulate_bench's staggered closed loop of `users` (256 in, 64..192 out) with MindIE's queue delay
    0: the analytic cycle prefills each request on its own as it arrives, while MindIE's default 5 ms delay
    holds prefills while decoding (scheduler.cpp ShouldImmediatePrefill) and so batches the arrivals of two
    decode steps: with it the fitted profile's simulated power is 18 % above the analytic at the knee and
    63 % above at 3x the knee (measured on the lockstep branch), which the analytic knee does not model."""
    run = BenchRun(num_requests=20 * users, arrivals="staggered")
    count = bench.bench_requests(concurrency=users, running_batch=users, num_requests=run.num_requests)
    work = bench.bench_workload(tokens=(256, 128), concurrency=users, count=count, arrivals=run.arrivals)
    knobs = {**bench.bench_knobs(dep, running_batch=users), "queue_delay_s": 0.0}
    return sim_run.simulate(dep, work, cfg=sim_run.default_config(dep, workload=work, **knobs)).summary


@pytest.mark.parametrize("kw", [{}, {"fitted": True}])
def test_the_knee_is_where_simulated_power_peaks(kw: dict[str, object]) -> None:
    """Simulate the closed loop at loads around the knee with staggered output lengths (uniform 64..192,
    mean 128: requests drift apart as under the seed's client; fixed lengths would stay in step). The
    analytic power (throughput / end-to-end, every request O tokens, so its P99 is its mean) is within 6 %
    of the simulated throughput / mean end-to-end at each load. The simulated P99 end-to-end (what
    `kvplan simulate --search knee` divides by) is the longest outputs' (~1.5x the mean at every load), so
    its power is lower but peaks at the same load, the analytic knee."""
    dep = deployment(**kw)
    knee = load_knee.load_knee(dep)
    loads = sorted({1, max(1, knee.users // 3), knee.users, 3 * knee.users})
    cyc = load_knee.cycles(dep, tokens=(256, 128), max_users=max(loads))
    analytic, simulated_mean, simulated_p99 = [], [], []
    for users in loads:
        sim = prefill_at_once(dep, users=users)
        simulated_mean.append(sim.throughput.output_tokens_per_s / sim.e2e_s.mean)
        simulated_p99.append(sim.throughput.output_tokens_per_s / sim.e2e_s.p99)
        cycle = cyc.prefill_s[users - 1] + cyc.decode_s[users - 1] + roofline.request_overhead_s(dep)
        analytic.append(users * 128 / cycle**2)
    assert np.asarray(simulated_mean) == pytest.approx(np.asarray(analytic), rel=0.06)
    assert loads[int(np.argmax(simulated_p99))] == loads[int(np.argmax(analytic))] == knee.users


def test_waves_knee_sits_past_the_drifting_one() -> None:
    """Requests in step (fixed lengths, all start together: no prefill inside anyone's decode) would put
    the knee further out than drifting ones on the fitted profile, whose slowdown is other requests'
    prefill passes: the scalar "waves" closed loop's power peaks past load_knee's."""
    dep = deployment(fitted=True)
    knee = load_knee.load_knee(dep)
    waves = [
        closed_loop.serving_estimate(dep, input_tokens=256, output_tokens=128, concurrency=users)
        for users in range(1, knee.max_users + 1)
    ]
    power = [est.output_tokens_per_s / est.request_latency_s for est in waves]
    assert int(np.argmax(power)) + 1 > knee.users


def test_knee_fields_are_consistent() -> None:
    dep = deployment()
    knee = load_knee.load_knee(dep)
    assert 1 <= knee.users <= knee.max_users <= load_knee.MAX_KNEE_USERS
    assert knee.single_user_tpot_s < knee.tpot_p99_s < knee.e2e_p99_s
    assert knee.output_tokens_per_s == pytest.approx(knee.users * 128 / knee.e2e_p99_s)
    # a larger card memory holds more users, the knee (a speed property) stays put
    small = load_knee.load_knee(deployment().model_copy(update={"hardware": SEED_CARD}))
    assert small.max_users < knee.max_users and small.users == knee.users


@pytest.mark.parametrize(
    ("model", "kw"),
    [
        ("qwen3.5-27b", {}),
        ("qwen3.5-27b", {"engine": "vllm"}),
        ("qwen3.5-27b", {"engine": "transformers"}),
        ("qwen3-32b", {"mtp_tokens": 1}),
        ("deepseek-v3", {"tp": 8, "dp": 2, "ep": 16}),
    ],
)
def test_users_memory_holds_reads_the_plans_memory(model: str, kw: dict[str, object]) -> None:
    """K_max from the plan's memory (planned once, at the plan's ctx) is what a memory plan at the knee's
    own sequence length (256 + 128 tokens) recommends for one DP group: the budget does not depend on ctx,
    only the per-sequence bytes do. With dp > 1 the knee's users are one group's (the memory plan's
    recommendation is the instance's, dp groups)."""
    dep = deployment(model, **kw)
    mem, _ = capacity.memory_plan(dep)
    group = capacity.per_dp_rank(dep)
    _, rec = capacity.memory_plan(group.model_copy(update={"ctx_tokens": 384, "batch": None}))
    want = max(1, min(rec.max_batch_size // dep.dp, load_knee.MAX_KNEE_USERS))  # rec: dp groups' batch
    assert load_knee.users_memory_holds(group, mem, sequence_tokens=384) == want
    assert load_knee.load_knee(group, memory=mem) == load_knee.load_knee(group)


@pytest.mark.parametrize("kw", [{"mtp_tokens": 1}, {"fitted": True}])
def test_prefill_pass_grid_is_the_itemised_ledger(kw: dict[str, object]) -> None:
    """The one pass time (roofline.batched_prefill_s_grid, which the closed loop reads at one n) equals the
    sum the --explain ledger itemises for that pass, the fitted profile's per-pass overhead included."""
    dep = deployment(**kw)
    sizes = np.arange(2, 40, dtype=np.float64)
    grid = roofline.batched_prefill_s_grid(dep, prompts=sizes, prompt_tokens=300)
    want = []
    for n in sizes:
        step = prefill.batched_prefill_step(dep, prompts=np.asarray([n]), prompt_tokens=300, cached_tokens=0)
        lengths = (int(n), 300, int(n) * 300)
        want.append(
            roofline.assemble_ledger(dep, step=step, chunks=1, phase="prefill", lengths=lengths).time_s
        )
    assert grid == pytest.approx(np.asarray(want), rel=1e-9)
    scalar = [closed_loop.batched_prefill_s(dep, prompts=int(n), prompt_tokens=300) for n in sizes]
    assert scalar == list(grid)


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


def test_the_knee_is_set_against_one_groups_share_of_the_batch() -> None:
    """The knee is one DP group's, so the cap it meets is the group's share of the instance's max_batch_size,
    layout.per_dp_rank_batch: llama-3.1-8b on a 910B3, dp 4, 8k: 128 for the instance, ceil(128 / 4) = 32 per
    group; a knee of 69 users per group is past it (it was compared with 128 and said memory holds more)."""
    from planner.cli.render import load_knee_line
    from tests.helpers import deployment as make_deployment

    dep = make_deployment("llama-3.1-8b", "ascend-910b3", dp=4, ctx_tokens=8192)
    knee = load_knee.load_knee(capacity.per_dp_rank(dep))
    assert knee.users > 32
    line = load_knee_line(knee, dep=dep, max_batch=128)
    assert (
        "per DP group" in line
        and "above max_batch_size 128 (32 per DP group), so the cap binds first" in line
    )
    alone = load_knee_line(knee, dep=dep.model_copy(update={"dp": 1}), max_batch=128)
    assert "memory holds" in alone  # dp 1: 128 sequences for the one group, past the knee


def test_simulated_knee_is_refined_between_its_coarse_neighbours() -> None:
    """`simulate --search knee` sweeps a coarse geometric grid and then its best point's neighbourhood, so
    the answer sits among close loads (no 21 -> 34 jump around it) and near the plan's analytic knee for
    the README's staggered workload (26 users analytic; within 20 %)."""
    import json

    from typer.testing import CliRunner

    from planner.cli import app

    runner = CliRunner()
    flags = ["-m", "qwen3-27b", "--dtype", "fp8", "--input-tokens", "256"]
    result = runner.invoke(
        app,
        ["simulate", *flags, "--concurrency", "256", "--search", "knee", "--output-tokens", "uniform:64:192",
         "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    xs = [p["x"] for p in found["points"]]
    at = xs.index(found["best"])
    assert 0 < at < len(xs) - 1 and xs[at + 1] - xs[at - 1] <= max(4, 0.25 * found["best"])
    plan = json.loads(
        runner.invoke(app, ["-m", "qwen3-27b", "--dtype", "fp8", "--ctx", "32k", "--json"]).stdout
    )
    assert abs(found["best"] / plan["load_knee"]["users"] - 1) <= 0.2
