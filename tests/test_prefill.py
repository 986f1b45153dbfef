"""Measured prefill rates (planner/perf/prefill.py) and the run-5 profile tables behind them."""

from __future__ import annotations

from typing import get_args

import numpy as np
import pytest

from planner import catalog, inputs
from planner.deployment import Deployment
from planner.dtypes import StorageDType
from planner.kinds import ENGINES
from planner.perf import fitted_params, opcost, prefill, roofline
from planner.schema import GemmEfficiency, HardwareProfile, PrefillAttentionRate, PrefillLayerCost

GEMM = [
    GemmEfficiency(tokens=1024, weight_elements=1e6, fraction=0.2),
    GemmEfficiency(tokens=1024, weight_elements=1e8, fraction=0.6),
    GemmEfficiency(tokens=4096, weight_elements=1e6, fraction=0.4),
    GemmEfficiency(tokens=4096, weight_elements=1e8, fraction=0.8),
]
ATTN = [
    PrefillAttentionRate(q_heads=32, head_dim=128, tokens=1024, tflop_per_s=200.0),
    PrefillAttentionRate(q_heads=32, head_dim=128, tokens=4096, tflop_per_s=600.0),
    PrefillAttentionRate(q_heads=8, head_dim=256, tokens=1024, tflop_per_s=100.0),
    PrefillAttentionRate(q_heads=8, head_dim=256, tokens=4096, tflop_per_s=500.0),
]
LAYERS = [
    PrefillLayerCost(engine="transformers", kind="attention", elements_per_token=1000, tokens=1024, us=100.0),
    PrefillLayerCost(engine="transformers", kind="attention", elements_per_token=1000, tokens=4096, us=800.0),
    PrefillLayerCost(
        engine="transformers",
        kind="attention",
        elements_per_token=8000,
        tokens=1024,
        us=400.0,
        eager_us=900.0,
    ),
    PrefillLayerCost(
        engine="transformers", kind="attention", elements_per_token=2000, tokens=1024, us=90.0, eager_us=700.0
    ),
]
MODELS = ("qwen3-8b", "qwen3-32b", "qwen3.5-27b", "qwen3.5-0.8b", "qwen3-30b-a3b", "llama-3.1-8b")


def test_gemm_fraction_hits_table_points_and_interpolates_in_logs() -> None:
    assert float(prefill.gemm_fraction(GEMM, tokens=1024, weight_elements=1e8)) == pytest.approx(0.6)
    # log-midpoint of both axes: mean of the four corners
    mid = prefill.gemm_fraction(GEMM, tokens=2048, weight_elements=1e7)
    assert float(mid) == pytest.approx((0.2 + 0.6 + 0.4 + 0.8) / 4)


def test_gemm_fraction_clamps_outside_the_table() -> None:
    out = prefill.gemm_fraction(GEMM, tokens=np.array([1.0, 1e6]), weight_elements=1e12)
    assert out.tolist() == pytest.approx([0.6, 0.8])


def test_attention_rate_picks_nearest_heads_and_dim() -> None:
    rate = prefill.prefill_attention_flop_per_s(ATTN, q_heads=24, head_dim=256, tokens=2048)
    assert float(rate) == pytest.approx(300e12)  # log-midpoint of the 8/256 rows (only q_heads at dim 256)
    wide = prefill.prefill_attention_flop_per_s(ATTN, q_heads=64, head_dim=128, tokens=1e6)
    assert float(wide) == pytest.approx(600e12)  # clamped at the longest measured prompt


def test_layer_rest_reproduces_rows_scales_with_elements_and_clamps_per_token() -> None:
    at = np.array([1024.0, 4096.0])
    assert prefill.layer_rest_s(LAYERS, kind="attention", elements_per_token=1000, tokens=at).tolist() == (
        pytest.approx([100e-6, 800e-6])
    )
    # same nearest shape (1000): time grows in proportion to the layer's elements
    wider = prefill.layer_rest_s(LAYERS, kind="attention", elements_per_token=1200, tokens=at)
    assert wider.tolist() == pytest.approx([120e-6, 960e-6])
    # beyond the table: the per-token rate of the end row, never extrapolated
    far = prefill.layer_rest_s(
        LAYERS, kind="attention", elements_per_token=1000, tokens=np.array([64.0, 65536.0])
    )
    assert far.tolist() == pytest.approx([100e-6 / 16, 800e-6 * 16])
    none = prefill.layer_rest_s(LAYERS, kind="linear_attention", elements_per_token=1000, tokens=at)
    assert none.tolist() == [0.0, 0.0]


def h200_deployment(
    model_id: str, prompt: int, hw: HardwareProfile | None = None, **extra: object
) -> Deployment:
    card, alias = catalog.resolve_model(model_id)
    fields: dict[str, object] = {
        "model": card,
        "hardware": hw or catalog.load_card("nvidia-h200"),
        "weight_scheme_name": "bf16",
        "kv_dtype": StorageDType("bf16"),
        "tp": 1,
        "ctx_tokens": prompt,
        "batch": 1,
        "model_alias": alias,
        "engine": "transformers",
        "max_prefill_tokens": prompt,
    }
    return Deployment.model_validate({**fields, **extra})


def with_coefficients(hw: HardwareProfile, **update: object) -> HardwareProfile:
    assert hw.measured is not None
    coeff = hw.measured.coefficients.model_copy(update=update)
    return hw.model_copy(update={"measured": hw.measured.model_copy(update={"coefficients": coeff})})


def without_prefill_tables() -> HardwareProfile:
    return with_coefficients(
        catalog.load_card("nvidia-h200"),
        gemm_efficiency_table=None,
        prefill_attention_table=None,
        prefill_layer_table=None,
    )


def test_host_floor_is_the_fastest_measured_layer_and_only_with_eager_times() -> None:
    hw = with_coefficients(catalog.load_card("nvidia-h200"), prefill_layer_table=LAYERS)
    dep = h200_deployment("qwen3-8b", 1024, hw)
    geo = roofline.geometry(dep)
    floor = prefill.host_floor_s(dep, geo, tokens=np.array([1024.0]))
    assert floor is not None
    assert float(floor[0]) == pytest.approx(geo.layers["full"] * 700e-6)
    bare = with_coefficients(hw, prefill_layer_table=LAYERS[:2])  # no eager_us
    assert (
        prefill.host_floor_s(h200_deployment("qwen3-8b", 1024, bare), geo, tokens=np.array([1024.0])) is None
    )


@pytest.mark.parametrize("model_id", MODELS)
def test_ttft_is_finite_positive_and_grows_with_the_prompt(model_id: str) -> None:
    prompts = [256, 1024, 4096, 16384, 32768]
    times = [roofline.ttft_s(h200_deployment(model_id, p), prompt_tokens=p) for p in prompts]
    assert all(np.isfinite(t) and t > 0 for t in times)
    assert times == sorted(times)
    chunked = roofline.ttft_s(h200_deployment(model_id, 32768, max_prefill_tokens=8192), prompt_tokens=32768)
    assert np.isfinite(chunked) and chunked > 0


def test_shipped_profile_times_prefill_matmuls_with_the_gemm_table() -> None:
    dep = h200_deployment("qwen3-8b", 8192)
    coeff = dep.hardware.coefficients(calibrated=True)
    assert coeff.gemm_efficiency_table is not None
    ledger = roofline.prefill_ledger(dep, prompt_tokens=8192)
    gate_up = next(o for o in ledger.ops if o.name == "mlp.gate_up")
    fraction = prefill.gemm_fraction(coeff.gemm_efficiency_table, tokens=8192, weight_elements=4096 * 24576)
    assert gate_up.compute_s == pytest.approx(gate_up.flop / (989.4e12 * float(fraction)), rel=1e-9)
    assert gate_up.overhead_s == 0.0  # the layer table is there: launches hide under the measured kernels


def test_norms_and_gdn_terms_take_the_measured_layer_rest() -> None:
    dep = h200_deployment("qwen3.5-27b", 8192)
    coeff = dep.hardware.coefficients(calibrated=True)
    assert coeff.prefill_layer_table is not None
    geo = roofline.geometry(dep)
    ops = {o.name: o for o in roofline.prefill_ledger(dep, prompt_tokens=8192).ops}
    for name, (kind, key) in prefill.REMAINDER_TERMS.items():
        elements = prefill.layer_elements_per_token(geo, kind=kind)
        rest = prefill.layer_rest_s(
            coeff.prefill_layer_table, kind=kind, elements_per_token=elements, tokens=np.array([8192.0])
        )
        assert ops[name].compute_s == pytest.approx(geo.layers[key] * float(rest[0]), rel=1e-9)


def without_chunked_gdn(card_id: str) -> HardwareProfile:
    hw = catalog.load_card(card_id)
    coeff = hw.default_coefficients.model_copy(update={"chunked_gdn_ns_per_head_token": None})
    return hw.model_copy(update={"default_coefficients": coeff})


def test_profiles_without_tables_keep_the_roofline_prefill() -> None:
    for model_id in ("qwen3-32b", "qwen3.5-27b"):
        for hw in (without_prefill_tables(), without_chunked_gdn("ascend-910b3")):
            dep = h200_deployment(model_id, 4096, hw)
            step = roofline.prefill_step(dep, prompt_tokens=4096, cached_tokens=0)
            geo = roofline.geometry(dep)
            terms = opcost.step_terms(geo, step)
            assert prefill.measured_prefill_terms(dep, geo, terms, tokens=step.tokens) == terms
            assert prefill.host_floor_s(dep, geo, tokens=step.tokens) is None
            names = [o.name for o in roofline.prefill_ledger(dep, prompt_tokens=4096).ops]
            assert "host.wait" not in names


def test_layer_table_only_for_its_engine_and_dense_layers() -> None:
    for dep in (
        h200_deployment("qwen3-8b", 4096, engine="vllm"),
        h200_deployment("qwen3-30b-a3b", 4096),  # MoE: its routed layers were never measured
    ):
        coeff = dep.hardware.coefficients(calibrated=True)
        assert prefill.layer_table_for(dep, coeff, roofline.geometry(dep)) == []
        norms = next(o for o in roofline.prefill_ledger(dep, prompt_tokens=4096).ops if o.name == "norms")
        assert norms.overhead_s > 0  # the decode roofline's kernel overheads, not a measured time


def test_tables_change_prefill_only() -> None:
    dep = h200_deployment("qwen3-32b", 4096)
    bare = dep.model_copy(update={"hardware": without_prefill_tables()})
    assert roofline.ttft_s(dep, prompt_tokens=4096) != pytest.approx(
        roofline.ttft_s(bare, prompt_tokens=4096)
    )
    assert roofline.decode_step_s(dep, batch=64, ctx_tokens=4096) == roofline.decode_step_s(
        bare, batch=64, ctx_tokens=4096
    )


def test_layer_table_engines_are_the_planner_engines() -> None:
    assert get_args(PrefillLayerCost.model_fields["engine"].annotation) == ENGINES


@pytest.mark.lab
def test_run5_script_reproduces_the_shipped_tables() -> None:
    from lab.derive import prefill_tables_from_run5 as tables_script

    text, profile = tables_script.updated_profile()
    assert profile.measured is not None
    coeff = profile.measured.coefficients
    assert coeff.gemm_efficiency_table and coeff.prefill_attention_table and coeff.prefill_layer_table
    assert all(0 < row.fraction <= 1 for row in coeff.gemm_efficiency_table)
    assert {r.head_dim for r in coeff.prefill_attention_table} == {128, 256}
    assert {r.kind for r in coeff.prefill_layer_table} == {"attention", "linear_attention"}
    assert text == tables_script.PROFILE.read_text(encoding="utf-8")  # the shipped profile is reproducible


def gdn_prefill_s(hw: HardwareProfile, prompt: int) -> float:
    dep = h200_deployment("qwen3.5-27b", prompt, hw, engine="vllm", calibrated=False)
    ledger = roofline.prefill_ledger(dep, prompt_tokens=prompt)
    return next(o.time_s - o.overhead_s for o in ledger.ops if o.name == "gdn.update")


def test_chunked_gdn_rate_times_the_linear_layers_of_a_prefill() -> None:
    """With a measured chunked-GDN rate the gdn.update term takes T * heads/rank * L_lin * t; without it the
    decode roofline's FLOP at compute_fraction, far below it (the chunk kernels are not matmul-bound)."""
    hw = catalog.load_card("ascend-910b3")
    per_head_ns = hw.default_coefficients.chunked_gdn_ns_per_head_token
    assert per_head_ns is not None
    card = catalog.resolve_model("qwen3.5-27b")[0]
    prompt = 8192
    heads, layers = card.linear_num_value_heads or 0, card.linear_attention_layers
    expected_s = prompt * heads * layers * per_head_ns * 1e-9
    measured_s = gdn_prefill_s(hw, prompt)
    assert measured_s == pytest.approx(expected_s, rel=1e-9)
    assert gdn_prefill_s(without_chunked_gdn("ascend-910b3"), prompt) < measured_s / 5
    assert gdn_prefill_s(hw, 2 * prompt) == pytest.approx(2 * measured_s, rel=1e-9)  # linear in tokens


def test_chunked_gdn_rate_leaves_decode_and_models_without_linear_layers_alone() -> None:
    hw, bare = catalog.load_card("ascend-910b3"), without_chunked_gdn("ascend-910b3")
    for model_id in ("qwen3.5-27b", "qwen3-32b"):
        dep, dep_bare = (
            h200_deployment(model_id, 4096, h, engine="vllm", calibrated=False) for h in (hw, bare)
        )
        step = roofline.decode_step_s(dep, batch=8, ctx_tokens=4096)
        assert step == roofline.decode_step_s(dep_bare, batch=8, ctx_tokens=4096)
    dense = [h200_deployment("qwen3-32b", 4096, h, engine="vllm", calibrated=False) for h in (hw, bare)]
    assert roofline.ttft_s(dense[0], prompt_tokens=4096) == roofline.ttft_s(dense[1], prompt_tokens=4096)


def _910c_at(prefill_attention_fraction: float) -> Deployment:
    """Qwen3-32B bf16 TP8 on the 910C datasheet profile (bf16 compute_fraction 0.6, no fit, no tables)."""
    request = inputs.PlanRequest(model="qwen3-32b", card="ascend-910c", dtype="bf16", ctx="8192", tp=8)
    dep = inputs.to_deployment(request)
    coeff = catalog.load_card("ascend-910c").default_coefficients.model_copy(
        update={"prefill_attention_fraction": prefill_attention_fraction}
    )
    hw = dep.hardware.model_copy(update={"default_coefficients": coeff, "measured": None})
    return dep.model_copy(update={"hardware": hw, "calibrated": False})


def test_prefill_attention_runs_at_its_fraction_of_the_gemm_rate() -> None:
    """Hand-worked: a 4096-token prompt, Qwen3-32B (64 layers, 64 q heads, head_dim 128) at TP8: 8 heads per
    rank; causal attention FLOP = T * a * 4 * h * d * L = 4096 * 2048.5 * 4 * 8 * 128 * 64 = 2.19956e12
    (a = (T + 1) / 2 keys per query token on average, 4 = QK^T and PV, 2 FLOP each; the two 2048-token chunks
    sum to the same: 2048 * (1024.5 + 3072.5)). Rate = 376 TFLOP/s * 0.6 * f_attn: 9.7498 ms at f_attn 1,
    19.4996 ms at 0.5. Matmuls and decode do not move."""
    flop = 4096 * 2048.5 * 4 * 8 * 128 * 64
    assert flop == pytest.approx(2.19956e12, rel=1e-5)
    full, half = _910c_at(1.0), _910c_at(0.5)
    ops = {f: {o.name: o for o in roofline.prefill_ledger(d, prompt_tokens=4096).ops} for f, d in
           ((1.0, full), (0.5, half))}  # fmt: skip
    assert ops[1.0]["attn.core"].flop == pytest.approx(flop, rel=1e-12)
    assert ops[1.0]["attn.core"].compute_s == pytest.approx(flop / (376e12 * 0.6), rel=1e-9)  # 9.7498 ms
    assert ops[0.5]["attn.core"].compute_s == pytest.approx(flop / (376e12 * 0.6 * 0.5), rel=1e-9)
    assert ops[0.5]["attn.qkv_proj"].compute_s == pytest.approx(ops[1.0]["attn.qkv_proj"].compute_s)
    decode = [roofline.decode_step_s(d, batch=8, ctx_tokens=4096) for d in (full, half)]
    assert decode[0] == decode[1]


def test_prefill_attention_fraction_is_fitted_only_where_the_profile_opts_in() -> None:
    """prior(): centred at the profile's value (1 unless set); width log(prefill_attention_prior_factor) where
    stated (the 910C: x/ 2), else held (x/ 1.001), so other profiles' fits do not move."""
    base = catalog.load_card("ascend-910c").default_coefficients
    index = fitted_params.PARAM_NAMES.index("prefill_attention_fraction")
    centre, sigma = fitted_params.prior(base, measured=False)
    assert base.prefill_attention_prior_factor == 2
    assert (centre[index], sigma[index]) == pytest.approx((0.0, np.log(2.0)))
    held = base.model_copy(update={"prefill_attention_prior_factor": None})
    assert fitted_params.prior(held, measured=False)[1][index] == pytest.approx(
        fitted_params.PRIOR_SIGMA_HELD
    )
    at_one = np.zeros(len(fitted_params.FIT_PARAMS))
    assert fitted_params.on_bound(at_one)[index] == ""  # at 1: the model without the term, not a warning


def _910c_gdn_at(prefill_linear_attention_fraction: float) -> HardwareProfile:
    """The 910C datasheet profile (chunked GDN measured at 24.5 ns per head and token) at a GDN fraction."""
    hw = catalog.load_card("ascend-910c")
    coeff = hw.default_coefficients.model_copy(
        update={"prefill_linear_attention_fraction": prefill_linear_attention_fraction}
    )
    return hw.model_copy(update={"default_coefficients": coeff, "measured": None})


def test_chunked_gdn_prefill_runs_at_its_fraction_of_the_measured_rate() -> None:
    """Hand-worked: Qwen3.5-27B (48 Gated DeltaNet layers, 48 value heads, dk = dv = 128) at TP1, an
    8192-token prompt: t = T * heads * L_lin * 24.5 ns / f_lin = 8192 * 48 * 48 * 24.5e-9 = 0.462422 s at
    f_lin 1, 1.849688 s at 0.25. Other prefill terms and decode do not move."""
    expected_s = 8192 * 48 * 48 * 24.5e-9
    assert expected_s == pytest.approx(0.462422, rel=1e-6)
    measured, quarter = _910c_gdn_at(1.0), _910c_gdn_at(0.25)
    assert gdn_prefill_s(measured, 8192) == pytest.approx(expected_s, rel=1e-9)
    assert gdn_prefill_s(quarter, 8192) == pytest.approx(expected_s / 0.25, rel=1e-9)  # 1.849688 s
    deps = [
        h200_deployment("qwen3.5-27b", 8192, h, engine="vllm", calibrated=False) for h in (measured, quarter)
    ]
    ops = [{o.name: o for o in roofline.prefill_ledger(d, prompt_tokens=8192).ops} for d in deps]
    assert ops[0]["gdn.in_proj"].time_s == ops[1]["gdn.in_proj"].time_s
    assert ops[0]["attn.core"].time_s == ops[1]["attn.core"].time_s
    decode = [roofline.decode_step_s(d, batch=8, ctx_tokens=8192) for d in deps]
    assert decode[0] == decode[1]


def test_linear_attention_fraction_is_fitted_only_where_the_profile_opts_in() -> None:
    """prior(): centred at 1; width log(prefill_linear_attention_prior_factor) where a profile states it (none
    ships one: the 910C opt-in was tried, lab/notebook.md), else held (x/ 1.001), so the shipped fits do not
    move. At 1 (the measured rate) it is no warning."""
    base = catalog.load_card("ascend-910c").default_coefficients
    index = fitted_params.PARAM_NAMES.index("prefill_linear_attention_fraction")
    stated = base.model_copy(update={"prefill_linear_attention_prior_factor": 4.0})
    centre, sigma = fitted_params.prior(stated, measured=False)
    assert (centre[index], sigma[index]) == pytest.approx((0.0, np.log(4.0)))
    for card in ("ascend-910c", "ascend-910b3", "ascend-950pr", "nvidia-h200"):
        held = catalog.load_card(card).default_coefficients
        assert fitted_params.prior(held, measured=False)[1][index] == pytest.approx(
            fitted_params.PRIOR_SIGMA_HELD
        )
    assert fitted_params.on_bound(np.zeros(len(fitted_params.FIT_PARAMS)))[index] == ""
