"""The dashboard (app.py) through Streamlit's AppTest, and the pure helpers behind it (dashboard/view.py).

AppTest cannot drive st.file_uploader, so uploads are tested through the helpers app.py calls.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import membar, sidebar, uploads
from dashboard import view as dashboard
from planner import catalog, units
from planner.engines import registry
from planner.errors import DataFileError, PlanInputError
from planner.inputs import DEFAULT_CARD, PlanRequest
from planner.schema import HardwareProfile
from tests.helpers import h200_points_of, kvplan

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT_S = 60  # a cold run imports plotly and the planner; warm reruns take well under a second


@pytest.fixture
def app() -> AppTest:
    """The dashboard after its first run with default settings."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    return at


def open_tab(at: AppTest, name: str) -> AppTest:
    """Open one of the lazy tabs (st.tabs(key="tab", on_change="rerun")) and rerun: only its section runs."""
    at.session_state["tab"] = name
    return at.run()


def open_engine_settings(at: AppTest) -> AppTest:
    """Open the sidebar's lazy Engine settings expander (on_change="rerun"): its widgets exist only then."""
    at.session_state["engine_settings"] = True
    return at.run()


def metrics(at: AppTest) -> dict[str, str]:
    """Metric label -> displayed value."""
    return {m.label: m.value for m in at.metric}


def assert_clean(at: AppTest) -> None:
    """No uncaught exception reached the page."""
    assert not at.exception, [e.message for e in at.exception]


def test_default_render_has_no_exception(app: AppTest) -> None:
    assert_clean(app)
    assert not app.error
    shown = metrics(app)
    labels = {
        "max batch",
        "max seq len",
        "KV budget",
        "TPOT (ms)",
        "total (tok/s)",
        "TTFT (ms)",
    }
    assert labels <= set(shown)
    assert all(len(value) <= 8 for value in shown.values()), shown  # not cut off in a 1024 px window
    assert app.title[0].value.startswith("qwen3.5-27b on ")
    assert [t.label for t in app.tabs] == ["Memory", "Speed", "Load", "Compare", "Formulas"]
    open_tab(app, "Speed")
    assert_clean(app)
    assert app.success or app.warning  # the SLO search always reports one or the other


def test_only_the_open_tab_runs_so_the_first_page_is_light(app: AppTest) -> None:
    """First render: the headline and the Memory tab's HTML bar, no plotly chart (no plotly.js for the
    browser to load) and no dataframe grid; the Speed tab's three charts (and the simulations of the Load
    tab) run only when that tab is opened."""
    assert len(app.get("plotly_chart")) == 0
    assert not app.dataframe
    assert any(membar.BAR_CLASS in h.proto.body for h in app.get("html"))
    assert not any("SLO limit" in s.value for s in [*app.success, *app.warning])
    open_tab(app, "Speed")
    assert len(app.get("plotly_chart")) == 3
    assert metrics(app)["max batch"]  # the headline stays above every tab


def test_engine_settings_are_drawn_only_when_open_and_kept_when_closed(app: AppTest) -> None:
    """The Engine settings expander is lazy: closed (the first page), none of its widgets is built; a value
    set while it was open still applies after it is closed again."""
    assert not app.sidebar.get("slider")
    assert "engine" not in [s.key for s in app.sidebar.selectbox]
    mindie_batch = metrics(app)["max batch"]
    open_engine_settings(app)
    assert len(app.sidebar.get("slider")) == 2
    app.selectbox(key="engine").set_value("vllm").run()
    vllm_batch = metrics(app)["max batch"]
    assert vllm_batch != mindie_batch
    app.session_state["engine_settings"] = False
    app.run()
    assert_clean(app)
    assert not app.sidebar.get("slider")
    assert metrics(app)["max batch"] == vllm_batch  # the choice made while open still applies
    app.run()  # and after one more rerun with the expander closed
    assert metrics(app)["max batch"] == vllm_batch
    assert open_engine_settings(app).selectbox(key="engine").value == "vllm"


def test_download_buttons_are_offered(app: AppTest) -> None:
    labels = [b.proto.label for b in app.sidebar.get("download_button")]
    assert "Plan (JSON)" in labels
    assert "MindIE config.json" in labels
    assert "vllm-ascend command" in labels
    # the MindIE page (memory fraction 0.8) exports the vLLM command at vLLM's own default, as `kvplan vllm`
    commands = [c.value for c in app.sidebar.code if c.value.startswith("vllm serve")]
    assert commands and "--gpu-memory-utilization 0.92" in commands[0]


def test_weight_dtype_changes_the_numbers(app: AppTest) -> None:
    assert app.selectbox(key="dtype").value == "fp8"  # the README's mission
    after = metrics(app)
    app.selectbox(key="dtype").set_value("bf16").run()
    assert_clean(app)
    before = metrics(app)
    # fp8 weights take half the bytes of bf16, so more of the card is left for KV: more sequences fit.
    assert int(after["max batch"]) > int(before["max batch"])
    assert after["KV budget"] != before["KV budget"]


def test_model_change_updates_title_and_values(app: AppTest) -> None:
    before = metrics(app)
    app.selectbox(key="model").set_value("qwen3-8b").run()
    assert_clean(app)
    assert app.title[0].value.startswith("qwen3-8b on ")
    assert metrics(app)["max batch"] != before["max batch"]


def test_card_change_updates_values(app: AppTest) -> None:
    before = metrics(app)
    app.selectbox(key="card").set_value("nvidia-h200").run()
    assert_clean(app)
    assert not app.error
    assert metrics(app)["TPOT (ms)"] != before["TPOT (ms)"]


def test_capacity_override_changes_kv_budget(app: AppTest) -> None:
    before = metrics(app)
    app.number_input(key="memory_gib").set_value(96.0).run()
    assert_clean(app)
    assert metrics(app)["KV budget"] != before["KV budget"]


def test_model_that_does_not_fit_shows_an_error_not_a_traceback(app: AppTest) -> None:
    app.selectbox(key="dtype").set_value("bf16").run()
    app.selectbox(key="model").set_value("llama-3.1-70b").run()
    assert_clean(app)
    assert "does not fit on ascend-950pr" in app.error[0].value
    assert "Traceback" not in app.error[0].value
    app.selectbox(key="tp").set_value(4).run()  # recovering: the same model over four cards fits
    assert_clean(app)
    assert not app.error
    assert int(metrics(app)["max batch"]) >= 1


def test_dtype_the_card_lacks_shows_an_error(app: AppTest) -> None:
    app.selectbox(key="card").set_value("ascend-910b2").run()
    app.selectbox(key="dtype").set_value("fp8").run()
    assert_clean(app)
    assert app.error[0].value.startswith("Weight dtype: fp8 needs native fp8")  # the widget's name
    assert "--" not in app.error[0].value


def test_bad_prompt_length_shows_an_error(app: AppTest) -> None:
    open_engine_settings(app).text_input(key="prompt").set_value("lots").run()
    assert_clean(app)
    assert "not a token count" in app.error[0].value


def test_batch_too_large_shows_an_error(app: AppTest) -> None:
    app.number_input(key="batch").set_value(4000).run()
    assert_clean(app)
    assert app.error[0].value.startswith("Batch:")


def test_compare_tab_renders_three_configurations(app: AppTest) -> None:
    open_tab(app, "Compare")
    assert_clean(app)
    cmp_keys = {"cmp1_card", "cmp1_dtype", "cmp2_card", "cmp2_dtype"}
    assert cmp_keys <= {s.key for s in app.selectbox}
    app.selectbox(key="cmp2_card").set_value("ascend-910b2").run()
    app.selectbox(key="cmp2_dtype").set_value("int8").run()
    assert_clean(app)


def test_compare_columns_start_on_alternatives_not_on_a(app: AppTest) -> None:
    """B starts on the other weight dtype the card runs, C on the next tp: neither is a copy of A."""
    open_tab(app, "Compare")
    assert_clean(app)
    table = app.dataframe[0].value.to_dict("records")
    a, b, c = ({k: row[k] for k in ("card", "weights", "KV", "tp")} for row in table)
    assert b != a and c != a
    assert b["weights"] != a["weights"] and c["tp"] > a["tp"]


def test_tpot_slo_changes_the_slo_message(app: AppTest) -> None:
    open_tab(app, "Speed")
    assert any(
        s.value.startswith(f"Memory limit (max batch above): {metrics(app)['max batch']}.")
        for s in app.success
    )
    assert any("SLO limit: the largest batch meeting" in s.value for s in app.success)
    app.number_input(key="tpot_slo").set_value(1.0).run()
    assert_clean(app)
    assert any("SLO limit: no number of users meets" in w.value for w in app.warning)


def test_checkpoint_path_follows_the_model(app: AppTest) -> None:
    assert app.sidebar.text_input(key="weights_path").value == "/data/models/qwen3.5-27b"
    app.selectbox(key="model").set_value("qwen3-8b").run()
    assert_clean(app)
    assert app.sidebar.text_input(key="weights_path").value == "/data/models/qwen3-8b"


def test_engine_choice_uses_that_engines_accounting(app: AppTest) -> None:
    mindie_batch = metrics(app)["max batch"]
    open_engine_settings(app).selectbox(key="engine").set_value("vllm").run()
    assert_clean(app)
    vllm_plan = dashboard.plan_for(PlanRequest(model="qwen3.5-27b", ctx="32k", dtype="fp8", engine="vllm"))[1]
    assert metrics(app)["max batch"] == str(vllm_plan.recommendation.max_batch_size) != mindie_batch


def test_sglang_slider_starts_at_its_mem_fraction_static(app: AppTest) -> None:
    """SGLang's default memory setting depends on the card (mem_fraction_static's formula): the slider starts
    there and the page's batch is the CLI's plan without --memory-fraction."""
    open_engine_settings(app).selectbox(key="engine").set_value("sglang").run()
    assert_clean(app)
    request = PlanRequest(model="qwen3.5-27b", ctx="32k", dtype="fp8", engine="sglang")
    dep, plan = dashboard.plan_for(request)
    key = sidebar.fraction_key("sglang", card=DEFAULT_CARD, tp=1)
    assert app.slider(key=key).value == dep.memory_fraction
    assert metrics(app)["max batch"] == str(plan.recommendation.max_batch_size)


@pytest.mark.parametrize("change", ["card", "memory"])
def test_sglang_slider_follows_the_deployment_it_is_computed_from(app: AppTest, change: str) -> None:
    """h66: with Engine settings open, SGLang's slider kept the first card's mem_fraction_static after the
    card changed (a keyed slider keeps its value when only its default changes), and ignored the page's
    memory capacity override; the page then planned at a fraction the CLI never computes."""
    open_engine_settings(app).selectbox(key="engine").set_value("sglang").run()
    if change == "card":
        app.selectbox(key="card").set_value("nvidia-h200").run()
        request = PlanRequest(
            model="qwen3.5-27b", ctx="32k", dtype="fp8", engine="sglang", card="nvidia-h200"
        )
    else:
        app.number_input(key="memory_gib").set_value(64.0).run()
        request = PlanRequest(model="qwen3.5-27b", ctx="32k", dtype="fp8", engine="sglang", memory_gib=64.0)
    assert_clean(app)
    dep, plan = dashboard.plan_for(request)
    assert metrics(app)["max batch"] == str(plan.recommendation.max_batch_size)
    sliders = [s for s in app.slider if s.key and s.key.startswith("memory_fraction_sglang")]
    assert [s.value for s in sliders] == [dep.memory_fraction]


# ---------------------------------------------------------------- helpers behind the page


def test_errors_use_the_dashboards_words_and_no_server_paths() -> None:
    scratch = Path(tempfile.gettempdir()) / "kvplan-dashboard-x1y2" / "0123456789abcdef" / "config.json"
    error = DataFileError(f"{scratch}: not JSON; try --tp 4 or --dtype int8")
    assert dashboard.dashboard_message(error) == (
        "config.json: not JSON; try Tensor parallel (tp) = 4 or Weight dtype = int8"
    )
    error = PlanInputError("no larger --tp or smaller --dtype fits; --engine vllm")
    words = dashboard.dashboard_message(error)
    assert words == "no larger Tensor parallel (tp) or smaller Weight dtype fits; Engine = vllm"


@pytest.fixture(scope="module")
def plan_27b() -> tuple[object, object]:
    return dashboard.plan_for(PlanRequest(model="qwen3.5-27b", ctx="32k", dtype="fp8"))


def test_memory_segments_sum_to_capacity(plan_27b: tuple) -> None:
    _, plan = plan_27b
    for batch in (1, plan.recommendation.max_batch_size):
        segments = dashboard.memory_segments(
            plan.memory, batch=batch, held_bytes=batch * plan.pool_sequence_bytes
        )
        assert sum(s.size_bytes for s in segments) == plan.memory.device_capacity_bytes
        assert all(s.size_bytes >= 0 for s in segments)


@pytest.mark.parametrize(
    "req",
    [
        PlanRequest(model="qwen3-27b", dtype="fp8", engine="vllm", ctx="384"),
        PlanRequest(model="qwen3-27b", dtype="fp8", engine="vllm", ctx="1536", mtp=3),
        PlanRequest(model="qwen3-8b", ctx="8k", engine="mindie"),
    ],
)
def test_the_memory_tab_shows_the_plans_kv_row(req: PlanRequest) -> None:
    """The bar's KV + state, the headline's share and the ledger's KV share are the plan's "KV at
    recommended batch" (registry.kv_bytes_at_batch: a hybrid vLLM request holds whole pages and state pages,
    its drafts' lookahead capped at max_model_len), within the KV budget; the segments sum to the capacity."""
    dep, plan = dashboard.plan_for(req)
    mem, batch = plan.memory, plan.batch_per_dp_group
    held = registry.kv_bytes_at_batch(dep, mem, batch=batch)
    segments = {s.label: s for s in dashboard.plan_memory_segments(plan)}
    shown = segments["KV cache"].size_bytes + segments["linear-attention state"].size_bytes
    assert shown == min(held, mem.kv_budget_bytes)
    assert sum(s.size_bytes for s in segments.values()) == mem.device_capacity_bytes
    assert all(s.size_bytes >= 0 for s in segments.values())
    assert held <= mem.kv_budget_bytes and "over the budget" not in segments["KV cache"].note
    share = dashboard.kv_fraction_of_capacity(plan)
    assert share == held / mem.device_capacity_bytes
    ledger = {line.quantity: line for line in dashboard.memory_ledger(dep, plan)}
    assert ledger["KV share"].result == units.fmt_fraction(share)
    assert ledger["in the engine's pool"].result == units.fmt_bytes(plan.pool_sequence_bytes)
    assert ledger["max batch"].substituted.endswith(f"/ {units.fmt_bytes(plan.pool_sequence_bytes)})")
    # the ledger's max batch divides by the same pooled sequence (it read 74.91 GiB / 170.81 MiB = 449 -> 197)
    pooled = registry.kv_bytes_at_batch(dep, mem, batch=1)
    assert ledger["max batch"].substituted.endswith(f" / {units.fmt_bytes(pooled)})")
    assert int(ledger["max batch"].result) == mem.kv_budget_bytes // pooled  # these three: the floor itself


def test_memory_bar_html_widths_are_the_segments_shares(plan_27b: tuple) -> None:
    """The Memory tab's HTML bar: one div per segment whose CSS width is its share of the capacity (the
    widths add up to the whole bar), the guideline band where KV should end, labels escaped."""
    import re

    _, plan = plan_27b
    mem = plan.memory
    segments = dashboard.plan_memory_segments(plan)
    text = membar.memory_bar_html(
        segments,
        capacity_bytes=mem.device_capacity_bytes,
        kv_start_bytes=mem.weights_bytes,
        guideline=(0.3, 0.4),
    )
    widths = [float(w) for w in re.findall(r"flex:0 0 ([0-9.]+)%", text)]
    assert len(widths) == len(segments)
    assert sum(widths) == pytest.approx(100.0, abs=1e-3)
    assert widths[0] == pytest.approx(100 * segments[0].size_bytes / mem.device_capacity_bytes, abs=1e-3)
    low = 100 * (mem.weights_bytes + 0.3 * mem.device_capacity_bytes) / mem.device_capacity_bytes
    assert f"left:{min(low, 100):.3f}%" in text
    odd = [dashboard.MemorySegment(label="<b>x</b>", size_bytes=1, note='a "quote" & <tag>')]
    escaped = membar.memory_bar_html(odd, capacity_bytes=1, kv_start_bytes=0, guideline=(0.3, 0.4))
    assert "<b>x</b>" not in escaped and "&lt;b&gt;x&lt;/b&gt;" in escaped
    table = membar.memory_table_html(odd)
    assert "<tag>" not in table and "&lt;tag&gt;" in table


def test_feasibility_grid_matches_the_plan(plan_27b: tuple) -> None:
    dep, plan = plan_27b
    most = plan.recommendation.max_batch_size
    grid = dashboard.feasibility_grid(
        dep, batch=np.array([1, most, most + 1]), ctx_tokens=np.array([dep.ctx_tokens])
    )
    assert grid.fits[:, 0].tolist() == [True, True, False]
    assert np.isnan(grid.tpot_s[2, 0]) and np.isfinite(grid.tpot_s[:2, 0]).all()
    # The grid's TPOT is the plan's at its batch: one formula, two call paths.
    assert grid.tpot_s[1, 0] == pytest.approx(dashboard.tpot_s(plan.performance), rel=1e-9)


def test_speed_curve_is_vectorised_and_consistent(plan_27b: tuple) -> None:
    dep, plan = plan_27b
    axis = dashboard.batch_axis(plan.recommendation.max_batch_size)
    assert axis[0] == 1 and axis[-1] == plan.recommendation.max_batch_size
    curve = dashboard.speed_curve(dep, batch=axis, ctx_tokens=dep.ctx_tokens)
    assert np.all(np.diff(curve.tokens_per_s) > 0)  # aggregate grows with batch
    assert curve.tokens_per_s[-1] == pytest.approx(plan.performance.tokens_per_s, rel=1e-9)


def test_axes() -> None:
    assert dashboard.ctx_axis(5000, include=3000).tolist() == [1024, 2048, 3000, 4096, 5000]
    assert dashboard.heatmap_batch_axis(20, include=3).tolist() == [1, 2, 3, 4, 8, 16, 20]
    assert dashboard.batch_axis(1).tolist() == [1]


def test_memory_ledger_results_are_the_plans(plan_27b: tuple) -> None:
    dep, plan = plan_27b
    lines = {line.quantity: line for line in dashboard.memory_ledger(dep, plan)}
    assert lines["max batch"].result == str(plan.recommendation.max_batch_size)
    assert (
        lines["KV per token"].substituted == "2 x 16 x 4 x 256 x 16 / 8"
    )  # 16 full-attention layers, 4 KV heads


def test_uploaded_profile_is_validated() -> None:
    source = catalog.data_dir("hwprofiles") / "ascend-950pr.yaml"
    profile = uploads.load_uploaded(source.read_bytes(), HardwareProfile, name="my-950pr.yaml")
    assert profile.id == "ascend-950pr"
    with pytest.raises(DataFileError, match=r"bad-profile\.yaml: memory_capacity_gib"):
        bad = source.read_text().replace("memory_capacity_gib: 112\n", "memory_capacity_gib: -1\n", 1)
        uploads.load_uploaded(bad.encode(), HardwareProfile, name="bad-profile.yaml")


LLAMA_CONFIG = {
    "_name_or_path": "example/tiny-llama",
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "intermediate_size": 8192,
    "vocab_size": 128256,
    "tie_word_embeddings": True,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
    "rms_norm_eps": 1e-5,
}


def test_uploaded_hf_config_plans_like_a_catalogue_model() -> None:
    card = uploads.model_card_from_config(json.dumps(LLAMA_CONFIG).encode(), name="config.json")
    assert card.id == "tiny-llama"
    _, plan = dashboard.plan_for(PlanRequest(model=uploads.model_card_path(card), ctx="8k"))
    assert plan.model == "tiny-llama"
    assert plan.recommendation.max_batch_size > 1


def test_mindie_config_text_is_json_with_the_plans_batch(plan_27b: tuple) -> None:
    dep, _ = plan_27b
    exported = dashboard.mindie_config_text(dep, weights_path="/data/models/qwen3.5-27b")
    config = json.loads(exported[0])
    schedule = config["BackendConfig"]["ScheduleConfig"]
    assert schedule["maxBatchSize"] >= 1


def test_vllm_command_text_names_the_path_and_a_running_cap(plan_27b: tuple) -> None:
    dep, _ = plan_27b
    command, notes = dashboard.vllm_command_text(dep, weights_path="/data/models/qwen3.5-27b")
    assert command.startswith("vllm serve /data/models/qwen3.5-27b")
    seqs = int(re.search(r"--max-num-seqs (\d+)", command).group(1))
    assert seqs >= 1
    assert any("vLLM will log at start-up" in note for note in notes)


def test_uploaded_config_that_is_not_json_raises_a_data_error() -> None:
    with pytest.raises(DataFileError, match="not valid JSON"):
        uploads.model_card_from_config(b"{not json", name="config.json")


@pytest.mark.slow
def test_a_fit_used_outside_its_range_is_warned_not_green(tmp_path: Path) -> None:
    profile = tmp_path / "fitted.yaml"
    kvplan("calibrate --from-bench", h200_points_of("qwen3-8b", tmp_path), "--out", profile)
    inside = dashboard.plan_for(PlanRequest(model="qwen3-8b", card=str(profile), ctx="2k", batch=8))
    outside = dashboard.plan_for(PlanRequest(model="qwen3-8b", card=str(profile), ctx="128k", batch=1))
    assert not any("outside the fitted range" in w for w in dashboard.fit_warnings(*inside))
    assert any("ctx 131072 is outside the fitted range" in w for w in dashboard.fit_warnings(*outside))


def _band_brackets(fig: object, line_name: str) -> None:
    """The figure has a translucent band for `line_name` (one filled outline: the upper edge out, the lower
    edge back), the line lies inside it at every point (on an edge at most: the uncalibrated Ascend pair's
    high side is the estimate) and the band has a width."""
    traces = {t.name: t for t in fig.data}  # type: ignore[attr-defined]
    line, band = traces[line_name], traces[f"{line_name} range"]
    assert band.fill == "toself" and "rgba(" in band.fillcolor and band.line.width == 0
    y = np.asarray(line.y, dtype=float)
    shown = np.isfinite(y)
    assert shown.any()
    outline_y = np.asarray(band.y, dtype=float)
    count = int(shown.sum())  # the outline has the line's drawn points twice: out along high, back along low
    assert len(outline_y) == 2 * count
    y_high, y_low = outline_y[:count], outline_y[count:][::-1]
    assert list(np.asarray(band.x, dtype=float)[:count]) == list(np.asarray(line.x, dtype=float)[shown])
    assert np.all(y_low <= y[shown]) and np.all(y[shown] <= y_high)
    assert np.all(y_low < y_high)


@pytest.mark.parametrize("card", ["ascend-950pr", "ascend-910b3", "nvidia-h200"])
def test_speed_charts_draw_the_range_as_a_band(card: str) -> None:
    """Throughput vs batch (aggregate and per user) and TPOT vs context: every line has its band (fitted,
    uncalibrated and microbenchmark profiles)."""
    from dashboard import figures

    dep, plan = dashboard.plan_for(PlanRequest(model="qwen3.5-27b", card=card, ctx="8k", dtype="int8"))
    most = plan.recommendation.max_batch_size
    curve = dashboard.speed_curve(dep, batch=dashboard.batch_axis(most), ctx_tokens=dep.ctx_tokens)
    speed = figures.fig_speed(curve, knee=most, batch=most, tpot_slo_ms=50.0, slo_batch=None)
    _band_brackets(speed, "aggregate tok/s")
    _band_brackets(speed, "per-user tok/s")
    grid = dashboard.feasibility_grid(
        dep, batch=np.array([1, most]), ctx_tokens=dashboard.ctx_axis(32768, include=dep.ctx_tokens)
    )
    tpot = figures.fig_tpot_vs_ctx(grid, tpot_slo_ms=50.0, ctx_tokens=dep.ctx_tokens)
    for batch in (1, most):
        _band_brackets(tpot, f"batch {batch}")
    # the curve's range at the plan's batch is the plan's own (one band, two call paths)
    assert curve.tokens_per_s_high[-1] == pytest.approx(plan.performance.speed_range.tokens_per_s_high)


def test_speed_metrics_show_the_range_and_its_source(app: AppTest) -> None:
    """Under the speed metrics: each figure's range and its source (by default the fitted 950PR)."""
    captions = [c.value for c in app.caption if c.value.startswith("Range (")]
    assert len(captions) == 1
    assert "TPOT" in captions[0] and "TTFT" in captions[0] and "Source: fit" in captions[0]
    open_engine_settings(app).toggle(key="uncalibrated").set_value(True).run()
    assert_clean(app)
    captions = [c.value for c in app.caption if c.value.startswith("Range (uncalibrated)")]
    assert len(captions) == 1 and "published Ascend serving rows" in captions[0]


def test_compare_bars_carry_the_range() -> None:
    """The Compare tab's tok/s and TPOT bars: an error bar from each row's range, the bar inside it."""
    from dashboard import figures, sections

    rows = [
        sections.compare_row(name, dashboard.plan_for(PlanRequest(model="qwen3-8b", card=card, ctx="4k"))[1])
        for name, card in (("A", "nvidia-h200"), ("B", "ascend-910b3"))
    ]
    assert [r["speed source"] for r in rows] == ["microbenchmarks", "uncalibrated"]
    for metric in ("aggregate tok/s", "TPOT ms"):
        bar = figures.fig_compare(rows, metric, metric).data[0]
        assert list(bar.error_y.array) == pytest.approx([r[f"{metric} high"] - r[metric] for r in rows])
        assert list(bar.error_y.arrayminus) == pytest.approx([r[metric] - r[f"{metric} low"] for r in rows])
        assert all(r[f"{metric} low"] <= r[metric] <= r[f"{metric} high"] for r in rows)


def test_fp32_on_a_card_without_its_peak_names_the_widget(app: AppTest) -> None:
    """fp32 is in the dtype select (every weight scheme is): MindIE (the default engine) refuses it, and with
    transformers a card whose profile states no fp32 peak does; each one line under the widgets' names, the
    page staying up."""
    app.selectbox(key="card").set_value("ascend-910b2").run()
    app.selectbox(key="dtype").set_value("fp32").run()
    assert_clean(app)
    assert app.error[0].value.startswith("Weight dtype: MindIE serves no fp32 weights")
    assert "Engine = transformers" in app.error[0].value and "--" not in app.error[0].value
    open_engine_settings(app).selectbox(key="engine").set_value("transformers").run()
    assert_clean(app)
    assert app.error[0].value.startswith("Weight dtype: fp32 matmuls need the card's fp32 peak")
    assert "--" not in app.error[0].value


@pytest.mark.slow
def test_the_load_tab_starts_on_the_sidebars_engine_and_warns_past_the_context() -> None:
    """The Load tab's scheduler starts on the sidebar's engine (vLLM here, not MindIE's MTP refusal) and a
    prompt + output longer than the plan's context gets a warning instead of a silent simulation."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["engine_settings"] = True
    at.session_state["engine"] = "vllm"
    at.session_state["load_users"] = [1]
    at.run()
    open_tab(at, "Load")
    assert at.selectbox(key="load_engine").value == "vllm" and not at.error
    at.session_state["load_prompt"] = 40000
    at.run()
    assert any("longer than the plan's context" in w.value for w in at.warning)


@pytest.mark.parametrize(
    "request_kwargs",
    [
        {"model": "qwen3-8b"},
        {"model": "deepseek-v3.2", "card": "ascend-910c", "tp": 16, "dtype": "int8"},
        {"model": "minimax-m3", "card": "ascend-910c", "tp": 32, "dtype": "int8"},
        {"model": "deepseek-v4-flash", "card": "ascend-910c", "tp": 8, "dtype": "int8"},
    ],
)
def test_kv_per_token_line_adds_up_to_its_result(request_kwargs: dict) -> None:
    """The Formulas tab's KV-per-token numbers, evaluated, give the planner's figure (sparse index keys and
    DeepSeek-V4's compressed records included; ceil for V4's fractional sum)."""
    dep, plan = dashboard.plan_for(PlanRequest(**request_kwargs))
    line = dashboard.kv_per_token_line(dep, plan.memory)
    value = eval(line.substituted.replace(" x ", " * "), {"__builtins__": {}})  # digits and + * / ( ) only
    assert math.ceil(value) == plan.memory.kv_bytes_per_token
