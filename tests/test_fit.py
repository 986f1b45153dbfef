"""planner.fit.solver on synthetic rows with a known answer, its refusals and warnings (pure: no torch)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import catalog, inputs
from planner.errors import DataFileError, PlanInputError
from planner.fit import features, solver, step_rows
from planner.importers.benchdeployment import deployment_for
from planner.importers.benchpoints import BenchPoint
from planner.perf import fitted, fitted_params, roofline
from planner.perf.roofline import decode_step_s
from planner.serving import closed_loop

TRUE = {
    "weight_read_bandwidth_fraction": 0.71,
    "kv_read_bandwidth_fraction": 0.52,
    "kernel_overhead_us": 9.0,
    "step_overhead_us": 150.0,
    "sequence_overhead_us": 40.0,
}

# The measured H200 coefficients without their tables: decode attention then reads the KV cache at
# kv_read_bandwidth_fraction and every small kernel costs kernel_overhead_us, the parameters fitted here.
BASE = (
    catalog.load_card("nvidia-h200")
    .coefficients()
    .model_copy(update={"attention_table": None, "kernel_overhead_table": None, "attention_kernels": None})
)


def _synthetic(models: tuple[str, ...], truth: dict[str, float]) -> list[BenchPoint]:
    hw = catalog.load_card("nvidia-h200")
    true_hw = step_rows.with_coefficients(hw, BASE.model_copy(update=truth))
    points = []
    for model in models:
        for batch in (1, 8, 32, 128):
            for ctx in (512, 2048, 8192):
                p = BenchPoint(model, "nvidia-h200", "bf16", "bf16", 1, batch, ctx, 1.0, f"synthetic:{model}")
                step = decode_step_s(
                    deployment_for(p, hardware=true_hw, calibrated=False), batch=batch, ctx_tokens=ctx
                )
                points.append(BenchPoint(model, "nvidia-h200", "bf16", "bf16", 1, batch, ctx, step, p.where))
    return points


def test_two_models_pin_every_decode_term() -> None:
    """Noiseless rows from the same roofline: every term lands within its reported uncertainty of the truth
    (the prior pulls a little where two terms trade off), and the rows are reproduced."""
    result = solver.fit_coefficients(_synthetic(("qwen3-8b", "qwen3-32b"), TRUE), base=BASE)
    assert result.converged
    got = result.coefficients.model_dump()
    for name, value in TRUE.items():
        sigma = result.sigma_log[fitted_params.PARAM_NAMES.index(name)]
        assert abs(np.log(got[name] / value)) <= 3 * sigma, (name, got[name], sigma)
    assert result.mape_fraction < 0.01
    decided = dict(zip(fitted_params.PARAM_NAMES, result.decided_by_data, strict=True))
    assert decided["weight_read_bandwidth_fraction"] and decided["sequence_overhead_us"]
    assert not decided["state_read_bandwidth_fraction"]  # dense models have no GDN state: prior holds it


def test_one_model_suffices_and_reports_what_the_prior_held() -> None:
    """One model's rows, the truth within the prior's width of the microbenchmark values (as on the H200:
    docs/accuracy.md): the fit predicts another model of the family, and a term the rows cannot touch keeps
    its prior uncertainty. (With a truth several sigma from the prior, one model cannot tell weight streaming
    from fixed costs and the transfer degrades: that is what the prior is for.)"""
    near = {
        "weight_read_bandwidth_fraction": 0.85,  # profile 0.918
        "kv_read_bandwidth_fraction": 0.5,  # 0.569
        "kernel_overhead_us": 2.2,  # 1.48
        "step_overhead_us": 25.0,  # 16.5
        "sequence_overhead_us": 20.0,  # not in the profile
    }
    result = solver.fit_coefficients(_synthetic(("qwen3-8b",), near), base=BASE)
    held_out = _synthetic(("qwen3-32b",), near)
    errors = solver.prediction_errors(held_out, coefficients=result.coefficients)
    assert np.mean(np.abs(errors)) < 0.02
    assert all(s > 0 for s in result.sigma_log)
    state = fitted_params.PARAM_NAMES.index("state_read_bandwidth_fraction")
    assert result.sigma_log[state] == pytest.approx(fitted_params.PRIOR_SIGMA_UNKNOWN, rel=1e-6)


def test_bounds_hold_and_are_reported() -> None:
    """Steps 100x slower than any physical card: the values stay in their boxes and the fit says so."""
    points = [
        BenchPoint(
            p.model, p.card, p.dtype, p.kv_dtype, p.tp, p.batch, p.ctx_tokens, p.decode_step_s * 100, p.where
        )
        for p in _synthetic(("qwen3-8b", "llama-3.1-8b"), TRUE)
    ]
    result = solver.fit_coefficients(points)
    values = result.coefficients.model_dump()
    for param in fitted_params.FIT_PARAMS:
        if param.name != "compute_scale":
            assert param.lower * (1 - 1e-9) <= values[param.name] <= param.upper * (1 + 1e-9)
    assert np.all(np.isfinite(result.residual_fractions))
    assert any("bound" in w for w in result.warnings)


def test_garbage_fails_with_one_line() -> None:
    (one,) = _synthetic(("qwen3-8b",), TRUE)[:1]
    with pytest.raises(
        PlanInputError, match=r"^--from-bench x\.csv: a fit needs at least 2 measured rows \(got 1\)"
    ):
        solver.fit_coefficients([one], source="--from-bench x.csv")
    slow = BenchPoint(
        one.model, one.card, one.dtype, one.kv_dtype, one.tp, one.batch, one.ctx_tokens, 2.0, "f:3"
    )
    with pytest.raises(DataFileError, match=r"^f:3: contradicts synthetic:qwen3-8b: .*expected within 1.5x"):
        solver.fit_coefficients([one, slow])


def test_range_warnings_name_the_extrapolated_axis() -> None:
    fit_range = [1.0, 32.0, 384.0, 384.0]
    assert fitted.range_warnings(fit_range, batch=16, ctx_tokens=512) == []
    (line,) = fitted.range_warnings(fit_range, batch=16, ctx_tokens=32768)
    assert line.startswith("ctx 32768 is outside the fitted range 384-384")


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_cached_features_equal_the_roofline(seed: int) -> None:
    """The fit's inner loop (fit_features) is the roofline, cached: equal at random coefficients."""
    rng = np.random.default_rng(seed)
    cases = [
        ("qwen3.5-27b", "ascend-950pr", "fp8", "mindie", 1),
        ("qwen3-30b-a3b", "nvidia-h200", "bf16", "vllm", 2),
        ("qwen3-32b", "ascend-910b3", "int8", "vllm", 4),
        ("qwen3.5-27b", "ascend-910c", "int8", "vllm", 2),  # measured chunked-GDN prefill; MTP draft passes
    ]
    model, card, dtype, engine, tp = cases[seed % len(cases)]
    mtp = 3 if card == "ascend-910c" else 0
    request = inputs.PlanRequest(
        model=model, card=card, dtype=dtype, ctx="8192", engine=engine, tp=tp, mtp=mtp
    )
    dep = inputs.to_deployment(request)
    lower, upper = fitted_params.LOWER, fitted_params.UPPER
    log_values = lower + (upper - lower) * rng.random(len(lower))
    coefficients = fitted_params.coefficients_at(dep.hardware.coefficients(), log_values)
    exact = step_rows.at_coefficients(dep, coefficients)
    timer = features.FeatureTimer(dep, coefficients)
    for batch, ctx in ((1, 512), (48, 8192)):
        assert timer.decode_step_s(batch=batch, ctx_tokens=ctx) == pytest.approx(
            roofline.decode_step_s(exact, batch=batch, ctx_tokens=ctx), rel=1e-9
        )
    for prompts, tokens in ((1, 20_000), (6, 1000)):
        assert timer.prefill_s(prompts=prompts, prompt_tokens=tokens) == pytest.approx(
            closed_loop.batched_prefill_s(exact, prompts=prompts, prompt_tokens=tokens), rel=1e-9
        )


def test_primed_timer_times_every_seen_pass_as_one_by_one() -> None:
    """FeatureTimer.prime times all passes seen so far in one stacked call: the same seconds as timing each
    pass alone under the new coefficients."""
    request = inputs.PlanRequest(model="qwen3.5-27b", card="ascend-950pr", dtype="fp8", ctx="8192")
    dep = inputs.to_deployment(request)
    base = dep.hardware.coefficients()
    timer = features.FeatureTimer(dep, base)
    calls = [("decode", 1, 384), ("decode", 32, 384), ("prefill", 1, 256), ("prefill", 3, 256)]
    for kind, n, tokens in calls:
        if kind == "decode":
            timer.decode_step_s(batch=n, ctx_tokens=tokens)
        else:
            timer.prefill_s(prompts=n, prompt_tokens=tokens)
    other = base.model_copy(update={"weight_read_bandwidth_fraction": 0.3, "prefill_pass_overhead_us": 2e5})
    timer.prime(other)
    fresh = features.FeatureTimer(dep, other)
    for kind, n, tokens in calls:
        if kind == "decode":
            got, want = (
                timer.decode_step_s(batch=n, ctx_tokens=tokens),
                fresh.decode_step_s(batch=n, ctx_tokens=tokens),
            )
        else:
            got, want = (
                timer.prefill_s(prompts=n, prompt_tokens=tokens),
                fresh.prefill_s(prompts=n, prompt_tokens=tokens),
            )
        assert got == pytest.approx(want, rel=1e-12)
    assert timer.timed_for is other and len(timer.timed) == len(calls)


def test_a_stated_compute_fraction_width_narrows_only_the_compute_scale_prior() -> None:
    """A profile whose compute fractions a prefill measurement confirmed (compute_fraction_prior_factor)
    pulls the fitted compute scale toward 1 at that width; every other term keeps its width, and a profile
    without the factor keeps the assumed x/4 (or the measured x/1.25, whichever is narrower)."""
    base = catalog.load_card("ascend-910c").default_coefficients
    assert base.compute_fraction_prior_factor is not None
    index = fitted_params.PARAM_NAMES.index("compute_scale")
    centre, sigma = fitted_params.prior(base, measured=False)
    plain_centre, plain_sigma = fitted_params.prior(
        base.model_copy(update={"compute_fraction_prior_factor": None}), measured=False
    )
    assert sigma[index] == pytest.approx(np.log(base.compute_fraction_prior_factor))
    assert plain_sigma[index] == pytest.approx(fitted_params.PRIOR_SIGMA_ASSUMED)
    others = [i for i in range(len(sigma)) if i != index]
    np.testing.assert_allclose(sigma[others], plain_sigma[others])
    np.testing.assert_allclose(centre, plain_centre)
    wide = base.model_copy(update={"compute_fraction_prior_factor": 4.0})  # the widest allowed
    sigma = fitted_params.prior(wide, measured=True)[1][index]
    assert sigma == pytest.approx(fitted_params.PRIOR_SIGMA_MEASURED)


def test_the_rows_engine_sets_the_per_request_prior() -> None:
    """request_overhead_us's prior centre is the rows' engine's (registry.request_overhead_prior_us): step
    rows say nothing about it, so the fit returns that centre; rows of two engines with different centres fall
    back to the generic floor, and a profile's own value wins over any floor."""
    import dataclasses

    from planner.engines import registry

    vllm, mindie = (registry.room(e).REQUEST_OVERHEAD_PRIOR_US for e in ("vllm", "mindie"))
    assert vllm != mindie
    assert registry.request_overhead_prior_us({"vllm"}) == vllm
    assert registry.request_overhead_prior_us({"vllm", "mindie"}) is None
    index = fitted_params.PARAM_NAMES.index("request_overhead_us")
    rows = [p for p in _synthetic(("qwen3-8b",), TRUE) if p.ctx_tokens == 2048]
    for engine, expected in (("vllm", vllm), ("mindie", mindie)):
        result = solver.fit_coefficients(
            [dataclasses.replace(p, engine=engine) for p in rows],
            base=BASE.model_copy(update={"request_overhead_us": 0.0}),
        )
        assert not result.decided_by_data[index]
        assert np.exp(result.log_values[index]) == pytest.approx(expected, rel=1e-3)
    held = BASE.model_copy(update={"request_overhead_us": 42_000.0})
    centre, _ = fitted_params.prior(held, measured=False, floors={"request_overhead_us": vllm})
    assert np.exp(centre[index]) == pytest.approx(42_000.0)


def test_every_fit_box_lies_inside_what_a_profile_may_hold():
    """A fitted value at its box edge must still load: each box edge inside the schema field's own limits."""
    import annotated_types

    from planner.perf.fitted_params import FIT_PARAMS
    from planner.schema import PerfCoefficients

    fields = PerfCoefficients.model_fields
    checked = 0
    for param in FIT_PARAMS:
        if param.name not in fields:
            continue  # compute_scale multiplies fields; it is not one
        for limit in fields[param.name].metadata:
            if isinstance(limit, annotated_types.Le):
                assert param.upper <= limit.le, (param.name, param.upper, limit.le)
            if isinstance(limit, annotated_types.Ge):
                assert param.lower >= limit.ge, (param.name, param.lower, limit.ge)
        checked += 1
    assert checked == len(FIT_PARAMS) - 1
