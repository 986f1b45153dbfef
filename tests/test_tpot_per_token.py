"""TPOT is per output token everywhere (plan, sweep, layout, dashboard, serve): with MTP the decode step
emits tokens_per_step tokens, so TPOT = step / tokens_per_step (planner/perf/mtp.py's tpot_s); a
one-token output has no TPOT at all (review items 1 and 7)."""

import json

import numpy as np
import pytest

from dashboard import view as dashboard_view
from planner.perf import mtp
from planner.plan import compose
from planner.serving import performance, sweep
from planner.serving.estimate import ServingEstimate
from tests.helpers import deployment_950pr, kvplan

MTP_PLAN = "-m qwen3-27b --dtype fp8 --ctx 32k --mtp 1"


def test_plan_json_keys_say_step_and_per_token() -> None:
    perf = json.loads(kvplan(f"{MTP_PLAN} --json").stdout)["performance"]
    assert perf["tokens_per_step"] > 1.5
    assert perf["tpot_s"] == pytest.approx(perf["decode_step_s"] / perf["tokens_per_step"], rel=1e-12)
    assert perf["per_user_tokens_per_s"] == pytest.approx(1.0 / perf["tpot_s"], rel=1e-12)
    band = perf["speed_range"]
    assert band["tpot_s_low"] <= perf["tpot_s"] <= band["tpot_s_high"]
    assert band["tpot_s_high"] < band["decode_step_s_high"]


def test_plan_text_prints_tpot_per_token_and_names_the_step() -> None:
    perf = json.loads(kvplan(f"{MTP_PLAN} --json").stdout)["performance"]
    text = " ".join(kvplan(MTP_PLAN).stdout.split())
    assert f"TPOT {perf['tpot_s'] * 1000:.1f} ms (range" in text
    assert f"decode step {perf['decode_step_s'] * 1000:.1f} ms at 1.7 tokens per step" in text
    assert f"TPOT {perf['decode_step_s'] * 1000:.1f} ms" not in text


def test_sweep_tpot_is_the_plans() -> None:
    plan = json.loads(kvplan(f"{MTP_PLAN} --json").stdout)["performance"]
    grid = json.loads(kvplan(f"sweep {MTP_PLAN} --batch 24 --format json").stdout)
    assert grid["tpot_s"][0][0][0] == pytest.approx(plan["tpot_s"], rel=1e-9)
    assert grid["decode_step_s"][0][0][0] == pytest.approx(plan["decode_step_s"], rel=1e-9)
    table = kvplan(f"sweep {MTP_PLAN} --batch 24").stdout
    cells = {cell.strip() for line in table.splitlines() for cell in line.split("│")}  # the TPOT ms column
    assert f"{plan['tpot_s'] * 1000:.1f}" in cells
    assert f"{plan['decode_step_s'] * 1000:.1f}" not in cells
    assert "decode step / 1.7 tokens per step" in " ".join(table.split())


def test_one_home_for_tpot() -> None:
    dep = deployment_950pr(mtp_tokens=1)
    perf = performance.performance(dep, batch=8, ctx_tokens=4096, prompt_tokens=256)
    per_step = mtp.tokens_per_step(dep)
    assert perf.tpot_s == mtp.tpot_s(perf.decode_step_s, tokens_per_step=per_step)
    assert dashboard_view.tpot_s(perf) == perf.tpot_s
    grid = sweep.sweep(dep, batch=[8], ctx_tokens=[4096])
    assert grid.tpot_s[0, 0, 0] == pytest.approx(perf.tpot_s, rel=1e-12)
    assert np.all(grid.tpot_s < grid.decode_step_s)
    band = compose.speed_range(dep, perf, batch=8)
    assert band.tpot_s_low * per_step == pytest.approx(band.decode_step_s_low, rel=1e-12)


def test_layout_candidates_report_both() -> None:
    out = json.loads(
        kvplan("layout -m qwen3-27b --dtype fp8 --ctx 32k --mtp 1 --budget-devices 1 --json").stdout
    )
    best = out["candidates"][0]
    assert best["tpot_s"] < best["decode_step_s"]
    assert best["tpot_s"] == pytest.approx(best["decode_step_s"] / 1.7, rel=0.05)


ONE_TOKEN = "-m qwen3-27b --dtype fp8 --input-tokens 256 --output-tokens 1"


def test_serve_says_tpot_is_undefined_for_one_token_outputs() -> None:
    text = " ".join(kvplan(f"serve {ONE_TOKEN} --concurrency 4").stdout.split())
    assert "TPOT undefined: every request generated one token" in text
    assert "analytic steady state" in text
    analytic = text.split("analytic steady state")[1].split("engine:")[0]
    assert "TPOT undefined (one-token outputs)" in analytic
    assert "tok/s per user" not in analytic and " ms (means" not in analytic.split("TTFT")[1].split(",")[1]
    payload = json.loads(kvplan(f"serve {ONE_TOKEN} --concurrency 4 --json").stdout)
    assert payload["estimate"]["tpot_s"] is None and payload["estimate"]["per_user_tokens_per_s"] is None
    assert payload["speed_range"]["tpot_s_low"] is None


def test_undefined_tpot_never_meets_a_tpot_target() -> None:
    run = kvplan(f"simulate {ONE_TOKEN} --search max-rate --rate 4 --tpot-ms 50", code=2)  # up front
    assert run.output.startswith("kvplan: error: --tpot-ms / --min-user-tps: a TPOT target needs requests")
    assert run.output.count("\n") == 1  # one line, no search run
    fixed = json.loads(kvplan(f"simulate {ONE_TOKEN} --rate 4 --requests 50 --tpot-ms 50 --json").stdout)
    assert fixed["goodput_requests_per_s"] == 0.0


def test_estimate_has_no_tpot_for_one_token() -> None:
    assert ServingEstimate.model_fields["tpot_s"].annotation == (float | None)


def test_slo_answers_at_a_context_with_one_token_outputs_are_printed() -> None:
    """--ctx 3 gives the default workload one output token: the plan's and layout's SLO search answer with
    TPOT undefined (was: a validation traceback), and JSON carries null."""
    plan = kvplan("-m qwen3-27b --ctx 3 --ttft-ms 5000")
    assert "TPOT undefined (one-token outputs)" in " ".join(plan.stdout.split())
    payload = json.loads(kvplan("-m qwen3-27b --ctx 3 --ttft-ms 5000 --json").stdout)
    assert payload["slo"]["tpot_s"] is None and payload["slo"]["ttft_s"] > 0
    layout = kvplan("layout -m qwen3-27b --ctx 3 --ttft-ms 5000 --budget-devices 2")
    assert "undefined" in layout.stdout and "(one-token" in layout.stdout  # a table cell, wrapped


def test_pd_search_never_prints_a_zero_tpot() -> None:
    # no split meets 100 ms: every P:D request pays the 332.6 ms per-request cost too (exit 3, none meets)
    run = kvplan(f"simulate {ONE_TOKEN} --rate 2 --requests 40 --search pd --ttft-ms 100", code=3)
    assert "TPOT 0.0 ms" not in run.output
    assert "TPOT undefined (one-token outputs) (misses the SLOs)" in " ".join(run.output.split())


@pytest.mark.parametrize(
    "words",
    [
        "-m qwen3-27b --dtype fp8 --ctx 4 --tpot-ms 100",
        "-m qwen3-27b --dtype fp8 --ctx 4 --min-user-tps 5",
        f"serve {ONE_TOKEN} --tpot-ms 100",
        f"simulate {ONE_TOKEN} --search max-concurrency --concurrency 8 --tpot-ms 100",
        f"simulate {ONE_TOKEN} --search pd --rate 2 --tpot-ms 100",
        "layout -m qwen3-27b --ctx 4 --tpot-ms 100 --budget-devices 2",
    ],
)
def test_a_tpot_target_over_one_token_outputs_is_an_input_error(words: str) -> None:
    """No load (and no device count) can meet a TPOT target when TPOT is undefined: exit 2 up front, one line
    naming the flags, not exit 3's "relax them or add devices"."""
    run = kvplan(words, code=2)
    assert run.output.startswith("kvplan: error: --tpot-ms / --min-user-tps: a TPOT target needs"), run.output


def test_load_knee_of_one_token_outputs_has_no_tpot() -> None:
    """--ctx 4 leaves the default workload one output token: the knee's TPOT is null, its E2E no shorter
    than its TTFT, and the text says undefined without a per-user figure beside it."""
    knee = json.loads(kvplan("-m qwen3-27b --dtype fp8 --ctx 4 --json").stdout)["load_knee"]
    assert knee["output_tokens"] == 1 and knee["tpot_p99_s"] is None
    assert knee["e2e_p99_s"] >= knee["ttft_p99_s"]
    text = " ".join(kvplan("-m qwen3-27b --dtype fp8 --ctx 4").stdout.split())
    assert "P99 TPOT undefined (one-token outputs), P99 TTFT" in text
