"""Speed ranges in the dashboard's words (pure: no streamlit, no plotly): the line under the speed metrics.

The ranges themselves come from planner/perf/ranges.py through the plan (Performance.speed_range) and
dashboard/view.py (the charts' band arrays).
"""

from __future__ import annotations

from typing import NamedTuple

from planner import units
from planner.results import Performance


def speed_range_text(perf: Performance) -> str:
    """One line under the speed metrics: each figure's range and where the figures come from."""
    band = perf.speed_range
    if band is None:
        return ""
    # TPOT as the metric shows it: one user's time per output token (MTP included), Performance.tpot_s;
    # each range holds its metric as the metric box prints it (fmt_figures: point_decimals None)
    tpot = (units.s_to_ms(band.tpot_s_low), units.s_to_ms(band.tpot_s_high), units.s_to_ms(perf.tpot_s))
    ttft = units.fmt_duration_span(
        band.ttft_s_low, band.ttft_s_high, point_s=perf.ttft_s, point_decimals=None
    )
    total = (band.tokens_per_s_low, band.tokens_per_s_high, perf.tokens_per_s)
    per_user = (band.per_user_tokens_per_s_low, band.per_user_tokens_per_s_high, perf.per_user_tokens_per_s)
    spans = [units.fmt_span(low, high, point=point) for low, high, point in (tpot, total, per_user)]
    extrapolated = ", extrapolated" if band.extrapolated else ""
    return (
        f"Range ({band.label}{extrapolated}): TPOT {spans[0]} ms, total {spans[1]} tok/s, per user "
        f"{spans[2]} tok/s, TTFT {ttft} ({band.ttft_source}). Source: {band.source}."
        + "".join(f" {note}." for note in band.notes)
    )


class TimeFactors(NamedTuple):
    """A speed range as multipliers of a time: decode (TPOT, step) and prefill (TTFT), each (fast, slow)."""

    decode_low: float
    decode_high: float
    prefill_low: float
    prefill_high: float


NO_RANGE = TimeFactors(1.0, 1.0, 1.0, 1.0)


def time_factors(perf: Performance | None) -> TimeFactors:
    """The plan's speed range as factors on a time, for figures that did not come from the plan itself
    (the Load tab's simulations run on the same step model, so its range carries over):

        decode time x [per_user / per_user_high, per_user / per_user_low]
        prefill time x [ttft_low / ttft, ttft_high / ttft]
    """
    band = None if perf is None else perf.speed_range
    if perf is None or band is None or perf.ttft_s <= 0 or perf.per_user_tokens_per_s <= 0:
        return NO_RANGE
    rate = perf.per_user_tokens_per_s
    return TimeFactors(
        decode_low=rate / band.per_user_tokens_per_s_high,
        decode_high=rate / band.per_user_tokens_per_s_low,
        prefill_low=band.ttft_s_low / perf.ttft_s,
        prefill_high=band.ttft_s_high / perf.ttft_s,
    )
