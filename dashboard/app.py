"""kvplan dashboard page: `streamlit run app.py` (the repository root's app.py calls main()).

A thin layer over planner/: widgets, layout and fig_*() builders. Every number comes from planner/ (plans
from planner.plan.compose, sweeps from dashboard.view over planner.perf.roofline, SLO search from
planner.sim.bench.slo_answer, the CLI's); planner errors are shown with
st.error(dashboard_message(exc)) (widget names, no server paths), never as a traceback.

This module holds the header, the metrics and main(); the sidebar's controls are in dashboard/sidebar.py,
its downloads in dashboard/exports.py, the tabs and the cached planner calls in dashboard/sections.py,
the plotly fig_*() builders in dashboard/figures.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from dashboard import bands, failures
from dashboard import view as dashboard
from dashboard.exports import show_downloads
from dashboard.load import show_load
from dashboard.sections import (
    Settings,
    cached_plan,
    show_compare,
    show_formulas,
    show_memory,
    show_speed,
)
from dashboard.sidebar import sidebar
from planner import units
from planner.deployment import Deployment
from planner.results import Plan


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
        st.warning("The calibrated profile's fit: " + dashboard.dashboard_words("; ".join(warnings)))


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
    share = dashboard.kv_fraction_of_capacity(plan)
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
    ttft_unit, ttft_scale = units.duration_unit(perf.ttft_s)  # seconds from 10 s, as the CLI prints it
    metric_row(
        [
            (
                "TPOT (ms)",
                units.fmt_figures(units.s_to_ms(dashboard.tpot_s(perf))),
                "Time per output token of one user at this batch.",
            ),
            ("total (tok/s)", units.fmt_figures(perf.tokens_per_s), None),
            ("per user (tok/s)", units.fmt_figures(perf.per_user_tokens_per_s), None),
            (
                f"TTFT ({ttft_unit})",
                units.fmt_figures(perf.ttft_s / ttft_scale),
                "Idle-engine TTFT: prefill of one prompt of 'Prompt tokens for TTFT' (default: the default "
                "workload's 256 tokens, shorter where the context is).",
            ),
        ]
    )
    st.caption(bands.speed_range_text(perf))  # metric boxes are too narrow for a range


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


@st.fragment
def tab_fragment(name: str, settings: Settings, dep: Deployment, plan: Plan) -> None:
    """One open tab as a Streamlit fragment: a control inside the tab (the Compare tab's variants, the Load
    tab's lengths and rates) reruns this tab alone, with the (settings, dep, plan) of the last full run,
    so the sidebar, the headline and their 60-odd elements are neither recomputed nor sent again. A sidebar
    control still reruns the whole page, this tab with it."""
    guarded(TAB_SECTIONS[name], settings, dep, plan, where=f"The {name} tab")


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
        st.info("\n\n".join(f"Note: {dashboard.dashboard_words(w)}" for w in plan.warnings))
    guarded(show_downloads, settings, plan, where="The downloads")
    # Lazy tabs: only the open tab's section runs (and only its charts reach the browser), so a new
    # session draws the headline and one chart first; opening another tab reruns the page for it.
    tabs = st.tabs(list(TAB_SECTIONS), key="tab", on_change="rerun")
    for tab, name in zip(tabs, TAB_SECTIONS, strict=True):
        if tab.open:
            with tab:
                tab_fragment(name, settings, dep, plan)
