"""Token and unit parsing / formatting."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import units


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("32768", 32768),
        ("32k", 32768),
        ("32K", 32768),
        ("128K", 131072),
        ("1m", 1048576),
        ("0.5k", 512),
        (" 4k ", 4096),
    ],
)
def test_parse_tokens(text: str, tokens: int) -> None:
    assert units.parse_tokens(text) == tokens


@pytest.mark.parametrize("text", ["32q", "", "k", "-4k", "0", "1.3", "32 kb", "0.0001k"])
def test_parse_tokens_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="expected a whole number"):
        units.parse_tokens(text)


def test_formatting() -> None:
    assert units.fmt_gib(3 * 2**30) == "3.00 GiB"
    assert units.fmt_bytes(65536) == "64.00 KiB"
    assert units.fmt_bytes(12) == "12 B"
    assert units.fmt_duration(0.0632) == "63.2 ms"
    assert units.fmt_duration(9.8765) == "9876.5 ms"
    assert units.fmt_duration(6195.1379) == "6,195.1 s"  # an overloaded queue's TTFT, not 6195137.9 ms
    assert units.fmt_duration_span(0.099, 0.231) == "99.0-231 ms"
    assert units.fmt_duration_span(4425.1, 10325.2) == "4,425-10,326 s"
    assert units.fmt_tokens(32768) == "32k (32768)"
    assert units.fmt_tokens(1000) == "1000"
    assert units.fmt_fraction(0.375) == "37.5 %"


@given(
    st.floats(min_value=1e-4, max_value=1e7, allow_nan=False, allow_infinity=False),
    st.floats(min_value=1.0, max_value=50.0),
)
def test_a_printed_span_holds_the_range_it_prints(low: float, ratio: float) -> None:
    """fmt_span rounds outward: the printed low is at most the low, the printed high at least the high (to
    float noise: 1.65 stands for 1.6500000000000001), so a point estimate inside the range never prints
    outside it (28.8 ms in a range from 28.81 ms read "29-107")."""
    high = low * ratio
    printed = units.fmt_span(low, high).split("-")
    printed_low, printed_high = (float(part.replace(",", "")) for part in printed)
    assert printed_low <= low * (1 + 1e-12) and printed_high >= high * (1 - 1e-12)
    assert printed_low >= low * 0.99 - 1 and printed_high <= high * 1.01 + 1  # still about 3 figures


def test_span_examples() -> None:
    assert units.fmt_span(28.81, 107.2) == "28.8-108"
    assert units.fmt_span(1204.4, 15446.2) == "1,204-15,447"
    assert units.fmt_span(15.3, 15.3) == "15.3-15.3"


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=1e-6, max_value=1e9, allow_nan=False, allow_infinity=False))
def test_figures_keep_about_three_significant_figures(value: float) -> None:
    """fmt_figures never shows a positive value as 0 and stays within half a unit of its last printed
    figure (0.04 tok/s of a 1 GB/s card printed "0" before)."""
    printed = float(units.fmt_figures(value).replace(",", ""))
    assert printed > 0
    assert abs(printed - value) <= max(value * 0.006, 0.5 if value >= 100 else 0)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(min_value=1e-6, max_value=1e9, allow_nan=False, allow_infinity=False),
    st.floats(min_value=1.0, max_value=10.0),
)
def test_rounded_figures_keep_order_and_stay_positive(value: float, ratio: float) -> None:
    """round_figures keeps a range's order (low <= value <= high stays so after rounding) and a positive
    value positive, so a bar never leaves its error bar and a slow card's rate is not 0."""
    rounded = units.round_figures(value)
    assert rounded > 0 and units.round_figures(value * ratio) >= rounded


def test_figures_examples() -> None:
    assert units.fmt_figures(0.04321) == "0.0432"
    assert units.fmt_figures(26.54) == "26.5"
    assert units.fmt_figures(1204.4) == "1,204"
    assert units.round_figures(0.04321) == 0.0432 and units.round_figures(1204.4) == 1204


@given(st.floats(min_value=0.0, max_value=1e7, allow_nan=False))
def test_a_printed_duration_reads_back_within_its_last_digit(seconds: float) -> None:
    """fmt_duration's text, read back in its own unit, is the time to within half its last printed digit."""
    text = units.fmt_duration(seconds)
    number, unit = text.rsplit(" ", 1)
    value_s = float(number.replace(",", "")) * (units.MS_S if unit == "ms" else 1.0)
    half_digit_s = 0.05 * (units.MS_S if unit == "ms" else 1.0)
    assert abs(value_s - seconds) <= half_digit_s + 1e-9 * seconds
    assert (unit == "s") == (seconds >= units.SECONDS_FROM_S)
