"""Plotly figure builders of the kvplan dashboard (app.py): one fig_*() per chart.

Drawing only: every number comes from planner/ (through dashboard/view.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go

from dashboard import view as dashboard
from dashboard.membar import SEGMENT_COLORS
from planner import units

if TYPE_CHECKING:
    from dashboard.view import MemorySegment

COMPARE_COLORS = ["#4C6EF5", "#F08C00", "#2F9E44"]


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


def _line(x: Any, y: Any, name: str, *, color: str, **style: Any) -> go.Scatter:
    """A data series drawn 3 px wide in `color`, with markers unless `style` says otherwise."""
    return go.Scatter(
        x=x, y=y, name=name, **{"mode": "lines+markers", **style}, line={"color": color, "width": 3}
    )


def band_traces(x: Any, low: Any, high: Any, name: str, *, color: str, **style: Any) -> list[go.Scatter]:
    """A translucent band between low and high (the range of a speed line, planner/perf/ranges.py): one
    closed outline, the upper edge left to right and the lower edge back, filled (plotly fill="toself").

    One trace per band rather than an invisible lower edge plus an upper edge filled to it ("tonexty"):
    the browser redraws half the traces when a control changes. Points where the line stops (NaN, past
    the memory limit) are left out of the outline, so the band ends where its line ends.
    """
    x, low, high = (np.asarray(v, dtype=float) for v in (x, low, high))
    drawn = np.isfinite(low) & np.isfinite(high)
    red, green, blue = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    outline = {
        "x": np.concatenate([x[drawn], x[drawn][::-1]]),
        "y": np.concatenate([high[drawn], low[drawn][::-1]]),
    }
    return [
        go.Scatter(
            **outline,
            name=f"{name} range",
            mode="lines",
            line={"width": 0, "color": color},
            hoverinfo="skip",
            fill="toself",
            fillcolor=f"rgba({red},{green},{blue},0.15)",
            **style,
        )
    ]


def fig_speed(
    curve: dashboard.SpeedCurve, *, knee: int, batch: int, tpot_slo_ms: float, slo_batch: int | None
) -> go.Figure:
    """Aggregate and per-user tokens/s vs batch, each with its range as a band, with the knee, the chosen
    batch and the TPOT SLO."""
    top = float(np.max(curve.tokens_per_s_high)) * 1.08
    slo_rate = dashboard.per_user_tokens_per_s_at(tpot_slo_ms * units.MS_S)
    fig = go.Figure()
    fig.add_traces(speed_curve_traces(curve))
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
    per_user_top = max(float(np.max(curve.per_user_tokens_per_s_high)), slo_rate) * 1.08
    fig.update_layout(speed_layout(curve, top=top, per_user_top=per_user_top))
    return fig


def speed_curve_traces(curve: dashboard.SpeedCurve) -> list[go.Scatter]:
    """Aggregate tok/s (left axis) and per-user tok/s (right axis), each a line over its range band."""
    aggregate, per_user = "#4C6EF5", "#F08C00"
    return [
        *band_traces(
            curve.batch, curve.tokens_per_s_low, curve.tokens_per_s_high, "aggregate tok/s", color=aggregate
        ),
        _line(curve.batch, curve.tokens_per_s, "aggregate tok/s", color=aggregate, marker={"size": 5}),
        *band_traces(
            curve.batch,
            curve.per_user_tokens_per_s_low,
            curve.per_user_tokens_per_s_high,
            "per-user tok/s",
            color=per_user,
            yaxis="y2",
        ),
        _line(
            curve.batch,
            curve.per_user_tokens_per_s,
            "per-user tok/s",
            color=per_user,
            mode="lines",
            yaxis="y2",
        ),
    ]


def speed_layout(curve: dashboard.SpeedCurve, *, top: float, per_user_top: float) -> dict[str, object]:
    """The speed chart's axes: log batch below, aggregate tok/s left, per-user tok/s right."""
    return {
        "height": 400,
        "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
        "legend": {"orientation": "h", "y": -0.22},
        "xaxis": {
            "title": "batch (concurrent sequences)",
            "type": "log",
            "tickvals": dashboard.powers_of_two_upto(int(curve.batch[-1])),
            "tickangle": 0,
        },
        "yaxis": {"title": "aggregate tokens/s", "range": [0, top]},
        "yaxis2": {
            "title": "per-user tokens/s",
            "overlaying": "y",
            "side": "right",
            "range": [0, per_user_top],
            "showgrid": False,
        },
    }


def ctx_labels(ctx_tokens: np.ndarray) -> list[str]:
    """Short axis labels of context lengths ("32k" rather than "32k tokens")."""
    return [units.fmt_tokens(int(c)).split(" ")[0] for c in ctx_tokens]


def fig_tpot_vs_ctx(grid: dashboard.FeasibilityGrid, *, tpot_slo_ms: float, ctx_tokens: int) -> go.Figure:
    """TPOT vs context length at batch 1 and at the plan's batch, each with its range as a band (lines stop
    where memory runs out)."""
    fig = go.Figure()
    for row, batch in enumerate(grid.batch):
        low, high = (units.s_to_ms(t[row]) for t in (grid.tpot_s_low, grid.tpot_s_high))
        fig.add_traces(
            band_traces(grid.ctx_tokens, low, high, f"batch {batch}", color=COMPARE_COLORS[row % 3])
        )
        fig.add_trace(
            _line(
                grid.ctx_tokens,
                units.s_to_ms(grid.tpot_s[row]),
                f"batch {batch}",
                color=COMPARE_COLORS[row % 3],
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
            "ticktext": ctx_labels(grid.ctx_tokens),
        },
        yaxis={"title": "TPOT (ms)", "rangemode": "tozero"},
    )
    return fig


def fig_feasibility(grid: dashboard.FeasibilityGrid, *, tpot_slo_ms: float) -> go.Figure:
    """Batch x context heatmap: TPOT where it fits (red beyond the SLO), blank where it does not."""
    tpot_ms = units.s_to_ms(grid.tpot_s)
    text = np.where(grid.fits, np.char.mod("%.0f", np.nan_to_num(tpot_ms)), "✗")
    labels = ctx_labels(grid.ctx_tokens)
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
            customdata=np.stack([units.s_to_ms(grid.tpot_s_low), units.s_to_ms(grid.tpot_s_high)], axis=-1),
            hovertemplate="batch %{y}, ctx %{x}<br>TPOT %{z:.1f} ms (range %{customdata[0]:.1f}-"
            "%{customdata[1]:.1f})<extra></extra>",
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
    """One bar per configuration for one metric, with its range as an error bar where the rows carry one
    (`<metric> low` / `<metric> high`)."""
    ranged = all(f"{metric} low" in r and f"{metric} high" in r for r in rows)
    error = {
        "type": "data",
        "symmetric": False,
        "array": [r[f"{metric} high"] - r[metric] for r in rows],
        "arrayminus": [r[metric] - r[f"{metric} low"] for r in rows],
    }
    fig = go.Figure(
        go.Bar(
            x=[r["config"] for r in rows],
            y=[r[metric] for r in rows],
            marker_color=COMPARE_COLORS[: len(rows)],
            text=[f"{r[metric]:,.1f}" for r in rows],
            textposition="outside",
            error_y=error if ranged else None,
        )
    )
    fig.update_layout(
        title=title, height=300, margin={"l": 10, "r": 10, "t": 40, "b": 10}, yaxis={"rangemode": "tozero"}
    )
    return fig


def fig_compare_memory(stacks: list[tuple[str, list[MemorySegment]]]) -> go.Figure:
    """Stacked memory bars side by side, one per configuration: (name, view.plan_memory_segments)."""
    fig = go.Figure()
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
