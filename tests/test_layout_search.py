"""`kvplan layout` (planner/plan/layout_search.py): every candidate fits the budget and the SLOs, ranked by
tokens/s per device; tensor-parallel-only layouts are among the candidates, so the best is never worse."""

from __future__ import annotations

import functools
import json

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.inputs import PlanRequest, ServiceLevels, to_deployment
from planner.plan import layout_search
from planner.plan.compose import build_plan
from planner.sim import bench
from tests.helpers import replacing

runner = CliRunner()


def test_candidates_respect_budget_and_slo_and_are_ranked() -> None:
    dep = to_deployment(PlanRequest(model="deepseek-v3", card="ascend-910c", dtype="int8", ctx="4k"))
    with_slo = functools.partial(build_plan, slo_search=bench.slo_answer)  # as cli/layouts.py wires it
    result = layout_search.search_layouts(dep, budget=32, slo=ServiceLevels(tpot_s=0.06), plan_of=with_slo)
    assert result.candidates
    scores = [c.tokens_per_s_per_device for c in result.candidates]
    assert scores == sorted(scores, reverse=True)
    for c in result.candidates:
        assert c.devices == c.tp * c.dp * c.pp <= 32 and c.replicas == 32 // c.devices
        assert c.slo_tpot_p99_s is not None and c.slo_tpot_p99_s <= 0.06  # the target, on the simulated tails
        assert (c.tp * c.dp) % c.ep == 0 and c.pp == 1  # MindIE: no pipeline stages
        assert c.tokens_per_s_per_device == c.tokens_per_s / c.devices


@pytest.mark.slow
def test_the_pruned_slo_search_keeps_the_exhaustive_top() -> None:
    """With SLOs the search simulates layouts best bound first and stops once `keep` score above every
    bound left (a layout's score without SLOs bounds it): its best `keep` are the exhaustive search's."""
    dep = to_deployment(PlanRequest(model="deepseek-v3", card="ascend-910c", dtype="int8", ctx="4k"))
    with_slo = functools.partial(build_plan, slo_search=bench.slo_answer)
    slo = ServiceLevels(tpot_s=0.06)
    every = layout_search.search_layouts(dep, budget=32, slo=slo, plan_of=with_slo).candidates
    pruned = layout_search.search_layouts(dep, budget=32, slo=slo, plan_of=with_slo, keep=3).candidates
    assert len(every) > len(pruned) >= 3
    assert pruned[:3] == every[:3]


def test_best_layout_is_never_worse_than_tensor_parallel_alone() -> None:
    dep = to_deployment(PlanRequest(model="qwen3-235b-a22b", card="ascend-910c", dtype="bf16", ctx="5k"))
    best = layout_search.search_layouts(dep, budget=16, slo=ServiceLevels(), plan_of=build_plan).candidates[0]
    plan = build_plan(dep.model_copy(update={"tp": 16}))
    assert plan.performance is not None
    assert best.tokens_per_s_per_device >= plan.performance.tokens_per_s / 16


def test_dense_models_get_no_expert_parallelism_and_vllm_tries_pipelines() -> None:
    dep = to_deployment(PlanRequest(model="qwen3-32b", card="ascend-910b4", ctx="4k", engine="vllm"))
    found = layout_search.search_layouts(dep, budget=8, slo=ServiceLevels(), plan_of=build_plan).candidates
    assert {c.ep for c in found} == {1}
    assert any(c.pp > 1 for c in found)


def test_cli_json_and_errors() -> None:
    base = ["layout", "--model", "qwen3-32b", "--card", "ascend-910b4", "--ctx", "4k"]
    ok = runner.invoke(app, [*base, "--budget-devices", "8", "--top", "3", "--json"])
    assert ok.exit_code == 0, ok.output
    payload = json.loads(ok.stdout)
    assert len(payload["candidates"]) == 3 and payload["budget_devices"] == 8
    none = runner.invoke(app, replacing(base, ["--model", "deepseek-v3", "--budget-devices", "2"]))
    assert none.exit_code == 3 and none.stderr.startswith("kvplan: error: --budget-devices: no layout")
    bad = runner.invoke(app, [*base, "--budget-devices", "0"])
    assert bad.exit_code == 2 and "--budget-devices: out of range (got 0" in bad.stderr
