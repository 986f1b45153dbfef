"""One SLO answer (issue 23): plan, serve, simulate --search, layout and the dashboard run the same
search (planner/sim/bench.search_users) on the same simulated closed loop and agree; every command that
searches exits 3 when nothing meets the targets (the dashboard says so); serve's headline is the load its
own simulation shows meeting them."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()
DEPLOY = ["-m", "qwen3-27b", "--dtype", "fp8", "--card", "ascend-950pr", "--memory-gib", "64"]
WORK = ["--input-tokens", "256", "--output-tokens", "128"]
SLO = ["--tpot-ms", "150", "--ttft-ms", "1000"]


def test_serve_and_simulate_search_give_the_same_users_and_serve_does_not_contradict_itself() -> None:
    served = runner.invoke(app, ["serve", *DEPLOY, *WORK, *SLO, "--json"])
    assert served.exit_code == 0, served.output
    serve = json.loads(served.stdout)
    best = serve["slo"]["best"]
    top = serve["admission"]["full_length_batch"]  # serve's first guess of the top: the full-length batch
    searched = runner.invoke(
        app,
        [
            "simulate",
            *DEPLOY,
            *WORK,
            *SLO,
            "--concurrency",
            str(top),
            "--search",
            "max-concurrency",
            "--json",
        ],
    )
    assert searched.exit_code == 0, searched.output
    assert json.loads(searched.stdout)["best"] == best
    # the headline's load is the simulated run's, and its tails meet the targets (the 117 users
    # "meeting" TTFT 1 s while the run below showed P99 TTFT 17 s)
    sim = serve["simulated"]
    assert serve["estimate"]["concurrency"] == best
    assert sim["ttft_s"]["p99"] <= 1.0 and sim["tpot_s"]["p99"] <= 0.150
    # and one more user misses them (the search's bracket says so)
    above = [p for p in serve["slo"]["points"] if p["x"] == best + 1]
    assert above and not above[0]["meets_slo"]


@pytest.mark.parametrize(
    "args",
    [
        [*DEPLOY, "--ctx", "4k", "--tpot-ms", "1"],
        ["serve", *DEPLOY, *WORK, "--tpot-ms", "1"],
        ["serve", *DEPLOY, *WORK, "--tpot-ms", "1", "--json"],
        [
            "simulate",
            *DEPLOY,
            *WORK,
            "--concurrency",
            "8",
            "--search",
            "max-concurrency",
            "--tpot-ms",
            "1",
            "--requests",
            "200",
        ],
        [
            "simulate",
            *DEPLOY,
            *WORK,
            "--rate",
            "2",
            "--search",
            "max-rate",
            "--tpot-ms",
            "1",
            "--requests",
            "200",
        ],
        ["layout", *DEPLOY, "--ctx", "4k", "--budget-devices", "1", "--tpot-ms", "1"],
    ],
    ids=["plan", "serve", "serve-json", "simulate-users", "simulate-rate", "layout"],
)
def test_no_configuration_meeting_the_targets_exits_3_everywhere(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 3, result.output
    assert "kvplan: error: " in result.output


def test_readme_tpot_50_example_does_not_silently_run_and_exit_0() -> None:
    """README: `kvplan serve -m qwen3-27b --dtype fp8 --input-tokens 256 --output-tokens 128 --tpot-ms 50
    --ttft-ms 1000` found nothing, ran 425 users and exited 0. Now: the users found meet the targets in the
    simulation, or the command exits 3 saying none does."""
    result = runner.invoke(
        app, ["serve", "-m", "qwen3-27b", "--dtype", "fp8", *WORK, "--tpot-ms", "50", "--ttft-ms", "1000"]
    )
    if result.exit_code == 3:
        assert "no number of users meets" in result.output
        return
    assert result.exit_code == 0, result.output
    headline = result.output.splitlines()[0]
    assert headline.startswith("SLO search (simulated closed loop") and "users meet" in headline


PLAN_CTX = ["--ctx", "384"]  # the plan's context = serve's 256 + 128 tokens: the same deployment


def test_plan_layout_and_dashboard_take_serves_answer() -> None:
    """Same targets, same default workload (256 in / 128 out, waves): the plan's batch, the layout table's
    batch and the dashboard's SLO batch are serve's users (memory holds more at ctx 384: it does not cap)."""
    from dashboard import sections
    from planner.inputs import PlanRequest

    served = runner.invoke(app, ["serve", *DEPLOY, *SLO, "--json"])  # serve's default lengths: the workload's
    assert served.exit_code == 0, served.output
    users = json.loads(served.stdout)["slo"]["best"]
    planned = runner.invoke(app, [*DEPLOY, *PLAN_CTX, *SLO, "--json"])
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)
    assert plan["slo"]["users"] == users and plan["slo"]["batch"] == users
    assert (plan["slo"]["input_tokens"], plan["slo"]["output_tokens"]) == (256, 128)
    assert plan["recommendation"]["max_batch_size"] == users
    assert plan["recommendation"]["binding_constraint"].startswith("slo:")
    laid = runner.invoke(app, ["layout", *DEPLOY, *PLAN_CTX, "--budget-devices", "1", *SLO, "--json"])
    assert laid.exit_code == 0, laid.output
    assert [c["max_batch_size"] for c in json.loads(laid.stdout)["candidates"]] == [users]
    request = PlanRequest(model="qwen3-27b", card="ascend-950pr", dtype="fp8", ctx="384", memory_gib=64)
    shown = sections.cached_slo(request, 150.0, 1000.0, None)
    assert shown is not None and shown.batch == users


def test_dashboard_reports_no_answer_where_the_cli_exits_3() -> None:
    from dashboard import sections
    from planner.inputs import PlanRequest

    request = PlanRequest(model="qwen3-27b", card="ascend-950pr", dtype="fp8", ctx="4k", memory_gib=64)
    assert sections.cached_slo(request, 1.0, 1000.0, None) is None
    assert runner.invoke(app, [*DEPLOY, "--ctx", "4k", "--tpot-ms", "1"]).exit_code == 3


def test_plan_without_targets_does_not_load_the_simulator() -> None:
    """The mission command's start-up: no SLO, no simulator import (a subprocess: a clean sys.modules)."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom planner.cli import app\n"
        "r = CliRunner().invoke(app, ['-m', 'qwen3-27b', '--dtype', 'fp8'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m.startswith('planner.sim')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_every_ttft_names_its_prompt_and_the_default_workload_agrees() -> None:
    """The plan's TTFT is for the default workload's prompt (not the full context, which MindIE's config
    rejects: maxInputTokenLen < ctx) and says so; the knee and serve use the same 256 / 128 tokens."""
    planned = runner.invoke(app, [*DEPLOY, "--ctx", "32k", "--json"])
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)
    assert plan["performance"]["ttft_prompt_tokens"] == 256
    assert (plan["load_knee"]["input_tokens"], plan["load_knee"]["output_tokens"]) == (256, 128)
    text = runner.invoke(app, [*DEPLOY, "--ctx", "32k"]).output
    assert "for a 256-token prompt alone" in " ".join(text.split())
    served = runner.invoke(app, ["serve", *DEPLOY, "--concurrency", "4", "--json"])
    assert served.exit_code == 0, served.output
    workload = json.loads(served.stdout)
    assert (workload["estimate"]["input_tokens"], workload["estimate"]["output_tokens"]) == (256, 128)


def test_plan_says_when_its_batch_misses_the_tpot_target_at_full_context() -> None:
    """The search meets TPOT on its own workload (256 in / 128 out); the speed line decodes every sequence at
    the full --ctx. Where that TPOT is over the target the plan says so in a note (and in --json warnings),
    naming both lengths; where it is within, no such note."""
    base = ["-m", "qwen3-27b", "--dtype", "fp8", "--card", "ascend-950pr-64g", "--ttft-ms", "1000", "--json"]
    long_ctx = json.loads(runner.invoke(app, [*base, "--ctx", "32k", "--tpot-ms", "85"]).stdout)
    step_s = long_ctx["performance"]["decode_step_s"]
    assert step_s > 0.085 >= long_ctx["slo"]["tpot_s"]  # the search's tail meets it; full ctx does not
    note = [w for w in long_ctx["warnings"] if w.startswith("SLO: ")]
    assert len(note) == 1 and "256 in / 128 out" in note[0] and "32768 tokens" in note[0]
    roomy = json.loads(runner.invoke(app, [*base, "--ctx", "32k", "--tpot-ms", "400"]).stdout)
    assert roomy["performance"]["decode_step_s"] <= 0.4
    assert not [w for w in roomy["warnings"] if w.startswith("SLO: ")]


def test_a_tpot_only_target_stops_at_what_the_engine_runs_and_matches_the_plan() -> None:
    """Users past the engine's running cap only queue, so a TPOT-only target would count them for ever:
    serve's search stops at the cap (the plan's batch at the same ctx), says so, and agrees with the plan."""
    deploy = ["--model", "qwen3-8b", "--ctx", "4k", "--tpot-ms", "300"]
    served = runner.invoke(app, ["serve", *deploy, "--json"])
    assert served.exit_code == 0, served.output
    users = json.loads(served.stdout)["slo"]["best"]
    plan = json.loads(runner.invoke(app, [*deploy, "--json"]).stdout)
    assert users == plan["slo"]["users"] == plan["recommendation"]["max_batch_size"]
    text = " ".join(runner.invoke(app, ["serve", *deploy]).output.split())
    assert f"{users:.0f} users meet" in text and "more would only queue" in text


def test_a_closed_loop_runs_every_user_it_is_given_and_is_never_overloaded() -> None:
    """--concurrency K with fewer --requests than K still sends one request per user (K in all), and a
    closed loop's bounded queue never reads as 'OVERLOADED ... lower --rate'."""
    result = runner.invoke(
        app, ["simulate", "--model", "qwen3-8b", "--concurrency", "3000", "--requests", "1000", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    found = summary.get("summary", summary)
    assert found["requests"] == 3000 and found["overloaded"] is False


@pytest.mark.parametrize(
    "deploy",
    [
        ["--model", "qwen3.5-27b", "--dtype", "fp8", "--ctx", "32k"],
        ["--model", "llama-3.1-70b", "--card", "ascend-910b3", "--tp", "8", "--ctx", "32k"],
        ["--model", "deepseek-v3", "--card", "ascend-910c", "--dtype", "int8", "--tp", "16", "--ctx", "16k"],
    ],
)
def test_simulate_caps_its_batch_where_the_plan_does(deploy: list[str]) -> None:
    """simulate's default running cap is the plan's max_batch_size at the same --ctx: its deployment takes
    the plan's prefill budget (MindIE's max(8192, ctx - ctx/4)), so the memory plan and the cap agree."""
    plan = json.loads(runner.invoke(app, [*deploy, "--json"]).stdout)
    load = ["--concurrency", "60", "--requests", "120", "--json"]
    simulated = runner.invoke(app, ["simulate", *deploy, *load])
    assert simulated.exit_code == 0, simulated.output
    scheduler = json.loads(simulated.stdout)["scheduler"]
    assert scheduler["max_batch"] == plan["recommendation"]["max_batch_size"]


def test_vllms_search_runs_up_to_its_own_running_cap_and_simulate_stops_there_too() -> None:
    """vLLM allocates blocks as tokens arrive, so more short requests run at once than the full-length
    batch: serve's search stops at max_num_seqs (256 here), not at the 32k memory batch; simulate's
    max-concurrency search stops at the same running limit instead of counting queued users."""
    vllm = ["-m", "qwen3-8b", "--engine", "vllm", "--ctx", "32k"]
    served = runner.invoke(app, ["serve", *vllm, "--tpot-ms", "300", "--json"])
    assert served.exit_code == 0, served.output
    plan = json.loads(runner.invoke(app, [*vllm, "--json"]).stdout)
    assert json.loads(served.stdout)["slo"]["best"] == 256 > plan["recommendation"]["max_batch_size"]
    searched = runner.invoke(
        app,
        ["simulate", "-m", "qwen3-8b", "--search", "max-concurrency", "--concurrency", "64", "--input-tokens",
         "256", "--output-tokens", "128", "--tpot-ms", "300", "--json"],
    )  # fmt: skip
    assert searched.exit_code == 0, searched.output
    served_cap = json.loads(runner.invoke(app, ["serve", "-m", "qwen3-8b", "--json"]).stdout)["admission"]
    assert json.loads(searched.stdout)["best"] <= served_cap["engine_cap"]


def test_the_plans_block_size_is_the_engines_in_text_and_json() -> None:
    """vLLM sets a hybrid model's block to hold one state page (1536 tokens for Qwen3.5-27B): the text's
    'block size' and the JSON's engine_block_size_tokens both say so; MindIE keeps --block-size."""
    for engine, block in (("vllm", 1536), ("mindie", 128)):
        flags = ["-m", "qwen3.5-27b", "--dtype", "fp8", "--ctx", "32k", "--engine", engine]
        assert json.loads(runner.invoke(app, [*flags, "--json"]).stdout)["engine_block_size_tokens"] == block
        assert f"block size {block})" in " ".join(runner.invoke(app, flags).output.split())
