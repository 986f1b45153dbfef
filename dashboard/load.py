"""The Load tab: the serving simulator (planner/sim/) under the sidebar's deployment.

Latency CDFs and percentiles vs concurrency, the throughput-latency curve with the SLO line, KV occupancy over
time, and aggregated vs P:D-disaggregated side by side at one request rate. Every simulation is cached.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from dashboard import bands
from dashboard.words import dashboard_message
from planner import inputs, records, units
from planner.deployment import DEFAULT_MAX_PREFILL_TOKENS
from planner.engines import registry
from planner.errors import KvplanError, PlanInputError
from planner.inputs import PlanRequest
from planner.kinds import ENGINES, parse_engine
from planner.results import Plan
from planner.sim import instance, metrics, pdloop, pdspec, run
from planner.sim import workload as wl

CONCURRENCY_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# P:D fleet steps the Load tab simulates per change, at most (~50 us each: a few seconds); the CLI's budget
# is instance.MAX_ENGINE_LOOPS per engine. 131072 + 32768-token requests at 1:3 took 524 000 steps (24 s).
PAGE_PD_LOOPS = 100_000
REQUESTS_PER_USER = 12  # closed-loop requests per user: enough for P99 without slowing the page
MIN_REQUESTS = 120


def deployment_for(req: PlanRequest, *, prompt: int, output: int, engine: str) -> Any:
    """The sidebar's deployment at ctx = prompt + output for the chosen engine."""
    longest = prompt + output
    changed = records.replace(
        req,
        ctx=str(longest),
        batch=None,
        engine=engine,
        max_prefill_tokens=max(longest, DEFAULT_MAX_PREFILL_TOKENS),
    )
    return inputs.to_deployment(changed)


def workload(prompt: int, output: int, *, users: int | None, rate: float | None, count: int) -> wl.Workload:
    """Fixed lengths; a closed loop of `users` or Poisson at `rate` (seed 0)."""
    lengths = (wl.LengthDist("fixed", prompt, prompt), wl.LengthDist("fixed", output, output))
    work = wl.synthetic(lengths=lengths, count=count, rate_per_s=rate, seed=0)
    if users is None:
        return work
    return wl.Workload(work.input_tokens, work.output_tokens, arrival_s=None, concurrency=users)


@st.cache_data(show_spinner="Simulating...", max_entries=64)
def closed_loop(req: PlanRequest, engine: str, prompt: int, output: int, users: int) -> dict[str, Any]:
    """One closed-loop simulation, reduced to what the figures plot."""
    dep = deployment_for(req, prompt=prompt, output=output, engine=engine)
    count = max(REQUESTS_PER_USER * users, MIN_REQUESTS)
    result = run.simulate(dep, workload(prompt, output, users=users, rate=None, count=count))
    return reduced(result)


@st.cache_data(show_spinner="Simulating...", max_entries=32)
def open_loop(
    req: PlanRequest, engine: str, shape: tuple[int, int, float, int], split: str | None
) -> dict[str, Any]:
    """Poisson at a rate, aggregated (split None) or disaggregated P:D; shape = (prompt, output, rate, n)."""
    prompt, output, rate, count = shape
    dep = deployment_for(req, prompt=prompt, output=output, engine=engine)
    work = workload(prompt, output, users=None, rate=rate, count=count)
    if split is None:
        return reduced(run.simulate(dep, work))
    spec = pdspec.spec_for(dep, counts=pdspec.parse_pd(split))
    try:  # back-pressure, as the CLI; within the page's step budget
        fleet = pdloop.simulate_fleet(spec, work, slo=(None, None), knobs={}, max_loops=PAGE_PD_LOOPS)
    except pdloop.StepBudgetError:
        raise PlanInputError(
            f"P:D instances {split}: {count} requests of {prompt} + {output} tokens at {rate:g} req/s need "
            f"more than {PAGE_PD_LOOPS} simulator steps, too many for the page; simulate them with `kvplan "
            "simulate` and its --pd option, or shorten the requests"
        ) from None
    return reduced(fleet)


def reduced(result: instance.SimResult) -> dict[str, Any]:
    """Summary, sorted latencies (CDFs) and the KV / batch timeline of one simulation."""
    timeline = metrics.downsampled(result.timeline, points=600)
    return {
        "summary": result.summary,
        "ttft": np.sort(result.records.ttft_s),
        "e2e": np.sort(result.records.e2e_s),
        "time": timeline.time_s,
        "kv": timeline.used_blocks / result.summary.scheduler.total_blocks,
        "batch": timeline.batch,
    }


def fig_cdf(runs: dict[str, dict[str, Any]], key: str, title: str) -> go.Figure:
    """Latency CDF per run, drawn as steps on a log time axis (runs of equal requests bunch up: on a linear
    axis their CDFs are near-vertical lines)."""
    fig = go.Figure()
    for name, data in runs.items():
        values = data[key] / units.MS_S
        fig.add_scatter(
            x=values, y=np.arange(1, values.size + 1) / values.size, mode="lines", line_shape="hv", name=name
        )
    fig.update_layout(title=title, xaxis_title="ms (log)", xaxis_type="log",
                      yaxis_title="fraction of requests", height=340)  # fmt: skip
    return fig


def _band(fig: go.Figure, x: list[Any], low: list[float], high: list[float], *, name: str) -> None:
    """A translucent range band between low and high (the plan's speed range, dashboard.bands)."""
    edge = {"mode": "lines", "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False}
    fig.add_scatter(x=x, y=low, **edge)
    fig.add_scatter(x=x, y=high, fill="tonexty", fillcolor="rgba(99,110,250,0.15)", name=name, **edge)


def fig_tails(points: dict[int, dict[str, Any]], *, slo_ms: float, factors: bands.TimeFactors) -> go.Figure:
    """P50/P95/P99 TTFT vs concurrency, the P99 inside its range, with the TTFT SLO line."""
    users = list(points)
    fig = go.Figure()
    p99 = [points[u]["summary"].ttft_s.p99 / units.MS_S for u in users]
    _band(fig, users, [t * factors.prefill_low for t in p99], [t * factors.prefill_high for t in p99],
          name="P99 range")  # fmt: skip
    for quantile in ("p50", "p95", "p99"):
        ttft = [getattr(points[u]["summary"].ttft_s, quantile) / units.MS_S for u in users]
        fig.add_scatter(x=users, y=ttft, mode="lines+markers", name=f"TTFT {quantile.upper()}")
    fig.add_hline(y=slo_ms, line_dash="dash", annotation_text="TTFT SLO")
    fig.update_layout(title="TTFT tails vs concurrency", xaxis_type="log", xaxis_title="users",
                      yaxis_title="ms", height=340)  # fmt: skip
    return fig


def fig_e2e(points: dict[int, dict[str, Any]], *, factors: bands.TimeFactors) -> go.Figure:
    """P50/P99 end-to-end latency vs concurrency; the P99 range scales its TTFT part by the prefill
    factors and the rest (decode) by the decode factors."""
    users = list(points)
    summaries = [points[u]["summary"] for u in users]
    e2e = [s.e2e_s.p99 / units.MS_S for s in summaries]
    ttft = [min(s.ttft_s.p99 / units.MS_S, total) for s, total in zip(summaries, e2e, strict=True)]
    low = [t * factors.prefill_low + (e - t) * factors.decode_low for t, e in zip(ttft, e2e, strict=True)]
    high = [t * factors.prefill_high + (e - t) * factors.decode_high for t, e in zip(ttft, e2e, strict=True)]
    fig = go.Figure()
    _band(fig, users, low, high, name="P99 range")
    for quantile in ("p50", "p99"):
        values = [getattr(s.e2e_s, quantile) / units.MS_S for s in summaries]
        fig.add_scatter(x=users, y=values, mode="lines+markers", name=f"E2E {quantile.upper()}")
    fig.update_layout(title="End-to-end latency vs concurrency", xaxis_type="log", xaxis_title="users",
                      yaxis_title="ms", height=340)  # fmt: skip
    return fig


def fig_throughput_latency(
    points: dict[int, dict[str, Any]], *, slo_ms: float, factors: bands.TimeFactors
) -> go.Figure:
    """Output tok/s against P99 TPOT, one point per concurrency with its range as error bars, and the
    TPOT SLO line."""
    summaries = [points[u]["summary"] for u in points]
    tpot = np.array([s.tpot_s.p99 / units.MS_S for s in summaries])
    rate = np.array([s.throughput.output_tokens_per_s for s in summaries])
    fig = go.Figure()
    fig.add_scatter(
        x=tpot,
        y=rate,
        mode="lines+markers+text",
        text=[str(u) for u in points],
        textposition="top center",
        name="users",
        error_x={"type": "data", "symmetric": False, "array": tpot * (factors.decode_high - 1),
                 "arrayminus": tpot * (1 - factors.decode_low), "thickness": 1},
        error_y={"type": "data", "symmetric": False, "array": rate * (1 / factors.decode_low - 1),
                 "arrayminus": rate * (1 - 1 / factors.decode_high), "thickness": 1},
    )  # fmt: skip
    fig.add_vline(x=slo_ms, line_dash="dash", annotation_text="TPOT SLO")
    fig.update_layout(title="Throughput vs P99 TPOT (bars: range)", xaxis_title="P99 TPOT (ms)",
                      yaxis_title="output tok/s", height=340)  # fmt: skip
    return fig


def fig_kv(runs: dict[str, dict[str, Any]]) -> go.Figure:
    """KV block occupancy over time per run (decode instance 0 for P:D)."""
    fig = go.Figure()
    for name, data in runs.items():
        fig.add_scatter(x=data["time"], y=data["kv"], mode="lines", name=name)
    fig.update_layout(title="KV blocks in use", xaxis_title="s", yaxis_title="fraction of the pool",
                      yaxis_range=[0, 1.02], height=340)  # fmt: skip
    return fig


# Column formats of the aggregated vs disaggregated table (no raw floats on the page).
TABLE_COLUMNS = {
    "P95 TTFT ms": st.column_config.NumberColumn(format="%.0f"),
    "P99 TPOT ms": st.column_config.NumberColumn(format="%.1f"),
    "output tok/s": st.column_config.NumberColumn(format="%.0f"),
    "preemptions": st.column_config.NumberColumn(format="%d"),
}


def table_row(name: str, summary: metrics.SimSummary) -> dict[str, Any]:
    """One row of the aggregated vs disaggregated table (ms, tok/s)."""
    return {
        "": name,
        "P95 TTFT ms": summary.ttft_s.p95 / units.MS_S,
        "P99 TPOT ms": summary.tpot_s.p99 / units.MS_S,
        "output tok/s": summary.throughput.output_tokens_per_s,
        "preemptions": summary.preemptions,
    }


def show_load(settings: Any, plan: Plan) -> None:
    """The tab: controls, the concurrency sweep, and aggregated vs disaggregated."""
    req: PlanRequest = settings.req
    factors = bands.time_factors(plan.performance)
    left, middle, right = st.columns(3)
    # the simulator's schedulers, one per engine room (transformers serves through vLLM's)
    schedulers = list(dict.fromkeys(registry.room(name).SCHEDULER for name in ENGINES))
    chosen = registry.room(parse_engine(req.engine)).SCHEDULER
    engine = left.selectbox(
        f"Engine scheduler (sidebar: {req.engine})",
        schedulers,
        index=schedulers.index(chosen),
        key="load_engine",
    )
    prompt = int(middle.number_input("Prompt tokens", 1, 131072, 256, key="load_prompt"))
    output = int(right.number_input("Output tokens", 1, 32768, 128, key="load_output"))
    users = st.multiselect(
        "Concurrency (closed loop)", CONCURRENCY_CHOICES, [1, 8, 32, 64, 128], key="load_users"
    )
    if prompt + output > plan.ctx_tokens:
        st.warning(
            f"Prompt + output tokens ({prompt + output}) are longer than the plan's context "
            f"({plan.ctx_tokens}): this tab plans its own deployment at that length, which the sidebar's "
            "config would refuse."
        )
    points = {u: closed_loop(req, engine, prompt, output, u) for u in sorted(users)}
    if points:
        one, two = st.columns(2)
        one.plotly_chart(fig_tails(points, slo_ms=settings.ttft_slo_ms, factors=factors), width="stretch")
        two.plotly_chart(
            fig_throughput_latency(points, slo_ms=settings.tpot_slo_ms, factors=factors), width="stretch"
        )
        st.plotly_chart(fig_e2e(points, factors=factors), width="stretch")
    show_disaggregated(req, engine, prompt, output)
    st.caption(
        "Simulated on the planner's own step model (uncalibrated cards: datasheet x assumed efficiencies). "
        "Assumptions: " + "; ".join(instance.ASSUMPTIONS)
    )


def show_disaggregated(req: PlanRequest, engine: str, prompt: int, output: int) -> None:
    """Aggregated vs P:D at one Poisson rate: TTFT CDFs and KV occupancy side by side."""
    left, right = st.columns(2)
    rate = float(left.number_input("Request rate (req/s)", 0.01, 1000.0, 2.0, key="load_rate"))
    split = right.selectbox("P:D instances", ["1:1", "1:2", "2:1", "1:3"], key="load_pd")
    shape = (prompt, output, rate, 400)
    try:
        runs = {
            "aggregated": open_loop(req, engine, shape, None),
            f"P:D {split}": open_loop(req, engine, shape, split),
        }
    except KvplanError as exc:
        st.error(dashboard_message(exc))
        return
    one, two = st.columns(2)
    one.plotly_chart(fig_cdf(runs, "ttft", "TTFT CDF"), width="stretch")
    two.plotly_chart(fig_kv(runs), width="stretch")
    rows = [table_row(name, d["summary"]) for name, d in runs.items()]
    st.dataframe(rows, hide_index=True, width="stretch", column_config=TABLE_COLUMNS)
    for note in runs[f"P:D {split}"]["summary"].notes:  # what its TTFT is, what P:D here is not
        st.caption(note)
