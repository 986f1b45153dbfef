"""Serving-level bench rows: parsing, model/engine names, per-row prediction, validate and --from-bench."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from planner import catalog
from planner.errors import DataFileError
from planner.fit import serving_rows
from planner.importers.benchpoints import read_bench_rows
from planner.serving import closed_loop
from tests.helpers import kvplan, write_csv

HEADER = (
    "model,card,dtype,kv_dtype,tp,engine,concurrency,input_tokens,output_tokens,output_tokens_per_s,"
    "mtp,mtp_acceptance,ttft_s,tpot_s,dp,max_num_seqs\n"
)
QWEN8_VLLM = "qwen3-8b,ascend-910b3,bf16,bf16,1,vllm"  # the columns model..engine of most rows below
SEED = Path(__file__).resolve().parents[1] / "docs/examples/seed-950pr-serving.csv"


def _csv(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    return write_csv(tmp_path / "rows.csv", header, *rows)


def test_hf_names_engine_aliases_and_optional_columns(tmp_path: Path) -> None:
    steps, (first, second) = read_bench_rows(
        _csv(
            tmp_path,
            "Qwen/Qwen3-32B,ascend-910b3,int8,,4,vllm-ascend,72,3.5k,1500,1065.2,,,,,,",
            "qwen3.5-27b,ascend-910b3,int8,bf16,2,vllm,32,3500,1500,660,3,0.7,2.5,0.04,2,16",
        )
    )
    assert steps == []
    assert (first.engine, first.input_tokens, first.kv_dtype, first.mtp, first.dp) == ("vllm", 3584, "", 0, 1)
    assert (second.mtp, second.mtp_acceptance_fraction, second.dp, second.max_batch) == (3, 0.7, 2, 16)
    dep = serving_rows.serving_deployment(first)
    assert dep.model.id == "qwen3-32b"  # matched through the card's source.hf_repo
    assert dep.kv_dtype.value == "bf16"  # empty kv_dtype: the activation dtype


def test_prediction_is_dp_times_one_replica(tmp_path: Path) -> None:
    """dp = 2 replicas at 32 clients each behave as two rows of 32: same per-replica estimate, doubled."""
    rows = (f"{QWEN8_VLLM},{users},1024,256,1000,,,,,{dp}," for users, dp in ((64, 2), (32, 1)))
    _, (two, one) = read_bench_rows(_csv(tmp_path, *rows))
    e_two, e_one = serving_rows.serving_errors([two, one])
    assert 1 + e_two == pytest.approx(2 * (1 + e_one), rel=1e-12)


def test_max_num_seqs_caps_the_running_batch(tmp_path: Path) -> None:
    _, (row,) = read_bench_rows(_csv(tmp_path, f"{QWEN8_VLLM},64,1024,256,1000,,,,,,8"))
    (prepared,) = serving_rows.prepare([row])
    assert prepared.run.max_batch == 8
    est = serving_rows.estimate(prepared)
    alone = closed_loop.serving_estimate(
        prepared.deployment, input_tokens=1024, output_tokens=256, concurrency=8
    )
    assert est.output_tokens_per_s == pytest.approx(alone.output_tokens_per_s, rel=1e-12)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "qwen9-8b,ascend-910b3,bf16,,1,vllm,8,512,128,100,,,,,,",
            r"rows\.csv:2: unknown model card 'qwen9-8b'",
        ),
        ("Qwen/Qwen9-8B,ascend-910b3,bf16,,1,vllm,8,512,128,100,,,,,,", r"rows\.csv:2: unknown model card"),
        ("qwen3-8b,ascend-9999,bf16,,1,vllm,8,512,128,100,,,,,,", r"rows\.csv:2: unknown hardware profile"),
        (
            "qwen3-8b,ascend-910b3,bf16,,1,sglang2,8,512,128,100,,,,,,",
            r"rows\.csv:2: column engine: unknown",
        ),
        ("qwen3-8b,ascend-910b3,bf16,,1,vllm,0,512,128,100,,,,,,", r"rows\.csv:2: column concurrency"),
        (
            "qwen3-8b,ascend-910b3,bf16,,1,vllm,8,512,128,100,,1.5,,,,",
            r"rows\.csv:2: column mtp_acceptance",
        ),
    ],
)
def test_bad_rows_get_one_line_naming_the_row(tmp_path: Path, body: str, message: str) -> None:
    path = _csv(tmp_path, body)
    with pytest.raises(DataFileError, match=message):
        _, rows = read_bench_rows(path)
        serving_rows.serving_errors(rows)
    result = kvplan("validate", path, code=2)
    assert "rows.csv:2" in result.output and "Traceback" not in result.output


def test_validate_reports_both_kinds(tmp_path: Path) -> None:
    header = HEADER.rstrip("\n") + ",batch,ctx,decode_step_s\n"
    path = _csv(
        tmp_path, f"{QWEN8_VLLM},8,512,128,100,,,,,,,,,", f"{QWEN8_VLLM},,,,,,,,,,,8,1k,0.03", header=header
    )
    steps, rows = read_bench_rows(path)
    assert (len(steps), len(rows)) == (1, 1)
    fitted = catalog.resolve_card("ascend-910b3", engine="vllm")  # as the plan resolves it: the shipped fit
    (error,) = serving_rows.serving_errors(rows, hardware=fitted)
    result = kvplan("validate", path)
    assert f"serving MAPE {abs(error) * 100:.1f} %" in result.output
    assert "decode step, predicted vs measured" in result.output


def test_from_bench_fits_serving_rows(tmp_path: Path) -> None:
    """The seed's 950PR serving rows: the datasheet model is >2x optimistic; a fit brings every row closer."""
    before = serving_rows.serving_errors(read_bench_rows(SEED)[1])
    out = tmp_path / "seed.yaml"
    kvplan("calibrate --card ascend-950pr --from-bench", SEED, "--out", out)
    after = serving_rows.serving_errors(read_bench_rows(SEED)[1], hardware=_card(out))
    assert max(abs(e) for e in after) < min(abs(e) for e in before)
    assert yaml.safe_load(out.read_text())["measured"]["samples"]["measured_output_tokens_per_s"][0] == 15.8


def _card(path: Path):  # type: ignore[no-untyped-def]
    from planner import catalog

    return catalog.resolve_card(str(path))


def test_rows_of_different_engine_versions_are_not_contradictory(tmp_path: Path) -> None:
    """The same CI case measured at two vllm-ascend commits 1.6x apart: two set-ups, not a contradiction;
    without the version they are refused, naming both rows."""
    from planner.fit import solver

    header = HEADER.rstrip("\n") + ",engine_version\n"
    v1, v2 = f"{QWEN8_VLLM},8,512,128,100,,,,,,,v1", f"{QWEN8_VLLM},8,512,128,160,,,,,,,v2"
    _, rows = read_bench_rows(_csv(tmp_path, v1, v2, header=header))
    assert len(solver.fit_coefficients([], serving=rows).residual_fractions) == 2
    _, same = read_bench_rows(_csv(tmp_path, v1, v2.replace(",v2", ",v1"), header=header))
    with pytest.raises(DataFileError, match=r"rows\.csv:3: contradicts .*rows\.csv:2"):
        solver.fit_coefficients([], serving=same)


def test_ep_column_splits_the_experts_per_rank(tmp_path: Path) -> None:
    """Qwen3-235B-A22B BF16 at tp 8 (the vllm-ascend A2 nightly: tp 8 x dp 2, ep 16): alone on 8 dies of 64 GB
    it does not fit; over dp 2 the experts split 16 ways, tensor-parallel (ep empty) or 8 whole experts a rank
    (ep 16), as planner/layout.py models vLLM."""
    from planner import layout

    header = HEADER.rstrip("\n") + ",ep\n"
    body = "Qwen/Qwen3-235B-A22B,ascend-910b3,bf16,bf16,8,vllm,256,3500,1500,1152,,,,,{dp},128,{ep}"
    _, (alone,) = read_bench_rows(_csv(tmp_path, body.format(dp="", ep=""), header=header))
    assert (alone.dp, alone.ep) == (1, 1)  # optional columns: empty means 1
    with pytest.raises(DataFileError, match=r"rows\.csv:2: .*does not fit"):
        serving_rows.prepare([alone])
    prepared = {}
    for ep in ("", "16"):
        _, (row,) = read_bench_rows(_csv(tmp_path, body.format(dp="2", ep=ep), header=header))
        (prepared[ep],) = serving_rows.prepare([row])
    tensor, expert = prepared[""].deployment, prepared["16"].deployment
    experts = tensor.model.routed_expert_count
    assert (layout.moe_tp(tensor), layout.experts_per_rank(tensor)) == (16, experts)
    assert (layout.moe_tp(expert), layout.experts_per_rank(expert)) == (1, experts // 16)
    assert prepared["16"].clients == 128  # 256 clients over 2 DP groups
    errors = serving_rows.serving_residuals(list(prepared.values()))
    assert errors[0] != errors[1]  # the layouts time differently (all-gather vs expert dispatch)


def test_ep_on_a_dense_model_is_one_line_naming_the_row(tmp_path: Path) -> None:
    header = HEADER.rstrip("\n") + ",ep\n"
    path = _csv(tmp_path, f"{QWEN8_VLLM},8,512,128,100,,,,,2,,2", header=header)
    with pytest.raises(DataFileError, match=r"rows\.csv:2: --ep: qwen3-8b is a dense model"):
        serving_rows.serving_errors(read_bench_rows(path)[1])
    result = kvplan("validate", path, code=2)
    assert "rows.csv:2" in result.output and "Traceback" not in result.output


def test_arrivals_column(tmp_path: Path) -> None:
    """arrivals: waves when absent or empty; random / staggered run the row that way; else one clear line."""
    header = HEADER.rstrip("\n") + ",arrivals\n"
    body = "qwen3-8b,ascend-910b3,bf16,,1,vllm,8,512,128,100,,,,,,,{}\n"
    rows = [
        read_bench_rows(_csv(tmp_path, body.format(mode), header=header))[1][0] for mode in ("", "random")
    ]
    assert [r.arrivals for r in rows] == ["waves", "random"]
    runs = [serving_rows.prepare([r])[0].run.arrivals for r in rows]
    assert runs == ["waves", "random"]
    with pytest.raises(DataFileError, match=r"rows.csv:2: column arrivals: unknown mode \(got 'poisson'"):
        read_bench_rows(_csv(tmp_path, body.format("poisson"), header=header))


def test_fit_reproduces_rows_made_with_a_prefill_pass_cost_and_extrapolates_concurrency() -> None:
    """Rows made by the model itself (950PR, Qwen3.5-27B FP8, random arrivals, a 60 ms per-pass prefill
    cost, inside the 100 ms box): fitted on concurrency 1, 8 and 32 with TTFT and TPOT, every observation
    comes back within 5 % (worst 3.5 %) and concurrency 128 (where several prompts share a pass) within
    10 %. Three rows no longer pin the per-pass cost itself: the per-request term (TTFT only) and the
    state-read rate explain the same TTFT and TPOT (measured here: ~1 ms per pass + ~45 ms per request, -9 %
    at 128)."""
    import dataclasses

    from planner import catalog
    from planner.fit import solver
    from planner.importers.benchpoints import ServingPoint

    hw = catalog.load_card("ascend-950pr")
    truth = hw.coefficients().model_copy(update={"prefill_pass_overhead_us": 60_000.0})
    template = ServingPoint(
        "qwen3-27b", "ascend-950pr", "fp8", "", 1, "mindie", 1, 256, 128, 1.0, "synthetic", arrivals="random"
    )
    rows = []
    for concurrency in (1, 8, 32, 128):
        point = dataclasses.replace(template, concurrency=concurrency, memory_gib=128.0)
        est = serving_rows.estimate(serving_rows.prepare([point], hardware=hw)[0], truth)
        rows.append(
            dataclasses.replace(
                point, output_tokens_per_s=est.output_tokens_per_s, ttft_s=est.ttft_s, tpot_s=est.tpot_s
            )
        )
    result = solver.fit_coefficients([], hardware=hw, serving=rows[:3])
    prepared = serving_rows.prepare(rows[:3], hardware=hw)
    observed = serving_rows.observation_residuals(prepared, result.coefficients)
    assert np.max(np.abs(observed)) < 0.05
    (error,) = serving_rows.serving_errors(rows[3:], hardware=hw, coefficients=result.coefficients)
    assert abs(error) < 0.10


@pytest.mark.parametrize("engine", ["mindie", "vllm"])
def test_a_rows_prefill_budget_is_the_one_serve_plans_with(tmp_path: Path, engine: str) -> None:
    """MindIE raises maxPrefillTokens to maxInputTokenLen (inputs.prefill_budget): a serving row's deployment
    and `kvplan serve` of the same row (predict.py's command, --max-prefill-tokens 8192) agree; vLLM keeps
    the budget as given."""
    from planner.inputs import PlanRequest, to_deployment

    row = f"qwen3-8b,ascend-910b3,bf16,bf16,1,{engine},4,32000,100,40,,,,,,"
    _, (point,) = read_bench_rows(_csv(tmp_path, row))
    fit_dep = serving_rows.serving_deployment(point)
    deployment = {"model": "qwen3-8b", "card": "ascend-910b3", "dtype": "bf16", "engine": engine}
    request = PlanRequest(**deployment, ctx="32100", max_prefill_tokens=8192)
    served = to_deployment(request, prompt_tokens=32000)  # as `kvplan serve` builds it
    assert fit_dep.max_prefill_tokens == served.max_prefill_tokens
    # MindIE: maxPrefillTokens >= maxInputTokenLen >= the 32000-token prompt; vLLM chunks at 8192
    assert fit_dep.max_prefill_tokens == (32000 if engine == "mindie" else 8192)


def test_validate_predicts_what_the_plan_prints() -> None:
    """The seed's decode steps (MindIE on a 950PR): validate, with or without --card, predicts batch 1 with
    the profile the plan resolves for the engine (its shipped fit), so both print the same step;
    --uncalibrated keeps the datasheet."""
    seed = SEED.parent / "seed-950pr-qwen3-27b.csv"
    plan = json.loads(kvplan("-m qwen3-27b --dtype fp8 --batch 1 --ctx 384 --json").stdout)
    step_ms = plan["performance"]["decode_step_s"] * 1000
    for extra in ((), ("--card", "ascend-950pr")):
        rows = json.loads(kvplan("validate", seed, *extra, "--json").stdout)["decode_steps"]
        assert rows[0]["predicted_decode_step_s"] * 1000 == pytest.approx(step_ms, rel=1e-9)
    datasheet = json.loads(kvplan("validate", seed, "--uncalibrated", "--json").stdout)["decode_steps"]
    assert datasheet[0]["predicted_decode_step_s"] * 1000 < 0.6 * step_ms


def test_fit_residuals_are_the_fitted_profiles_own_errors(tmp_path: Path) -> None:
    """FitResult.residual_fractions is pred / measured - 1 under the fitted coefficients (what the table's
    'predicted' column multiplies out), never the solver's log ratio: a fit far off its rows (a TPOT typed
    in ms) printed -27.9 tok/s predicted (-116 %) where the profile predicts a positive rate."""
    from planner.fit import solver

    header = HEADER.rstrip("\n") + ",memory_gib\n"
    seed = "Qwen/Qwen3.5-27B,ascend-950pr,fp8,,1,mindie"
    rows = [f"{seed},16,256,128,170.7,,,,,1,,64", f"{seed},1,256,128,15.8,,,0.41,63,1,,64"]
    rows += [f"{seed},8,256,128,90,,,,0.0909,1,,64", f"{seed},32,256,128,220,,,,0.1429,1,,64"]
    _, points = read_bench_rows(_csv(tmp_path, *rows, header=header))
    hw = catalog.resolve_card("ascend-950pr")
    result = solver.fit_coefficients([], hardware=hw, serving=points)
    direct = serving_rows.serving_errors(
        points, hardware=hw, coefficients=result.coefficients, calibrated=False
    )
    assert result.residual_fractions == pytest.approx(direct, rel=1e-6, abs=1e-9)
    assert min(result.residual_fractions) > -1.0 and max(abs(e) for e in direct) > 0.3  # far off, still > 0
