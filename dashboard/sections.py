"""Page sections of the kvplan dashboard (app.py): the Memory, Speed, Compare and Formulas tabs, and the
cached planner calls behind the whole page.

Widgets and layout only: charts come from dashboard/figures.py, numbers from planner/.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import streamlit as st

from dashboard import compare
from dashboard import view as dashboard
from dashboard.figures import (
    fig_compare,
    fig_compare_memory,
    fig_feasibility,
    fig_speed,
    fig_tpot_vs_ctx,
)
from dashboard.membar import memory_bar_html, memory_table_html
from planner import catalog, records, units
from planner.deployment import Deployment
from planner.dtypes import WEIGHT_SCHEMES
from planner.errors import KvplanError
from planner.inputs import PlanRequest
from planner.results import Plan
from planner.schema import HardwareProfile

KV_DTYPE_CHOICES = ["auto", "bf16", "fp16", "fp8", "int8"]
TP_CHOICES = list(compare.TP_LADDER)


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
    return catalog.model_ids(), [*catalog.card_ids(), *sorted(catalog.variant_map())]  # ids and SKU variants


@st.cache_resource(show_spinner=False)
def card_profile(card: str) -> HardwareProfile:
    """A catalogued or uploaded hardware profile."""
    return catalog.resolve_card(card)


def prompt_tokens_of(prompt: str | None) -> int | None:
    """The sidebar's "Prompt tokens for TTFT" as tokens, or None when left empty (= the context length)."""
    from planner import inputs

    return inputs.parse_ctx(prompt, flag="Prompt tokens for TTFT") if prompt else None


@st.cache_data(show_spinner=False, max_entries=256)
def cached_plan(req: PlanRequest, prompt: str | None) -> tuple[Deployment, Plan]:
    """Deployment and plan for one request (KvplanError propagates and is not cached)."""
    return dashboard.plan_for(req, prompt_tokens=prompt_tokens_of(prompt))


@st.cache_data(show_spinner=False, max_entries=64)
def cached_speed(req: PlanRequest) -> tuple[dashboard.SpeedCurve, int]:
    """Tokens/s over the batch axis at the chosen context, and the batch knee."""
    from planner.serving import performance

    dep, plan = cached_plan(req, None)
    most = max(dashboard.max_batch_at(dep, plan.memory), 1)
    curve = dashboard.speed_curve(dep, batch=dashboard.batch_axis(most), ctx_tokens=dep.ctx_tokens)
    return curve, performance.batch_knee(dep, ctx_tokens=dep.ctx_tokens, max_batch=most)


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
    """The plan's SLO search (planner.sim.bench.slo_answer, the one `kvplan`, `kvplan serve` and
    `kvplan layout` run: simulated closed loop of the default workload, p99 tails); None when no number of
    users meets the targets (the CLI's exit 3)."""
    from planner.errors import SloNotMetError
    from planner.inputs import ServiceLevels
    from planner.sim import bench as sim_bench

    dep, plan = cached_plan(req, prompt)
    targets = ServiceLevels(tpot_s=tpot_slo_ms * units.MS_S, ttft_s=ttft_slo_ms * units.MS_S)
    try:
        return sim_bench.slo_answer(dep, memory_batch=dashboard.max_batch_at(dep, plan.memory), slo=targets)
    except SloNotMetError:
        return None


@st.cache_data(show_spinner=False, max_entries=64)
def cached_mindie(req: PlanRequest, weights_path: str) -> tuple[str, list[str]]:
    """MindIE config.json text and notes for the request."""
    dep, _ = cached_plan(req, None)
    return dashboard.mindie_config_text(dep, weights_path=weights_path)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_vllm(req: PlanRequest, weights_path: str) -> tuple[str, list[str]]:
    """The `vllm serve` command and its start-up checks for the request."""
    dep, _ = cached_plan(req, None)
    return dashboard.vllm_command_text(dep, weights_path=weights_path)


# ---------------------------------------------------------------- page sections


def show_memory(dep: Deployment, plan: Plan) -> None:
    """Stacked memory bar, KV share against the guideline, and the budget arithmetic."""
    mem, batch = plan.memory, plan.batch_per_dp_group
    segments = dashboard.plan_memory_segments(plan)
    guideline = dashboard.kv_guideline_fraction()
    st.html(  # HTML, not plotly: the first page of a new session loads no plotly.js (dashboard/membar.py)
        memory_bar_html(
            segments,
            capacity_bytes=mem.device_capacity_bytes,
            kv_start_bytes=mem.weights_bytes,
            guideline=guideline,
        )
    )
    share = dashboard.kv_fraction_of_capacity(plan)
    low, high = guideline
    verdict = "inside" if low <= share <= high else ("below" if share < low else "above")
    kv_gib = units.fmt_gib(plan.kv_bytes_at_batch)
    group = f" (one of {plan.layout.dp} DP groups)" if plan.layout and plan.layout.dp > 1 else ""
    text, table = st.columns([2, 3])
    text.markdown(
        f"At batch **{batch}**{group} the KV cache and states take "
        f"**{kv_gib} = {units.fmt_fraction(share)}** "
        f"of the card, {verdict} the seed article's "
        f"{units.fmt_fraction(low)}-{units.fmt_fraction(high)} rule of thumb. The KV budget is "
        f"**{units.fmt_gib(mem.kv_budget_bytes)}** "
        f"({units.fmt_fraction(mem.kv_budget_fraction_of_capacity)} of "
        f"capacity); one sequence of {units.fmt_tokens(plan.ctx_tokens)} tokens holds "
        f"{units.fmt_bytes(plan.pool_sequence_bytes)} in {dep.engine}'s pool."
    )
    table.html(memory_table_html(segments))  # HTML too: st.dataframe / st.table load Arrow's scripts


def show_speed(settings: Settings, dep: Deployment, plan: Plan) -> None:
    """Tokens/s vs batch with knee and SLO; TPOT vs context; the batch x context heatmap."""
    curve, knee = cached_speed(settings.req)
    slo = cached_slo(settings.req, settings.tpot_slo_ms, settings.ttft_slo_ms, settings.prompt)
    show_slo_summary(slo, knee=knee, settings=settings, memory_batch=dashboard.max_batch_at(dep, plan.memory))
    left, right = st.columns(2)
    with left:
        st.subheader("Throughput vs batch")
        st.plotly_chart(
            fig_speed(
                curve,
                knee=knee,
                batch=plan.recommendation.max_batch_size,
                tpot_slo_ms=settings.tpot_slo_ms,
                slo_batch=slo.batch if slo is not None else None,
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


def show_slo_summary(slo: Any, *, knee: int, settings: Settings, memory_batch: int) -> None:
    """One line on the SLO search, labelled as the SLO limit next to the memory limit (the max batch metric):
    the two answer different questions. The search names its workload (the CLI's default)."""
    slos = f"p99 TPOT ≤ {settings.tpot_slo_ms:g} ms and p99 TTFT ≤ {settings.ttft_slo_ms:g} ms"
    memory = f"Memory limit (max batch above): {memory_batch}."
    if slo is None:
        st.warning(
            f"{memory} SLO limit: no number of users meets {slos} in the simulated closed loop (the CLI "
            f"exits 3). Knee of the throughput curve: batch {knee}."
        )
        return
    st.success(
        f"{memory} SLO limit: the largest batch meeting {slos} is **{slo.batch}** ({slo.users} users of "
        f"{slo.input_tokens} in / {slo.output_tokens} out, closed loop, {slo.arrivals}, simulated as "
        f"`kvplan serve`; bound by {slo.binding}): there p99 TTFT {units.fmt_duration(slo.ttft_s)}, TPOT "
        f"{units.fmt_tpot(slo.tpot_s)}. Knee of the throughput curve: batch {knee}."
    )


def compare_request(index: int, base: PlanRequest, card_ids: list[str]) -> PlanRequest:
    """Controls of one comparison column; '=' keeps the sidebar's choice. B starts on the other weight dtype
    the card runs, C on the next tp (dashboard/compare.py), so neither starts identical to A."""
    same = "="
    native = card_profile(base.card).native_dtypes
    dtypes = [same, *WEIGHT_SCHEMES]
    tps = [same, *TP_CHOICES]
    dtype_default = compare.alternative_dtype(base.dtype, native_dtypes=native) if index == 1 else same
    tp_default = compare.alternative_tp(base.tp, plans=lambda tp: plans(base, tp)) if index == 2 else same
    card = st.selectbox("card", [same, *card_ids], key=f"cmp{index}_card")
    dtype = st.selectbox("weight dtype", dtypes, index=dtypes.index(dtype_default), key=f"cmp{index}_dtype")
    kv_dtype = st.selectbox("KV dtype", [same, *KV_DTYPE_CHOICES], key=f"cmp{index}_kv")
    tp = st.selectbox("tp", tps, index=tps.index(tp_default), key=f"cmp{index}_tp")
    changes: dict[str, Any] = {}
    if card != same:
        changes.update(card=card, memory_gib=None, bandwidth_gbps=None)
    if dtype != same:
        changes["dtype"] = dtype
    if kv_dtype != same:
        changes["kv_dtype"] = None if kv_dtype == "auto" else kv_dtype
    if tp != same:
        changes["tp"] = int(tp)
    return records.replace(base, **changes)


def plans(base: PlanRequest, tp: int) -> bool:
    """True when the sidebar's request at tensor-parallel size `tp` plans (the engine and the card run it)."""
    try:
        cached_plan(records.replace(base, tp=tp), None)
    except KvplanError:
        return False
    return True


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
                "TPOT ms": units.round_figures(units.s_to_ms(dashboard.tpot_s(perf))),
                "aggregate tok/s": units.round_figures(perf.tokens_per_s),
                "per-user tok/s": units.round_figures(perf.per_user_tokens_per_s),
                "TTFT ms": units.round_figures(units.s_to_ms(perf.ttft_s)),
            }
        )
    band = perf.speed_range if perf is not None else None
    if band is not None:  # each speed's range (the comparison charts draw it as error bars)
        row.update(
            {
                "speed source": band.label,
                "TPOT ms low": units.round_figures(units.s_to_ms(band.tpot_s_low)),
                "TPOT ms high": units.round_figures(units.s_to_ms(band.tpot_s_high)),
                "aggregate tok/s low": units.round_figures(band.tokens_per_s_low),
                "aggregate tok/s high": units.round_figures(band.tokens_per_s_high),
            }
        )
    return row


def show_compare(settings: Settings) -> None:
    """Two or three configurations side by side: the sidebar's, and variants of it."""
    _, card_ids = catalogue()
    count = st.radio("Configurations", [2, 3], index=1, horizontal=True, key="cmp_count")
    columns = st.columns(int(count))
    named: list[tuple[str, Deployment, Plan]] = []
    for index, column in enumerate(columns):
        with column:
            name = "ABC"[index]
            st.markdown(f"**{name}**" + (" · sidebar settings" if index == 0 else ""))
            req = settings.req if index == 0 else compare_request(index, settings.req, card_ids)
            try:
                named.append((name, *cached_plan(req, settings.prompt)))
            except KvplanError as exc:
                st.error(dashboard.dashboard_message(exc))
    if not named:
        return
    rows = [compare_row(name, plan) for name, _, plan in named]
    st.dataframe(rows, hide_index=True, width="stretch")
    charts = st.columns(3)
    charts[0].plotly_chart(
        fig_compare_memory([(name, dashboard.plan_memory_segments(plan)) for name, _, plan in named]),
        key="fig_cmp_memory",
    )
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
    from planner.perf import roofline

    batch = plan.performance.batch if plan.performance else plan.recommendation.max_batch_size
    ledger = roofline.decode_ledger(dep, batch=batch, ctx_tokens=plan.ctx_tokens)
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
        f"**Step total {units.fmt_duration(ledger.time_s)}**: HBM {units.fmt_bytes(ledger.hbm_bytes)}, "
        f"interconnect {units.fmt_bytes(ledger.link_bytes)}, {ledger.flop:.3g} FLOP."
    )
