"""Attention data parallel in the simulator (planner/sim/dpgroups.py); layout flags of serve and simulate."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from planner import inputs
from planner.cli import app
from planner.deployment import Deployment
from planner.engines import registry
from planner.sim import dpgroups, instance, run, schedulers
from planner.sim import workload as wl
from planner.sim.engine import Engine

runner = CliRunner()


def moe(**kw: object) -> Deployment:
    fields: dict[str, object] = {"dtype": "int8", "tp": 2, "ctx": "2048", "engine": "vllm", **kw}
    return inputs.to_deployment(inputs.PlanRequest(model="qwen3-30b-a3b", card="ascend-910c", **fields))  # type: ignore[arg-type]


def poisson(count: int, rate: float) -> wl.Workload:
    lengths = (wl.LengthDist("uniform", 200, 1500), wl.LengthDist("uniform", 16, 300))
    return wl.synthetic(lengths=lengths, count=count, rate_per_s=rate, seed=4)


def dense(**kw: object) -> Deployment:
    fields: dict[str, object] = {"dtype": "int8", "tp": 1, "ctx": "2048", "engine": "vllm", **kw}
    return inputs.to_deployment(inputs.PlanRequest(model="qwen3-8b", card="ascend-910c", **fields))  # type: ignore[arg-type]


def test_dense_vllm_groups_are_independent_engines() -> None:
    """vLLM runs non-MoE DP ranks independently (vllm/v1/engine/core.py run_engine_core): dp 2 of a dense
    model runs the requests at even arrival ranks on group 0 exactly as a lone engine would run them."""
    dep, work = dense(dp=2), poisson(300, 6.0)
    assert not registry.dp_lockstep(dep) and registry.dp_lockstep(moe(dp=2, ep=4))
    result = dpgroups.simulate_dp(dep, work, slo=(None, None), knobs={})
    index, part = dpgroups.group_workloads(work, dp=2)[0]
    cap = result.summary.scheduler.max_batch
    alone = run.simulate(dep, part, cfg=run.default_config(dep, workload=part, max_batch=cap)).records
    assert result.records.finish_s[index] == pytest.approx(alone.finish_s, rel=1e-12)
    assert result.summary.requests == 300 and np.all(result.records.finish_s > result.records.arrival_s)


def rank_engines(dep: Deployment, works: list[wl.Workload]) -> list[Engine]:
    """One engine per DP rank on its own workload, with the knobs the instance's groups get."""
    cfgs = [
        run.default_config(dep, workload=w, max_batch=16, max_prefill_tokens=8192, max_batched_tokens=8192)
        for w in works
    ]
    return [instance.make_engine(c, run.build_table(dep, c, w), w) for c, w in zip(cfgs, works, strict=True)]


def one(prompt: int, output: int, at_s: float) -> wl.Workload:
    return wl.Workload(np.array([prompt]), np.array([output]), np.array([at_s]), None)


def test_lockstep_decode_step_lasts_the_prefill_ranks_step() -> None:
    """Hand-worked (vLLM DPEngineCoreProc: every MoE rank runs a forward each step, idle ones a dummy, so a
    step lasts as long as the slowest rank's): rank 0 decodes one request (64 in, 400 out); rank 1 gets a
    4096-token prompt at 0.5 s. The round that prefills it starts at rank 0's first step boundary at or
    after 0.5 s and lasts the prefill pass (mixed_s of batch 0 and one 4096-token chunk), so rank 0's decode
    step there lasts exactly that; alone it would have lasted decode_s(1, ctx)."""
    dep = moe(dp=2, ep=4)
    engines = rank_engines(dep, [one(64, 400, 0.0), one(4096, 8, 0.5)])
    dpgroups.run_lockstep(engines, vote=False)
    decoder, prefiller = engines
    pass_s = prefiller.table.mixed_s(0, 0.0, schedulers.prefill_shape([(0, 4096, 0)]))
    times = np.asarray(decoder.trace[0])
    start = times[np.searchsorted(times, 0.5)]  # first round start at or after the arrival
    assert prefiller.first[0] == pytest.approx(start + pass_s, rel=1e-12)
    assert np.any(np.isclose(times, start + pass_s, rtol=1e-12))  # rank 0's next step starts then
    # rank 0's request takes one prefill-long step instead of one decode step, and otherwise decodes as alone
    alone = rank_engines(dep, [one(64, 400, 0.0)])
    dpgroups.run_lockstep(alone, vote=False)
    ctx = 64 + 1 + round((start - decoder.first[0]) / decoder.table.decode_s(1, 300.0))
    delay_s = decoder.finish[0] - alone[0].finish[0]
    assert pass_s > 5 * decoder.table.decode_s(1, ctx)
    assert delay_s == pytest.approx(pass_s - decoder.table.decode_s(1, ctx), rel=0.02)


def test_lockstep_matches_a_lone_engine_when_one_rank_is_idle() -> None:
    """With nothing on rank 1 (idle ranks run a one-token dummy, never the slowest), rank 0 runs as alone."""
    dep = moe(dp=2, ep=4)
    engines = rank_engines(
        dep, [one(300, 200, 0.0), wl.Workload(np.array([64]), np.array([4]), np.array([1e4]), None)]
    )
    dpgroups.run_lockstep(engines, vote=False)
    alone = instance.run_engine(engines[0].cfg, engines[0].table, one(300, 200, 0.0))
    assert engines[0].finish[0] == pytest.approx(alone.finish[0], rel=1e-9)
    assert engines[0].first[0] == pytest.approx(alone.first[0], rel=1e-12)


def test_mindie_ranks_run_the_majoritys_phase() -> None:
    """MindIE (pre_scheduler.cpp DecidePDPriority: ranks with work vote, a tie goes to prefill). Two ranks,
    one decoding and one with a prompt past its queue delay: 1:1, prefill; the decoding rank pauses (a dummy
    pass) for the whole prefill. Three ranks, two decoding: decode wins and the prompt waits for a round in
    which prefill has the majority (the decoders' requests done)."""
    dep = moe(dp=2, ep=4, engine="mindie")
    assert registry.dp_phase_vote(dep)
    engines = rank_engines(dep, [one(64, 50, 0.0), one(2048, 4, 0.2)])
    dpgroups.run_lockstep(engines, vote=True)
    decoder, prefiller = engines
    pass_s = prefiller.table.pass_s(*schedulers.prefill_shape([(0, 2048, 0)]))
    ready_s = 0.2 + prefiller.cfg.queue_delay_s
    times = np.asarray(decoder.trace[0])
    start = times[np.searchsorted(times, ready_s)]
    assert prefiller.first[0] == pytest.approx(start + pass_s, rel=1e-12)
    assert decoder.finish[0] > 0.2 + pass_s
    three = rank_engines(dep, [one(64, 50, 0.0), one(64, 50, 0.0), one(2048, 4, 0.2)])
    dpgroups.run_lockstep(three, vote=True)
    assert three[2].first[0] > max(three[0].finish[0], three[1].finish[0])


def test_qwen3_235b_dp4_decode_is_slower_in_lockstep() -> None:
    """Issue 23's case: Qwen3-235B-A22B dp 4 ep 16, Poisson prompts of mixed lengths. Coupled, each decode
    step waits for the slowest rank (another rank's prefill), so TPOT exceeds the independent groups'."""
    dep = inputs.to_deployment(
        inputs.PlanRequest(
            model="qwen3-235b-a22b",
            card="ascend-910c",
            dtype="int8",
            tp=4,
            dp=4,
            ep=16,
            ctx="4096",
            engine="vllm",
        )
    )
    lengths = (wl.LengthDist("uniform", 256, 3072), wl.LengthDist("uniform", 64, 512))
    work = wl.synthetic(lengths=lengths, count=400, rate_per_s=8.0, seed=1)
    coupled = dpgroups.simulate_dp(dep, work, slo=(None, None), knobs={})
    independent = dpgroups.simulate_dp(dep, work, slo=(None, None), knobs={}, lockstep=False)
    assert coupled.summary.tpot_s.mean > independent.summary.tpot_s.mean


def test_closed_loop_users_are_split_over_the_groups() -> None:
    work = poisson(240, 1.0)
    closed = wl.Workload(work.input_tokens, work.output_tokens, arrival_s=None, concurrency=9)
    parts = dpgroups.group_workloads(closed, dp=2)
    assert [p.concurrency for _, p in parts] == [5, 4]
    assert sorted(np.concatenate([i for i, _ in parts]).tolist()) == list(range(240))
    result = dpgroups.simulate_dp(moe(dp=2, ep=4), closed, slo=(None, None), knobs={})
    # 9 users while both groups run; the groups hold 5 and 4 users but 120 requests each, so the 5-user group
    # drains first and the run's tail holds 4 users: the time average sits a little under 9, never above
    assert 0.9 * 9 <= result.summary.mean_in_system <= 9.0
    assert result.summary.max_batch_reached == 5


SIM = ["simulate", "-m", "qwen3-30b-a3b", "--card", "ascend-910c", "--dtype", "int8", "--engine", "vllm",
       "--requests", "120", "--input-tokens", "512", "--output-tokens", "64"]  # fmt: skip


def test_cli_layout_flags() -> None:
    out = runner.invoke(app, [*SIM, "--tp", "2", "--dp", "2", "--ep", "4", "--rate", "4", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["requests"] == 120
    text = runner.invoke(app, [*SIM, "--tp", "4", "--ep", "4", "--concurrency", "8"])
    assert text.exit_code == 0 and "tp=4 ep=4" in text.output


def test_serve_dp_is_one_group_times_dp() -> None:
    """serve --dp D (issue 23): one DP group's ceil(K / D) users, the instance D times its output, as the
    serving fit (fit_serving.replica_run) predicts a dp row."""
    base = ["serve", "-m", "qwen3-30b-a3b", "--card", "ascend-910c", "--tp", "2", "--json"]
    base += ["--input-tokens", "512", "--output-tokens", "64", "--num-requests", "64"]
    two = json.loads(runner.invoke(app, [*base, "--dp", "2", "--concurrency", "8"]).output)
    one = json.loads(runner.invoke(app, [*base, "--dp", "2", "--concurrency", "7"]).output)
    assert two["estimate"]["concurrency"] == 4 and one["estimate"]["concurrency"] == 4  # ceil(K / 2)
    assert two["instance_output_tokens_per_s"] == pytest.approx(2 * two["estimate"]["output_tokens_per_s"])
    assert two["dp"] == 2


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        # --dp with --pd runs (each instance's DP groups are engines: tests/test_sim_pd_layouts.py); a prefill
        # side whose ep does not fit its own tp x dp is refused under its own flag
        (
            [*SIM, "--tp", "2", "--dp", "2", "--ep", "4", "--rate", "2", "--pd", "1:1", "--prefill-dp", "1"],
            "--prefill-ep",
        ),
        ([*SIM, "--dp", "0", "--rate", "2"], "--dp"),
    ],
)
def test_cli_layout_refusals_are_one_line(args: list[str], needle: str) -> None:
    out = runner.invoke(app, args)
    assert out.exit_code == 2, out.output
    assert out.output.startswith("kvplan: error: ") and out.output.count("\n") == 1 and needle in out.output
