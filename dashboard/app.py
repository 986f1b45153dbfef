"""kvplan dashboard page: `streamlit run app.py` (the repository root's app.py calls main()).

A thin layer over planner/: widgets, layout and fig_*() builders. Every number comes from planner/ (plans
from planner.plan.compose, sweeps from dashboard.view over planner.perf.roofline, SLO search from
planner.sim.bench.slo_answer, the CLI's); planner errors are shown with
st.error(dashboard_message(exc)) (widget names, no server paths), never as a traceback.

This module holds the sidebar, the header, the metrics, the exports and main(); the tabs and the cached
planner calls are in dashboard/sections.py, the plotly fig_*() builders in dashboard/figures.py.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import bands, failures, uploads
from dashboard import view as dashboard
from dashboard.load import show_load
from dashboard.sections import (
    KV_DTYPE_CHOICES,
    TP_CHOICES,
    Settings,
    cached_mindie,
    cached_plan,
    catalogue,
    show_compare,
    show_formulas,
    show_memory,
    show_speed,
)
from planner import units
from planner.deployment import Deployment
from planner.dtypes import WEIGHT_SCHEMES
from planner.engines import registry
from planner.errors import KvplanError
from planner.inputs import DEFAULT_CARD, PlanRequest
from planner.kinds import DEFAULT_ENGINE, ENGINES, parse_engine
from planner.results import Plan

DEFAULT_MODEL = "qwen3.5-27b"
DEFAULT_WEIGHT_DTYPE = "fp8"  # the README's mission: Qwen3-27B in FP8 on the 950PR
CTX_CHOICES = ["1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k", "256k"]
DEFAULT_TPOT_MS = 100.0
DEFAULT_TTFT_MS = 10000.0


# ---------------------------------------------------------------- sidebar


def upload_dir() -> Path:
    """This browser session's scratch folder for uploaded files.

    A TemporaryDirectory held in st.session_state: deleted when Streamlit drops the session (the object is
    collected) or, at the latest, when the server exits.
    """
    if "upload_tempdir" not in st.session_state:
        st.session_state["upload_tempdir"] = tempfile.TemporaryDirectory(prefix="kvplan-dashboard-")
    return Path(st.session_state["upload_tempdir"].name)


def uploaded_model_path() -> str | None:
    """The uploaded HF config.json as a model-card path, or None (errors shown in the sidebar)."""
    upload = st.sidebar.file_uploader("Hugging Face config.json", type=["json"], key="model_upload")
    if upload is None:
        st.sidebar.caption("Upload a config.json to plan a model that is not in the catalogue.")
        return None
    try:
        card = uploads.model_card_from_config(upload.getvalue(), name=upload.name, directory=upload_dir())
    except KvplanError as exc:
        st.sidebar.error(dashboard.dashboard_message(exc))
        return None
    st.sidebar.success(f"Imported {card.id}")
    return uploads.model_card_path(card, directory=upload_dir())


def sidebar_model(model_ids: list[str]) -> str:
    """Model id from the catalogue or a path to the card imported from an uploaded config.json."""
    source = st.sidebar.radio(
        "Model source", ["catalogue", "upload config.json"], horizontal=True, key="model_source"
    )
    if source == "upload config.json":
        path = uploaded_model_path()
        if path is not None:
            return path
    index = model_ids.index(DEFAULT_MODEL) if DEFAULT_MODEL in model_ids else 0
    return str(
        st.sidebar.selectbox("Model", model_ids, index=index, key="model", disabled=source != "catalogue")
    )


def override_input(label: str, *, step: float, key: str) -> float | None:
    """An optional override of a datasheet number (empty: keep the datasheet's)."""
    return st.number_input(label, min_value=1.0, value=None, step=step, key=key, placeholder="datasheet")


def sidebar_card(card_ids: list[str]) -> tuple[str, float | None, float | None]:
    """(card id or uploaded profile path, capacity override GiB, bandwidth override GB/s)."""
    index = card_ids.index(DEFAULT_CARD) if DEFAULT_CARD in card_ids else 0
    card = str(st.sidebar.selectbox("Card", card_ids, index=index, key="card"))
    with st.sidebar.expander("Card overrides / calibrated profile"):
        memory_gib = override_input("Memory capacity (GiB)", step=8.0, key="memory_gib")
        bandwidth = override_input("Memory bandwidth (GB/s)", step=100.0, key="bandwidth_gbps")
        upload = st.file_uploader("Calibrated profile (YAML)", type=["yaml", "yml"], key="card_upload")
    if upload is not None:
        card = str(uploads.save_upload(upload.getvalue(), name=upload.name, directory=upload_dir()))
    return card, memory_gib, bandwidth


# The Engine settings' widgets: key -> default (the memory fraction's key and default are the engine's).
ENGINE_DEFAULTS: dict[str, Any] = {
    "engine": DEFAULT_ENGINE,
    "block_size": 128,
    "mtp": 0,
    "mtp_acceptance": 0.7,
    "prompt": "",
    "uncalibrated": False,
}


def fraction_key(engine: str) -> str:
    """Widget key of the memory-fraction slider: one per engine, so switching engine shows its default."""
    return f"memory_fraction_{engine}"


def keep_unshown(keys: list[str]) -> None:
    """Keep the values of widgets this run does not draw: Streamlit drops a widget's state at the end of a
    run that does not draw it, unless the key is written through the Session State API in that run."""
    for key in keys:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def engine_widgets() -> None:
    """The Engine settings' widgets (drawn only while their expander is open; values in session state)."""
    engine = st.selectbox(
        "Engine",
        list(ENGINES),
        index=ENGINES.index(DEFAULT_ENGINE),
        key="engine",
        help="Whose block accounting sizes the max batch (and whose kernels the speed model uses).",
    )
    st.slider(
        "Memory fraction (MindIE NPU_MEMORY_FRACTION, vLLM --gpu-memory-utilization)",
        0.5,
        1.0,
        registry.default_memory_fraction(parse_engine(str(engine))),  # the engine's own default
        0.01,
        key=fraction_key(str(engine)),
    )
    st.selectbox("KV block size (tokens)", [16, 32, 64, 128], index=3, key="block_size")
    st.number_input("MTP draft tokens", min_value=0, max_value=8, value=0, key="mtp")
    st.slider("MTP acceptance", 0.0, 1.0, 0.7, 0.01, key="mtp_acceptance")
    st.text_input("Prompt tokens for TTFT", value="", key="prompt", placeholder="= context")
    st.toggle("Ignore measured coefficients", value=False, key="uncalibrated")


def sidebar_advanced() -> dict[str, Any]:
    """Engine knobs that rarely change (engine, memory fraction, block size, MTP, calibration, prompt).

    A lazy expander (on_change="rerun"): its seven widgets are drawn only while it is open, so the first
    page of a new session does not build them (two sliders among them); closed, the values set while it
    was open still apply (keep_unshown), and untouched ones are the defaults.
    """
    state = st.session_state
    engine = str(state.get("engine", DEFAULT_ENGINE))
    keys = [*ENGINE_DEFAULTS, *(fraction_key(e) for e in ENGINES)]
    expander = st.sidebar.expander("Engine settings", key="engine_settings", on_change="rerun")
    if expander.open:
        with expander:
            engine_widgets()
        engine = str(state["engine"])
    else:
        keep_unshown(keys)
    values = {key: state.get(key, default) for key, default in ENGINE_DEFAULTS.items()}
    fraction = state.get(fraction_key(engine), registry.default_memory_fraction(parse_engine(engine)))
    return {
        "engine": engine,
        "memory_fraction": float(fraction),
        "block_size": int(values["block_size"]),
        "mtp": int(values["mtp"]),
        "mtp_acceptance": float(values["mtp_acceptance"]),
        "calibrated": not values["uncalibrated"],
        "prompt": values["prompt"] or None,
    }


def sidebar() -> Settings:
    """All the sidebar controls, gathered into one request plus the SLOs."""
    model_ids, card_ids = catalogue()
    st.sidebar.title("kvplan")
    model = sidebar_model(model_ids)
    card, memory_gib, bandwidth = sidebar_card(card_ids)
    dtype = st.sidebar.selectbox(
        "Weight dtype",
        list(WEIGHT_SCHEMES),
        index=list(WEIGHT_SCHEMES).index(DEFAULT_WEIGHT_DTYPE),
        key="dtype",
        help="\n".join(f"- **{n}**: {s.description}" for n, s in WEIGHT_SCHEMES.items()),
    )
    kv_dtype = st.sidebar.selectbox("KV-cache dtype", KV_DTYPE_CHOICES, index=0, key="kv_dtype")
    tp = st.sidebar.selectbox("Tensor parallel (tp)", TP_CHOICES, index=0, key="tp")
    ctx = st.sidebar.selectbox(
        "Context length (tokens)",
        CTX_CHOICES,
        index=CTX_CHOICES.index("32k"),
        key="ctx",
        accept_new_options=True,
        help="Type any length: 48k, 100000 ...",
    )
    batch = st.sidebar.number_input(
        "Batch (concurrent sequences)",
        min_value=1,
        value=None,
        step=1,
        key="batch",
        placeholder="largest that fits",
    )
    slo_left, slo_right = st.sidebar.columns(2)
    tpot = slo_left.number_input(
        "TPOT SLO (ms)", min_value=1.0, value=DEFAULT_TPOT_MS, step=5.0, key="tpot_slo"
    )
    ttft = slo_right.number_input(
        "TTFT SLO (ms)", min_value=1.0, value=DEFAULT_TTFT_MS, step=100.0, key="ttft_slo"
    )
    extra = sidebar_advanced()
    prompt = extra.pop("prompt")
    req = PlanRequest(
        model=model,
        card=card,
        dtype=str(dtype),
        kv_dtype=None if kv_dtype == "auto" else kv_dtype,
        tp=int(tp),
        ctx=str(ctx),
        batch=int(batch) if batch else None,
        memory_gib=memory_gib,
        bandwidth_gbps=bandwidth,
        **extra,
    )
    return Settings(req=req, tpot_slo_ms=float(tpot), ttft_slo_ms=float(ttft), prompt=prompt)


# ---------------------------------------------------------------- page


def show_header(dep: Deployment, plan: Plan) -> None:
    """Title, what is being planned, and the calibrated / uncalibrated badge."""
    st.title(f"{plan.model} on {dep.hardware.name}")
    hw = dep.hardware
    visible = hw.visible_memory_bytes
    memory = f"{units.fmt_gib(hw.memory_capacity_bytes)} nominal" + (
        f", {units.fmt_gib(visible)} runtime-visible (planned on it)" if visible else ""
    )
    st.caption(
        f"{hw.variant_id}: {memory} at {hw.memory_bandwidth_gb_per_s:g} GB/s · weights "
        f"{plan.dtype} · KV {plan.kv_dtype} · tp={plan.tp} · context {units.fmt_tokens(plan.ctx_tokens)} "
        f"· block {plan.block_size_tokens} · memory fraction {plan.memory_fraction:g}"
    )
    calibrated = plan.performance is not None and plan.performance.calibrated
    warnings = dashboard.fit_warnings(dep, plan)
    if not calibrated:
        badges = ":orange-badge[:material/warning: uncalibrated]"
    elif warnings:  # a fit on its bounds or used outside its range: not a green badge
        badges = ":orange-badge[:material/warning: calibrated, with warnings]"
    else:
        badges = ":green-badge[:material/verified: calibrated]"
    if plan.model_alias:
        badges += f" :gray-badge[alias {plan.model_alias}]"
    st.markdown(  # one line of badges: st.columns would cut them at narrow widths ("unc…")
        badges,
        # the same status line as `kvplan cards` and the plan (HardwareProfile.calibration_status)
        help=dep.hardware.calibration_status
        + ("" if calibrated else "; run `kvplan calibrate` on the card, or fit it with --from-bench"),
    )
    if warnings:
        st.warning("The calibrated profile's fit: " + "; ".join(warnings))


# st.metric truncates values wider than its column ("128…"): short numbers with the unit in the label,
# and a value font that shrinks with the window (1024-1440 px with the sidebar open).
METRIC_CSS = "<style>[data-testid='stMetricValue'] {font-size: clamp(1.3rem, 2.1vw, 2.25rem);}</style>"


def metric_row(cells: list[tuple[str, str, str | None]]) -> None:
    """One row of bordered st.metric boxes: (label, value, help)."""
    for column, (label, value, help_text) in zip(st.columns(len(cells)), cells, strict=True):
        column.metric(label, value, border=True, help=help_text)


def show_metrics(plan: Plan) -> None:
    """The headline numbers in two rows: memory (batch, lengths, KV) and speed (TPOT, tokens/s, TTFT)."""
    rec, mem, perf = plan.recommendation, plan.memory, plan.performance
    share = dashboard.kv_fraction_of_capacity(mem, batch=rec.max_batch_size)
    batch_help = (
        "Memory limit: the largest batch of full-length sequences the engine's KV blocks hold (MindIE "
        "maxBatchSize, vLLM --max-num-seqs). The SLO limit is on the Speed tab."
    )
    st.markdown(METRIC_CSS, unsafe_allow_html=True)
    metric_row(
        [
            ("max batch" if plan.batch is None else "batch", f"{rec.max_batch_size}", batch_help),
            ("max seq len", dashboard.short_tokens(rec.max_seq_len), f"{rec.max_seq_len} tokens"),
            (
                "KV budget",
                f"{units.bytes_to_gib(mem.kv_budget_bytes):.1f} GiB",
                "usable - weights - activation peak - runtime",
            ),
            ("KV share", units.fmt_fraction(share), "Seed article's rule of thumb: 30-40 % of the card."),
        ]
    )
    if perf is None:
        return
    metric_row(
        [
            (
                "TPOT (ms)",
                f"{units.s_to_ms(dashboard.tpot_s(perf)):,.1f}",
                "Time per output token of one user at this batch.",
            ),
            ("total (tok/s)", f"{perf.tokens_per_s:,.0f}", None),
            ("per user (tok/s)", f"{perf.per_user_tokens_per_s:,.1f}", None),
            (
                "TTFT (ms)",
                f"{units.s_to_ms(perf.ttft_s):,.0f}",
                "Idle-engine TTFT: prefill of one prompt of the context length.",
            ),
        ]
    )
    st.caption(bands.speed_range_text(perf))  # metric boxes are too narrow for a range


def show_downloads(settings: Settings, plan: Plan) -> None:
    """Sidebar download buttons: the JSON plan and the MindIE config.json."""
    st.sidebar.divider()
    st.sidebar.subheader("Export")
    st.sidebar.download_button(
        "Plan (JSON)",
        plan.model_dump_json(indent=2),
        file_name=f"kvplan-{plan.model}.json",
        mime="application/json",
        key="download_plan",
        icon=":material/download:",
    )
    if st.session_state.get("weights_path_model") != plan.model:  # a new model: its own default path
        st.session_state["weights_path"] = f"/data/models/{plan.model}"
        st.session_state["weights_path_model"] = plan.model
    weights_path = st.sidebar.text_input(
        "Checkpoint path on the server", key="weights_path", help="MindIE modelWeightPath"
    )
    try:
        exported = cached_mindie(settings.req, weights_path)
    except KvplanError as exc:
        st.sidebar.error(dashboard.dashboard_message(exc))
        return
    text, notes = exported
    st.sidebar.download_button(
        "MindIE config.json",
        text,
        file_name="config.json",
        mime="application/json",
        key="download_mindie",
        icon=":material/download:",
    )
    for note in notes:
        st.sidebar.caption(note)


Section = Callable[[Settings, Deployment, Plan], None]
# The tabs in order, each a section drawn from (settings, deployment, plan).
TAB_SECTIONS: dict[str, Section] = {
    "Memory": lambda settings, dep, plan: show_memory(dep, plan),
    "Speed": show_speed,
    "Load": lambda settings, dep, plan: show_load(settings, plan),
    "Compare": lambda settings, dep, plan: show_compare(settings),
    "Formulas": lambda settings, dep, plan: show_formulas(dep, plan),
}


def guarded(section: Any, *args: Any, where: str) -> None:
    """Run one page section; any failure becomes one line in that section (naming the widget or the
    section, dashboard/failures.py), and the rest of the page still draws."""
    try:
        section(*args)
    except Exception as exc:
        if type(exc).__module__.startswith("streamlit"):
            raise  # st.stop / st.rerun control flow
        st.error(failures.failure_message(exc, where=where))


def main() -> None:
    """The page, behind one boundary: an unexpected error is one st.error line, never a traceback with
    server paths (issue 14; .streamlit/config.toml also sets client.showErrorDetails = false)."""
    st.set_page_config(
        page_title="kvplan · Ascend capacity planner", page_icon=":material/memory:", layout="wide"
    )
    try:
        page()
    except Exception as exc:
        if type(exc).__module__.startswith("streamlit"):
            raise  # st.stop / st.rerun control flow
        st.error(failures.failure_message(exc, where="The plan"))


def page() -> None:
    """Sidebar, then the plan, then the tabs."""
    try:
        settings = sidebar()
        dep, plan = cached_plan(settings.req, settings.prompt)
    except Exception as exc:
        if type(exc).__module__.startswith("streamlit"):
            raise
        st.title("kvplan")
        st.error(failures.failure_message(exc, where="The plan"))
        return
    guarded(show_header, dep, plan, where="The title")
    guarded(show_metrics, plan, where="The headline")
    if plan.warnings:
        st.info("\n\n".join(f"Note: {w}" for w in plan.warnings))
    guarded(show_downloads, settings, plan, where="The downloads")
    # Lazy tabs: only the open tab's section runs (and only its charts reach the browser), so a new
    # session draws the headline and one chart first; opening another tab reruns the page for it.
    tabs = st.tabs(list(TAB_SECTIONS), key="tab", on_change="rerun")
    for tab, (name, section) in zip(tabs, TAB_SECTIONS.items(), strict=True):
        if tab.open:
            with tab:
                guarded(section, settings, dep, plan, where=f"The {name} tab")
