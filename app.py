"""kvplan dashboard: `streamlit run app.py`.

A thin layer over planner/: widgets, layout and fig_*() builders. Every number comes from planner/ (plans from
planner.capacity, sweeps from planner.dashboard over planner.roofline, SLO search from planner.serving);
planner errors are shown with st.error(str(exc)), never as a traceback.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from planner import catalog, dashboard, units
from planner.deployment import DEFAULT_MEMORY_FRACTION, Deployment
from planner.dtypes import WEIGHT_SCHEMES
from planner.errors import KvplanError
from planner.inputs import DEFAULT_CARD, PlanRequest
from planner.results import Plan
from planner.schema import HardwareProfile

DEFAULT_MODEL = "qwen3.5-27b"
CTX_CHOICES = ["1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k", "256k"]
KV_DTYPE_CHOICES = ["auto", "bf16", "fp16", "fp8", "int8"]
TP_CHOICES = [1, 2, 4, 8, 16]
DEFAULT_TPOT_MS = 100.0
DEFAULT_TTFT_MS = 10000.0
SEGMENT_COLORS = {
    "weights": "#4C6EF5",
    "KV cache": "#F08C00",
    "linear-attention state": "#FFC078",
    "activation headroom": "#AE3EC9",
    "runtime": "#868E96",
    "free (KV budget left)": "#D3F9D8",
    "reserve": "#E9ECEF",
}
COMPARE_COLORS = ["#4C6EF5", "#F08C00", "#2F9E44"]
COMPARE_DEFAULT_DTYPES = ["=", "fp8", "int8"]  # B and C start as the sidebar's config in FP8 and in W8A8
LABEL_MIN_FRACTION = 0.04  # label a memory segment only when it spans 4 % of the bar


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything the sidebar chose: the plan request plus the SLOs and the prompt length for TTFT."""

    req: PlanRequest
    tpot_slo_ms: float
    ttft_slo_ms: float
    prompt: str | None


# ---------------------------------------------------------------- cached planner calls


@st.cache_resource(show_spinner=False)
def catalogue() -> tuple[list[str], list[str]]:
    """Model ids and card ids (the catalogue does not change while the app runs)."""
    return catalog.model_ids(), catalog.card_ids()


@st.cache_resource(show_spinner=False)
def card_profile(card: str) -> HardwareProfile:
    """A catalogued or uploaded hardware profile."""
    return catalog.resolve_card(card)


@st.cache_data(show_spinner=False, max_entries=256)
def cached_plan(req: PlanRequest, prompt: str | None) -> tuple[Deployment, Plan]:
    """Deployment and plan for one request (KvplanError propagates and is not cached)."""
    from planner import inputs

    prompt_tokens = inputs.parse_ctx(prompt, flag="prompt tokens") if prompt else None
    return dashboard.plan_for(req, prompt_tokens=prompt_tokens)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_speed(req: PlanRequest) -> tuple[dashboard.SpeedCurve, int]:
    """Tokens/s over the batch axis at the chosen context, and the batch knee."""
    from planner import serving

    dep, plan = cached_plan(req, None)
    most = max(dashboard.max_batch_at(plan.memory), 1)
    curve = dashboard.speed_curve(dep, batch=dashboard.batch_axis(most), ctx_tokens=dep.ctx_tokens)
    return curve, serving.batch_knee(dep, ctx_tokens=dep.ctx_tokens, max_batch=most)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_grid(req: PlanRequest) -> dashboard.FeasibilityGrid:
    """Batch x context feasibility and TPOT (one vectorised roofline call)."""
    dep, plan = cached_plan(req, None)
    batch_axis, ctx_axis = dashboard.heatmap_axes(dep, plan.memory, batch=plan.recommendation.max_batch_size)
    return dashboard.feasibility_grid(dep, batch=batch_axis, ctx_tokens=ctx_axis)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_tpot_vs_ctx(req: PlanRequest) -> dashboard.FeasibilityGrid:
    """TPOT over context lengths at batch 1 and at the plan's batch (NaN where it does not fit)."""
    dep, plan = cached_plan(req, None)
    ctx_axis = dashboard.ctx_axis(dep.model.max_position_embeddings, include=dep.ctx_tokens)
    batch_axis = np.unique(np.array([1, plan.recommendation.max_batch_size], dtype=np.int64))
    return dashboard.feasibility_grid(dep, batch=batch_axis, ctx_tokens=ctx_axis)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_slo(req: PlanRequest, tpot_slo_ms: float, ttft_slo_ms: float, prompt: str | None) -> Any:
    """serving.search_slo: the largest batch meeting both SLOs within memory."""
    from planner import inputs, serving

    dep, plan = cached_plan(req, prompt)
    prompt_tokens = inputs.parse_ctx(prompt, flag="prompt tokens") if prompt else dep.ctx_tokens
    return serving.search_slo(
        dep,
        tpot_s=tpot_slo_ms * units.MS_S,
        ttft_s=ttft_slo_ms * units.MS_S,
        min_user_tokens_per_s=None,
        max_batch_by_memory=dashboard.max_batch_at(plan.memory),
        prompt_tokens=prompt_tokens,
    )


@st.cache_data(show_spinner=False, max_entries=64)
def cached_mindie(req: PlanRequest, weights_path: str) -> tuple[str, list[str]] | None:
    """MindIE config.json text and notes for the request (None when planner/mindie.py is absent)."""
    dep, _ = cached_plan(req, None)
    return dashboard.mindie_config_text(dep, weights_path=weights_path)


# ---------------------------------------------------------------- sidebar


def uploaded_model_path() -> str | None:
    """The uploaded HF config.json as a model-card path, or None (errors shown in the sidebar)."""
    upload = st.sidebar.file_uploader("Hugging Face config.json", type=["json"], key="model_upload")
    if upload is None:
        st.sidebar.caption("Upload a config.json to plan a model that is not in the catalogue.")
        return None
    if not dashboard.module_available("hfimport"):
        st.sidebar.error(
            "Importing config.json is not available in this build (planner/hfimport.py is missing)."
        )
        return None
    try:
        card = dashboard.model_card_from_config(upload.getvalue(), name=upload.name)
    except KvplanError as exc:
        st.sidebar.error(str(exc))
        return None
    st.sidebar.success(f"Imported {card.id}")
    return dashboard.model_card_path(card)


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


def sidebar_card(card_ids: list[str]) -> tuple[str, float | None, float | None]:
    """(card id or uploaded profile path, capacity override GiB, bandwidth override GB/s)."""
    index = card_ids.index(DEFAULT_CARD) if DEFAULT_CARD in card_ids else 0
    card = str(st.sidebar.selectbox("Card", card_ids, index=index, key="card"))
    with st.sidebar.expander("Card overrides / calibrated profile"):
        memory_gib = st.number_input(
            "Memory capacity (GiB)",
            min_value=1.0,
            value=None,
            step=8.0,
            key="memory_gib",
            placeholder="datasheet",
        )
        bandwidth = st.number_input(
            "Memory bandwidth (GB/s)",
            min_value=1.0,
            value=None,
            step=100.0,
            key="bandwidth_gbps",
            placeholder="datasheet",
        )
        upload = st.file_uploader("Calibrated profile (YAML)", type=["yaml", "yml"], key="card_upload")
    if upload is not None:
        card = str(dashboard.save_upload(upload.getvalue(), name=upload.name))
    return card, memory_gib, bandwidth


def sidebar_advanced() -> dict[str, Any]:
    """Engine knobs that rarely change (memory fraction, block size, MTP, calibration, prompt)."""
    with st.sidebar.expander("Engine settings"):
        fraction = st.slider(
            "NPU_MEMORY_FRACTION", 0.5, 1.0, DEFAULT_MEMORY_FRACTION, 0.01, key="memory_fraction"
        )
        block = st.selectbox("KV block size (tokens)", [16, 32, 64, 128], index=3, key="block_size")
        mtp = st.number_input("MTP draft tokens", min_value=0, max_value=8, value=0, key="mtp")
        acceptance = st.slider("MTP acceptance", 0.0, 1.0, 0.7, 0.01, key="mtp_acceptance")
        prompt = st.text_input("Prompt tokens for TTFT", value="", key="prompt", placeholder="= context")
        uncalibrated = st.toggle("Ignore measured coefficients", value=False, key="uncalibrated")
    return {
        "memory_fraction": float(fraction),
        "block_size": int(block),
        "mtp": int(mtp),
        "mtp_acceptance": float(acceptance),
        "calibrated": not uncalibrated,
        "prompt": prompt or None,
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
        index=0,
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


# ---------------------------------------------------------------- figures


def fig_memory(
    segments: list[dashboard.MemorySegment],
    *,
    capacity_bytes: int,
    kv_start_bytes: int,
    guideline: tuple[float, float],
) -> go.Figure:
    """One stacked horizontal bar of the device memory, with the 30-40 % KV guideline band."""
    fig = go.Figure()
    for seg in segments:
        gib = units.bytes_to_gib(seg.size_bytes)
        fig.add_trace(
            go.Bar(
                y=["device"],
                x=[gib],
                name=seg.label,
                orientation="h",
                marker_color=SEGMENT_COLORS.get(seg.label),
                text=[f"{gib:.1f}"] if seg.size_bytes > capacity_bytes * LABEL_MIN_FRACTION else [""],
                textposition="inside",
                hovertemplate=f"{seg.label}: %{{x:.2f}} GiB<br>{seg.note}<extra></extra>",
            )
        )
    low, high = (units.bytes_to_gib(kv_start_bytes + f * capacity_bytes) for f in guideline)
    fig.add_shape(
        type="rect",
        x0=low,
        x1=high,
        y0=-0.55,
        y1=0.55,
        line={"color": "#2F9E44", "width": 2, "dash": "dash"},
        fillcolor="rgba(47,158,68,0.10)",
    )
    fig.add_annotation(
        x=(low + high) / 2,
        y=0.62,
        text=f"KV should end here ({guideline[0]:.0%}-{guideline[1]:.0%} of the card)",
        showarrow=False,
        yanchor="bottom",
        font={"color": "#2F9E44"},
    )
    fig.update_layout(
        barmode="stack",
        height=250,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        xaxis_title="GiB per device",
        xaxis_range=[0, units.bytes_to_gib(capacity_bytes)],
        yaxis={"showticklabels": False, "range": [-0.7, 1.0]},
        legend={"orientation": "h", "y": -0.35, "traceorder": "normal"},
    )
    return fig


def marker_line(x: float, *, top: float, name: str, color: str, dash: str) -> go.Scatter:
    """A vertical line drawn as a trace (shapes on a log axis would need log-space coordinates)."""
    return go.Scatter(
        x=[x, x],
        y=[0, top],
        name=name,
        mode="lines",
        line={"color": color, "dash": dash, "width": 2},
        hovertemplate=f"{name}<extra></extra>",
    )


def fig_speed(
    curve: dashboard.SpeedCurve, *, knee: int, batch: int, tpot_slo_ms: float, slo_batch: int | None
) -> go.Figure:
    """Aggregate and per-user tokens/s vs batch, with the knee, the chosen batch and the TPOT SLO."""
    top = float(np.max(curve.tokens_per_s)) * 1.08
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=curve.batch,
            y=curve.tokens_per_s,
            name="aggregate tok/s",
            mode="lines+markers",
            line={"color": "#4C6EF5", "width": 3},
            marker={"size": 5},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=curve.batch,
            y=curve.per_user_tokens_per_s,
            name="per-user tok/s",
            yaxis="y2",
            mode="lines",
            line={"color": "#F08C00", "width": 3},
        )
    )
    slo_rate = dashboard.per_user_tokens_per_s_at(tpot_slo_ms * units.MS_S)
    fig.add_trace(
        go.Scatter(
            x=[curve.batch[0], curve.batch[-1]],
            y=[slo_rate, slo_rate],
            yaxis="y2",
            name=f"per-user rate at TPOT SLO {tpot_slo_ms:g} ms",
            mode="lines",
            line={"color": "#E03131", "dash": "dash"},
        )
    )
    fig.add_trace(marker_line(knee, top=top, name=f"knee: batch {knee}", color="#495057", dash="dot"))
    fig.add_trace(marker_line(batch, top=top, name=f"plan: batch {batch}", color="#2F9E44", dash="solid"))
    if slo_batch:
        fig.add_trace(
            marker_line(slo_batch, top=top, name=f"SLO: batch {slo_batch}", color="#E03131", dash="dash")
        )
    per_user_top = max(float(np.max(curve.per_user_tokens_per_s)), slo_rate) * 1.08
    fig.update_layout(
        height=400,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        legend={"orientation": "h", "y": -0.22},
        xaxis={
            "title": "batch (concurrent sequences)",
            "type": "log",
            "tickvals": dashboard.heatmap_batch_axis(int(curve.batch[-1])),
            "tickangle": 0,
        },
        yaxis={"title": "aggregate tokens/s", "range": [0, top]},
        yaxis2={
            "title": "per-user tokens/s",
            "overlaying": "y",
            "side": "right",
            "range": [0, per_user_top],
            "showgrid": False,
        },
    )
    return fig


def fig_tpot_vs_ctx(grid: dashboard.FeasibilityGrid, *, tpot_slo_ms: float, ctx_tokens: int) -> go.Figure:
    """TPOT vs context length at batch 1 and at the plan's batch (lines stop where memory runs out)."""
    fig = go.Figure()
    for row, batch in enumerate(grid.batch):
        fig.add_trace(
            go.Scatter(
                x=grid.ctx_tokens,
                y=units.s_to_ms(grid.tpot_s[row]),
                name=f"batch {batch}",
                mode="lines+markers",
                line={"color": COMPARE_COLORS[row % 3], "width": 3},
            )
        )
    fig.add_hline(
        y=tpot_slo_ms, line_dash="dash", line_color="#E03131", annotation_text=f"TPOT SLO {tpot_slo_ms:g} ms"
    )
    fig.add_vline(x=ctx_tokens, line_color="#868E96", line_dash="dot", annotation_text="chosen ctx")
    fig.update_layout(
        height=380,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": 1.12},
        xaxis={
            "title": "context length (tokens)",
            "type": "log",
            "tickvals": grid.ctx_tokens,
            "ticktext": [units.fmt_tokens(int(c)).split(" ")[0] for c in grid.ctx_tokens],
        },
        yaxis={"title": "TPOT (ms)", "rangemode": "tozero"},
    )
    return fig


def fig_feasibility(grid: dashboard.FeasibilityGrid, *, tpot_slo_ms: float) -> go.Figure:
    """Batch x context heatmap: TPOT where it fits (red beyond the SLO), blank where it does not."""
    tpot_ms = units.s_to_ms(grid.tpot_s)
    text = np.where(grid.fits, np.char.mod("%.0f", np.nan_to_num(tpot_ms)), "✗")
    labels = [units.fmt_tokens(int(c)).split(" ")[0] for c in grid.ctx_tokens]
    top = max(tpot_slo_ms * 2, float(np.nanmax(tpot_ms)) if np.isfinite(tpot_ms).any() else tpot_slo_ms * 2)
    slo_at = min(tpot_slo_ms / top, 1.0)
    fig = go.Figure(
        go.Heatmap(
            z=tpot_ms,
            x=labels,
            y=[str(b) for b in grid.batch],
            text=text,
            texttemplate="%{text}",
            zmin=0,
            zmax=top,
            hoverongaps=False,
            colorbar={"title": "TPOT ms"},
            colorscale=[
                [0, "#D3F9D8"],
                [slo_at, "#FFE066"],
                [min(slo_at + 1e-6, 1.0), "#FFA8A8"],
                [1, "#C92A2A"],
            ],
            hovertemplate="batch %{y}, ctx %{x}<br>TPOT %{z:.1f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        height=420,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        plot_bgcolor="#F1F3F5",
        xaxis={"title": "context length (tokens)", "type": "category"},
        yaxis={"title": "batch", "type": "category"},
    )
    return fig


def fig_compare(rows: list[dict[str, Any]], metric: str, title: str) -> go.Figure:
    """One bar per configuration for one metric."""
    fig = go.Figure(
        go.Bar(
            x=[r["config"] for r in rows],
            y=[r[metric] for r in rows],
            marker_color=COMPARE_COLORS[: len(rows)],
            text=[f"{r[metric]:,.1f}" for r in rows],
            textposition="outside",
        )
    )
    fig.update_layout(
        title=title, height=300, margin={"l": 10, "r": 10, "t": 40, "b": 10}, yaxis={"rangemode": "tozero"}
    )
    return fig


def fig_compare_memory(plans: list[tuple[str, Plan]]) -> go.Figure:
    """Stacked memory bars side by side, one per configuration."""
    fig = go.Figure()
    stacks = [
        (name, dashboard.memory_segments(p.memory, batch=p.recommendation.max_batch_size))
        for name, p in plans
    ]
    for index, seg in enumerate(stacks[0][1]):
        fig.add_trace(
            go.Bar(
                x=[name for name, _ in stacks],
                name=seg.label,
                marker_color=SEGMENT_COLORS.get(seg.label),
                y=[units.bytes_to_gib(segs[index].size_bytes) for _, segs in stacks],
            )
        )
    fig.update_layout(
        barmode="stack",
        title="Memory per device (GiB)",
        height=360,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


# ---------------------------------------------------------------- page sections


def show_header(dep: Deployment, plan: Plan) -> None:
    """Title, what is being planned, and the calibrated / uncalibrated badge."""
    st.title(f"{plan.model} on {dep.hardware.name}")
    hw = dep.hardware
    st.caption(
        f"{units.fmt_gib(hw.memory_capacity_bytes)} at {hw.memory_bandwidth_gb_per_s:g} GB/s · weights "
        f"{plan.dtype} · KV {plan.kv_dtype} · tp={plan.tp} · context {units.fmt_tokens(plan.ctx_tokens)} "
        f"· block {plan.block_size_tokens} · memory fraction {plan.memory_fraction:g}"
    )
    badges = st.columns([1, 1, 6])
    with badges[0]:
        if plan.performance is not None and plan.performance.calibrated:
            st.badge("calibrated", icon=":material/verified:", color="green")
        else:
            st.badge(
                "uncalibrated",
                icon=":material/warning:",
                color="orange",
                help="Speeds use datasheet peaks x assumed efficiencies; run `kvplan calibrate`.",
            )
    with badges[1]:
        if plan.model_alias:
            st.badge(f"alias {plan.model_alias}", color="gray")


def show_metrics(plan: Plan) -> None:
    """The headline numbers in two rows: memory (batch, lengths, KV) and speed (TPOT, tokens/s, TTFT)."""
    rec, mem, perf = plan.recommendation, plan.memory, plan.performance
    share = dashboard.kv_fraction_of_capacity(mem, batch=rec.max_batch_size)
    top = st.columns(4)
    top[0].metric(
        "max batch" if plan.batch is None else "batch",
        f"{rec.max_batch_size}",
        border=True,
        help="Largest batch of full-length sequences that fits (MindIE maxBatchSize).",
    )
    top[1].metric("max seq len", units.fmt_tokens(rec.max_seq_len), border=True)
    top[2].metric(
        "KV budget",
        units.fmt_gib(mem.kv_budget_bytes),
        border=True,
        help="usable - weights - activation peak - runtime",
    )
    top[3].metric(
        "KV share at this batch",
        units.fmt_fraction(share),
        border=True,
        help="Seed article's rule of thumb: 30-40 % of the card's memory.",
    )
    if perf is None:
        return
    bottom = st.columns(4)
    bottom[0].metric(
        "TPOT",
        units.fmt_ms(dashboard.tpot_s(perf)),
        border=True,
        help="Time per output token of one user at this batch.",
    )
    bottom[1].metric("aggregate", units.fmt_tokens_per_s(perf.tokens_per_s), border=True)
    bottom[2].metric("per user", units.fmt_tokens_per_s(perf.per_user_tokens_per_s), border=True)
    bottom[3].metric(
        "TTFT (idle)",
        units.fmt_ms(perf.ttft_s),
        border=True,
        help="Prefill of one prompt of the context length on an idle engine.",
    )


def show_memory(dep: Deployment, plan: Plan) -> None:
    """Stacked memory bar, KV share against the guideline, and the budget arithmetic."""
    mem, batch = plan.memory, plan.recommendation.max_batch_size
    segments = dashboard.memory_segments(mem, batch=batch)
    guideline = dashboard.kv_guideline_fraction()
    st.plotly_chart(
        fig_memory(
            segments,
            capacity_bytes=mem.device_capacity_bytes,
            kv_start_bytes=mem.weights_bytes,
            guideline=guideline,
        ),
        key="fig_memory",
    )
    share = dashboard.kv_fraction_of_capacity(mem, batch=batch)
    low, high = guideline
    verdict = "inside" if low <= share <= high else ("below" if share < low else "above")
    kv_gib = units.fmt_gib(dashboard.kv_bytes_at(mem, batch=batch))
    text, table = st.columns([2, 3])
    text.markdown(
        f"At batch **{batch}** the KV cache and states take **{kv_gib} = {units.fmt_fraction(share)}** "
        f"of the card, {verdict} the seed article's "
        f"{units.fmt_fraction(low)}-{units.fmt_fraction(high)} rule of thumb. The KV budget is "
        f"**{units.fmt_gib(mem.kv_budget_bytes)}** "
        f"({units.fmt_fraction(mem.kv_budget_fraction_of_capacity)} of "
        f"capacity); one sequence of {units.fmt_tokens(plan.ctx_tokens)} tokens holds "
        f"{units.fmt_bytes(mem.kv_bytes_per_sequence)}."
    )
    table.dataframe(
        [
            {"item": s.label, "GiB": round(units.bytes_to_gib(s.size_bytes), 2), "note": s.note}
            for s in segments
        ],
        hide_index=True,
        width="stretch",
    )


def show_speed(settings: Settings, dep: Deployment, plan: Plan) -> None:
    """Tokens/s vs batch with knee and SLO; TPOT vs context; the batch x context heatmap."""
    curve, knee = cached_speed(settings.req)
    slo = cached_slo(settings.req, settings.tpot_slo_ms, settings.ttft_slo_ms, settings.prompt)
    show_slo_summary(slo, knee=knee, settings=settings)
    left, right = st.columns(2)
    with left:
        st.subheader("Throughput vs batch")
        st.plotly_chart(
            fig_speed(
                curve,
                knee=knee,
                batch=plan.recommendation.max_batch_size,
                tpot_slo_ms=settings.tpot_slo_ms,
                slo_batch=slo.batch if slo.feasible else None,
            ),
            key="fig_speed",
        )
    with right:
        st.subheader("TPOT vs context length")
        st.plotly_chart(
            fig_tpot_vs_ctx(
                cached_tpot_vs_ctx(settings.req), tpot_slo_ms=settings.tpot_slo_ms, ctx_tokens=plan.ctx_tokens
            ),
            key="fig_tpot_ctx",
        )
    st.subheader("Feasibility: batch x context")
    st.caption(
        "Each cell is the TPOT in ms where the batch fits the KV budget; ✗ does not fit. "
        "Green to yellow meets the TPOT SLO, red misses it."
    )
    st.plotly_chart(
        fig_feasibility(cached_grid(settings.req), tpot_slo_ms=settings.tpot_slo_ms), key="fig_feasibility"
    )


def show_slo_summary(slo: Any, *, knee: int, settings: Settings) -> None:
    """One line on the SLO search: the best batch, or why none meets the SLOs."""
    slos = f"TPOT ≤ {settings.tpot_slo_ms:g} ms and TTFT ≤ {settings.ttft_slo_ms:g} ms"
    if not slo.feasible:
        st.warning(
            f"No batch meets {slos} (binding: {slo.binding}). Knee of the throughput curve: batch {knee}."
        )
        return
    perf = slo.performance
    st.success(
        f"Largest batch meeting {slos}: **{slo.batch}** (bound by {slo.binding}): "
        f"{units.fmt_tokens_per_s(perf.tokens_per_s)} aggregate, TPOT {units.fmt_ms(slo.tpot_s)}, "
        f"loaded TTFT {units.fmt_ms(slo.loaded_ttft_s)}. Knee of the throughput curve: batch {knee}."
    )


def compare_request(index: int, base: PlanRequest, card_ids: list[str]) -> PlanRequest:
    """Controls of one comparison column; '=' keeps the sidebar's choice."""
    same = "="
    default_dtype = COMPARE_DEFAULT_DTYPES[index]
    dtypes = [same, *WEIGHT_SCHEMES]
    card = st.selectbox("card", [same, *card_ids], key=f"cmp{index}_card")
    dtype = st.selectbox("weight dtype", dtypes, index=dtypes.index(default_dtype), key=f"cmp{index}_dtype")
    kv_dtype = st.selectbox("KV dtype", [same, *KV_DTYPE_CHOICES], key=f"cmp{index}_kv")
    tp = st.selectbox("tp", [same, *TP_CHOICES], key=f"cmp{index}_tp")
    changes: dict[str, Any] = {}
    if card != same:
        changes.update(card=card, memory_gib=None, bandwidth_gbps=None)
    if dtype != same:
        changes["dtype"] = dtype
    if kv_dtype != same:
        changes["kv_dtype"] = None if kv_dtype == "auto" else kv_dtype
    if tp != same:
        changes["tp"] = int(tp)
    return dataclasses.replace(base, **changes)


def compare_row(name: str, plan: Plan) -> dict[str, Any]:
    """Display row of one compared configuration."""
    mem, rec, perf = plan.memory, plan.recommendation, plan.performance
    row: dict[str, Any] = {
        "config": name,
        "card": plan.card,
        "weights": plan.dtype,
        "KV": plan.kv_dtype,
        "tp": plan.tp,
        "weights GiB": round(units.bytes_to_gib(mem.weights_bytes), 2),
        "KV budget GiB": round(units.bytes_to_gib(mem.kv_budget_bytes), 2),
        "max batch": rec.max_batch_size,
    }
    if perf is not None:
        row.update(
            {
                "TPOT ms": round(units.s_to_ms(dashboard.tpot_s(perf)), 1),
                "aggregate tok/s": round(perf.tokens_per_s, 1),
                "per-user tok/s": round(perf.per_user_tokens_per_s, 1),
                "TTFT ms": round(units.s_to_ms(perf.ttft_s)),
            }
        )
    return row


def show_compare(settings: Settings) -> None:
    """Two or three configurations side by side: the sidebar's, and variants of it."""
    _, card_ids = catalogue()
    count = st.radio("Configurations", [2, 3], index=1, horizontal=True, key="cmp_count")
    columns = st.columns(int(count))
    named: list[tuple[str, Plan]] = []
    for index, column in enumerate(columns):
        with column:
            name = "ABC"[index]
            st.markdown(f"**{name}**" + (" · sidebar settings" if index == 0 else ""))
            req = settings.req if index == 0 else compare_request(index, settings.req, card_ids)
            try:
                named.append((name, cached_plan(req, settings.prompt)[1]))
            except KvplanError as exc:
                st.error(str(exc))
    if not named:
        return
    rows = [compare_row(name, plan) for name, plan in named]
    st.dataframe(rows, hide_index=True, width="stretch")
    charts = st.columns(3)
    charts[0].plotly_chart(fig_compare_memory(named), key="fig_cmp_memory")
    if all("aggregate tok/s" in r for r in rows):
        charts[1].plotly_chart(
            fig_compare(rows, "aggregate tok/s", "Aggregate tokens/s at max batch"), key="fig_cmp_tps"
        )
        charts[2].plotly_chart(fig_compare(rows, "TPOT ms", "TPOT (ms) at max batch"), key="fig_cmp_tpot")


def ledger_row(op: Any, *, total_s: float) -> dict[str, Any]:
    """Display row of one decode-ledger op, with its time formula written out in ms."""
    xfer, comp, fixed, time = (
        units.s_to_ms(v) for v in (op.transfer_s, op.compute_s, op.overhead_s, op.time_s)
    )
    return {
        "op": op.name,
        "layers": op.layers,
        "kernels": op.kernels,
        "bytes": units.fmt_bytes(op.bytes),
        "FLOP": f"{op.flop:.3g}",
        "time = max(xfer, comp) + fixed (ms)": f"max({xfer:.3f}, {comp:.3f}) + {fixed:.3f} = {time:.3f}",
        "share": units.fmt_fraction(op.time_s / total_s),
        "bound": op.bound,
    }


def show_formulas(dep: Deployment, plan: Plan) -> None:
    """The memory arithmetic and the decode ledger with every number substituted (`kvplan --explain`)."""
    st.subheader("Memory")
    st.dataframe(
        [line.model_dump() for line in dashboard.memory_ledger(dep, plan)], hide_index=True, width="stretch"
    )
    if plan.performance is None:
        st.info("The speed model (planner/roofline.py) is not available in this build.")
        return
    from planner import roofline

    ledger = roofline.decode_ledger(dep, batch=plan.performance.batch, ctx_tokens=plan.ctx_tokens)
    st.subheader(f"Decode step at batch {ledger.batch}, context {units.fmt_tokens(ledger.ctx_tokens)}")
    st.caption(
        "time = max(xfer, comp) + fixed, where xfer = bytes / effective bandwidth, comp = FLOP / effective "
        "peak, fixed = kernel launches + all-reduce latency. Effective = datasheet x the card's "
        + ("measured" if ledger.calibrated else "assumed (uncalibrated)")
        + " coefficients."
    )
    st.dataframe(
        [ledger_row(op, total_s=ledger.time_s) for op in ledger.ops],
        hide_index=True,
        width="stretch",
        height=min(40 + 35 * len(ledger.ops), 700),
    )
    st.markdown(
        f"**Step total {units.fmt_ms(ledger.time_s)}**: HBM {units.fmt_bytes(ledger.hbm_bytes)}, "
        f"interconnect {units.fmt_bytes(ledger.link_bytes)}, {ledger.flop:.3g} FLOP."
    )


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
    weights_path = st.sidebar.text_input(
        "Checkpoint path on the server",
        value=f"/data/models/{plan.model}",
        key="weights_path",
        help="MindIE modelWeightPath",
    )
    try:
        exported = cached_mindie(settings.req, weights_path)
    except KvplanError as exc:
        st.sidebar.error(str(exc))
        return
    if exported is None:
        st.sidebar.caption("MindIE config export is not available in this build (planner/mindie.py).")
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


def guarded(section: Any, *args: Any) -> None:
    """Run one page section; a planner error becomes a message in that section, not a traceback."""
    try:
        section(*args)
    except KvplanError as exc:
        st.error(str(exc))


def main() -> None:
    """Sidebar, then the plan, then the tabs."""
    st.set_page_config(
        page_title="kvplan · Ascend capacity planner", page_icon=":material/memory:", layout="wide"
    )
    settings = sidebar()
    try:
        dep, plan = cached_plan(settings.req, settings.prompt)
    except KvplanError as exc:
        st.title("kvplan")
        st.error(str(exc))
        return
    show_header(dep, plan)
    show_metrics(plan)
    if plan.warnings:
        st.info("\n\n".join(f"Note: {w}" for w in plan.warnings))
    memory_tab, speed_tab, compare_tab, formula_tab = st.tabs(["Memory", "Speed", "Compare", "Formulas"])
    with memory_tab:
        guarded(show_memory, dep, plan)
    with speed_tab:
        if plan.performance is None:
            st.info("The speed model (planner/roofline.py) is not available in this build.")
        else:
            guarded(show_speed, settings, dep, plan)
    with compare_tab:
        guarded(show_compare, settings)
    with formula_tab:
        guarded(show_formulas, dep, plan)
    show_downloads(settings, plan)


main()
