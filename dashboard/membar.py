"""The Memory tab's stacked bar of the device memory as plain HTML (st.html), not a plotly chart.

The first page of a new browser session shows the headline and the Memory tab. Drawing its one bar with
plotly made every new session load and run plotly.js (about 3.5 MB of script) in the browser: on the
project's 2-core machine that was most of the first page's time (docs/dashboard.md, benchmarks/
bench_dashboard.py). A bar of <div>s costs the browser nothing, so plotly loads only when a tab with a
real chart (Speed, Load, Compare) is opened.

Drawing only: every size comes from planner/ through dashboard/view.py. No streamlit, no plotly here.
"""

from __future__ import annotations

import html

from dashboard import view as dashboard
from planner import units

SEGMENT_COLORS = {
    "weights": "#4C6EF5",
    "KV cache": "#F08C00",
    "linear-attention state": "#FFC078",
    "activation headroom": "#AE3EC9",
    "runtime": "#868E96",
    "free (KV budget left)": "#D3F9D8",
    "reserve": "#E9ECEF",
}
DEFAULT_COLOR = "#ADB5BD"
GUIDELINE_COLOR = "#2F9E44"
LABEL_MIN_FRACTION = 0.04  # label a memory segment only when it spans 4 % of the bar
DARK_TEXT_MIN_LUMINANCE = 0.6  # segments lighter than this get dark text, the others white
BAR_CLASS = "kvplan-membar"  # the browser test and the benchmark wait for this element
PERCENT = 100.0  # CSS widths are percentages of the bar


def relative_luminance(color: str) -> float:
    """Perceived lightness of a #RRGGBB colour in [0, 1] (Rec. 709 weights on the 8-bit channels)."""
    red, green, blue = (int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def segment_div(seg: dashboard.MemorySegment, *, capacity_bytes: int) -> str:
    """One segment: width = its share of the capacity, its GiB inside when wide enough, a hover title."""
    gib = units.bytes_to_gib(seg.size_bytes)
    color = SEGMENT_COLORS.get(seg.label, DEFAULT_COLOR)
    ink = "#212529" if relative_luminance(color) > DARK_TEXT_MIN_LUMINANCE else "#FFFFFF"
    width = PERCENT * seg.size_bytes / capacity_bytes
    text = f"{gib:.1f}" if seg.size_bytes > capacity_bytes * LABEL_MIN_FRACTION else ""
    title = html.escape(f"{seg.label}: {gib:.2f} GiB. {seg.note}", quote=True)
    return (
        f'<div class="{BAR_CLASS}-segment" title="{title}" style="flex:0 0 {width:.4f}%;background:{color};'
        f"color:{ink};display:flex;align-items:center;justify-content:center;overflow:hidden;"
        f'font-size:0.8rem;white-space:nowrap">{text}</div>'
    )


def legend_html(segments: list[dashboard.MemorySegment]) -> str:
    """Colour swatch and label of each segment, in bar order."""
    items = "".join(
        f'<span style="display:inline-flex;align-items:center;margin-right:1rem">'
        f'<span style="width:0.8rem;height:0.8rem;margin-right:0.3rem;border:1px solid #CED4DA;'
        f'background:{SEGMENT_COLORS.get(s.label, DEFAULT_COLOR)}"></span>{html.escape(s.label)}</span>'
        for s in segments
    )
    return f'<div style="font-size:0.85rem;margin-top:0.4rem;line-height:1.6">{items}</div>'


def memory_bar_html(
    segments: list[dashboard.MemorySegment],
    *,
    capacity_bytes: int,
    kv_start_bytes: int,
    guideline: tuple[float, float],
) -> str:
    """One stacked horizontal bar of the device memory, with the KV guideline band drawn over it.

    Segment widths are size_bytes / capacity_bytes (the segments sum to the capacity,
    dashboard.memory_segments). The band spans kv_start + f * capacity for f in the guideline fractions:
    where the KV segment should end by the seed article's rule of thumb.
    """
    low, high = (PERCENT * (kv_start_bytes + f * capacity_bytes) / capacity_bytes for f in guideline)
    low, high = min(low, PERCENT), min(high, PERCENT)
    band_label = f"KV should end here ({guideline[0]:.0%}-{guideline[1]:.0%} of the card)"
    bar = "".join(segment_div(s, capacity_bytes=capacity_bytes) for s in segments)
    capacity = units.bytes_to_gib(capacity_bytes)
    return (
        f'<div class="{BAR_CLASS}" style="position:relative;padding-top:1.5rem;font-family:inherit">'
        f'<div style="position:absolute;top:0;left:{(low + high) / 2:.3f}%;transform:translateX(-50%);'
        f'white-space:nowrap;font-size:0.8rem;color:{GUIDELINE_COLOR}">{html.escape(band_label)}</div>'
        f'<div style="display:flex;height:3rem;border-radius:4px;overflow:hidden">{bar}</div>'
        f'<div style="position:absolute;top:1.25rem;height:3.5rem;left:{low:.3f}%;width:{high - low:.3f}%;'
        f"border:2px dashed {GUIDELINE_COLOR};background:rgba(47,158,68,0.10);box-sizing:border-box;"
        f'pointer-events:none"></div>'
        f'<div style="display:flex;justify-content:space-between;font-size:0.8rem;color:#868E96;'
        f'margin-top:0.3rem"><span>0</span><span>GiB per device</span><span>{capacity:.1f}</span></div>'
        f"{legend_html(segments)}</div>"
    )


def memory_table_html(segments: list[dashboard.MemorySegment]) -> str:
    """The bar's segments as a small static table (item, GiB, note): plain HTML, so the first page needs
    none of st.dataframe's or st.table's Arrow scripts."""
    cell = "padding:0.2rem 0.5rem;border-bottom:1px solid #E9ECEF;text-align:left;vertical-align:top"
    head = "".join(f'<th style="{cell}">{name}</th>' for name in ("item", "GiB", "note"))
    rows = "".join(
        f'<tr><td style="{cell};white-space:nowrap">{html.escape(s.label)}</td>'
        f'<td style="{cell};text-align:right">{units.bytes_to_gib(s.size_bytes):.2f}</td>'
        f'<td style="{cell}">{html.escape(s.note)}</td></tr>'
        for s in segments
    )
    return (
        f'<table class="{BAR_CLASS}-table" style="border-collapse:collapse;font-size:0.85rem;width:100%">'
        f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    )
