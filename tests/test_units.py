"""Token and unit parsing / formatting."""

from __future__ import annotations

import pytest

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
    assert units.fmt_ms(0.0632) == "63.2 ms"
    assert units.fmt_tokens(32768) == "32k (32768)"
    assert units.fmt_tokens(1000) == "1000"
    assert units.fmt_fraction(0.375) == "37.5 %"
