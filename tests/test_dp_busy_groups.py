"""Fewer closed-loop clients than DP groups keep only that many groups busy: the instance's throughput is
layout.busy_dp_groups(users, dp) groups' worth, not dp's (a one-client run on dp 2 was predicted at twice
the one busy group). One rule for the fit (prepared.replica_share), `kvplan serve` and the plan's speed
(plan/compose.instance_performance)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from planner import capacity, layout
from planner.cli import app
from planner.deployment import Deployment
from planner.fit.prepared import replica_share
from planner.importers.benchpoints import ServingPoint
from planner.plan import compose
from planner.serving import performance
from tests.helpers import deployment


@pytest.mark.parametrize(
    ("users", "dp", "groups"), [(1, 2, 1.0), (1, 4, 1.0), (3, 4, 3.0), (8, 4, 4.0), (6, 4, 3.0), (5, 1, 1.0)]
)
def test_busy_groups_hand_worked(users: int, dp: int, groups: float) -> None:
    # 6 users on dp 4: groups of ceil(6/4) = 2, so 6 / 2 = 3 groups' worth (two groups of 2, two of 1)
    assert layout.busy_dp_groups(users, dp=dp) == groups


@given(st.integers(1, 10_000), st.integers(1, 64))
def test_busy_groups_never_exceed_dp_nor_users(users: int, dp: int) -> None:
    groups = layout.busy_dp_groups(users, dp=dp)
    assert 0 < groups <= min(dp, users)
    if users % dp == 0:
        assert groups == dp


def _point(concurrency: int, dp: int, rate: float | None = None) -> ServingPoint:
    return ServingPoint(
        model="qwen3-32b", card="ascend-910c", dtype="bf16", kv_dtype="", tp=2, dp=dp, engine="vllm",
        concurrency=concurrency, input_tokens=128, output_tokens=128, output_tokens_per_s=100.0,
        request_rate_per_s=rate, where="test:1",
    )  # fmt: skip


def test_the_fit_counts_busy_groups_for_closed_loops_and_every_replica_for_open_loops() -> None:
    assert replica_share(_point(1, 2)) == 1.0
    assert replica_share(_point(8, 2)) == 2.0
    assert replica_share(_point(1, 2, rate=0.5)) == 2.0  # an open loop's rate splits over every replica


def test_serve_one_client_on_dp2_is_one_groups_throughput() -> None:
    args = ["serve", "-m", "qwen3-32b", "--card", "ascend-910c", "--tp", "2", "--dp", "2", "--engine", "vllm"]
    args += ["--input-tokens", "256", "--output-tokens", "64", "--num-requests", "8", "--json"]
    one = json.loads(CliRunner().invoke(app, [*args, "--concurrency", "1"]).stdout)
    two = json.loads(CliRunner().invoke(app, [*args, "--concurrency", "2"]).stdout)
    group = one["estimate"]["output_tokens_per_s"]
    assert one["instance_output_tokens_per_s"] == pytest.approx(group)
    assert two["instance_output_tokens_per_s"] == pytest.approx(2 * two["estimate"]["output_tokens_per_s"])


def _dp4(batch: int) -> Deployment:
    return deployment("llama-3.1-8b", "ascend-910b3", dp=4, ctx_tokens=8192, batch=batch)


@pytest.mark.parametrize(("batch", "group_batch", "busy"), [(2, 1, 2.0), (6, 2, 3.0), (8, 2, 4.0)])
def test_the_plans_speed_counts_busy_groups(batch: int, group_batch: int, busy: float) -> None:
    """dp 4, --batch 2: groups of ceil(2 / 4) = 1 sequence, two of them busy, so the instance runs 2
    sequences at 2 x one group's tokens/s at batch 1 (it was 4 x, and a batch of 4). --batch 6: groups of 2,
    6 / 2 = 3 groups' worth; --batch 8: all 4 groups of 2."""
    dep = _dp4(batch)
    plan = compose.build_plan(dep)
    group = performance.performance(
        capacity.per_dp_rank(dep),
        batch=group_batch,
        ctx_tokens=8192,
        prompt_tokens=plan.performance.ttft_prompt_tokens,
    )
    assert plan.recommendation.max_batch_size == batch
    assert plan.performance.batch == batch
    assert plan.performance.tokens_per_s == pytest.approx(
        busy * group.tokens_per_s, rel=1e-12
    )  # same formula
    assert plan.performance.tokens_per_s == pytest.approx(batch * group.per_user_tokens_per_s, rel=1e-12)
    assert plan.performance.decode_step_s == group.decode_step_s
