"""Attention data parallel in the simulator (planner/sim/dpgroups.py); layout flags of serve and simulate."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from planner import inputs
from planner.cli import app
from planner.deployment import Deployment
from planner.sim import dpgroups, run
from planner.sim import workload as wl

runner = CliRunner()


def moe(**kw: object) -> Deployment:
    fields: dict[str, object] = {"dtype": "int8", "tp": 2, "ctx": "2048", "engine": "vllm", **kw}
    return inputs.to_deployment(inputs.PlanRequest(model="qwen3-30b-a3b", card="ascend-910c", **fields))  # type: ignore[arg-type]


def poisson(count: int, rate: float) -> wl.Workload:
    lengths = (wl.LengthDist("uniform", 200, 1500), wl.LengthDist("uniform", 16, 300))
    return wl.synthetic(lengths=lengths, count=count, rate_per_s=rate, seed=4)


def test_each_group_is_one_engine_on_its_share() -> None:
    """dp 2: the requests at even arrival ranks run on group 0 exactly as a lone engine would run them."""
    dep, work = moe(dp=2, ep=4), poisson(300, 6.0)
    result = dpgroups.simulate_dp(dep, work, slo=(None, None), knobs={})
    index, part = dpgroups.group_workloads(work, dp=2)[0]
    cap = result.summary.scheduler.max_batch
    alone = run.simulate(dep, part, cfg=run.default_config(dep, workload=part, max_batch=cap)).records
    assert result.records.finish_s[index] == pytest.approx(alone.finish_s, rel=1e-12)
    assert result.summary.requests == 300 and np.all(result.records.finish_s > result.records.arrival_s)


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
        ([*SIM, "--tp", "2", "--dp", "2", "--rate", "2", "--pd", "1:1"], "--dp/--pd"),
        ([*SIM, "--dp", "0", "--rate", "2"], "--dp"),
    ],
)
def test_cli_layout_refusals_are_one_line(args: list[str], needle: str) -> None:
    out = runner.invoke(app, args)
    assert out.exit_code == 2, out.output
    assert out.output.startswith("kvplan: error: ") and out.output.count("\n") == 1 and needle in out.output
