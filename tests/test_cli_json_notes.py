"""`kvplan serve --json` and `kvplan simulate --json` carry the notes their text prints, from the one list
each builds (serve_view.printed_notes, simview.printed_notes, simsearch.search_notes)."""

from __future__ import annotations

import json

import pytest

from tests.helpers import kvplan

# each prints several notes: the engine raised --max-prefill-tokens, the speed band is extrapolated; serve
# also queues users beyond the KV pool and speaks for one of two DP groups
CASES = {
    "serve": "serve -m qwen3-32b --input-tokens 1k --output-tokens 512 --dp 2 --concurrency 300 "
    "--max-prefill-tokens 512",
    "simulate": "simulate -m qwen3-32b --rate 1 --input-tokens 1k --output-tokens 512 --requests 50 "
    "--max-prefill-tokens 512",
    "simulate --search": "simulate -m qwen3-32b --search max-concurrency --concurrency 8 --ttft-ms 2000 "
    "--input-tokens 1k --output-tokens 512 --requests 50",
}


def text_notes(stdout: str) -> list[str]:
    """The text's `note:` lines, without the word."""
    return [line.removeprefix("note: ") for line in stdout.splitlines() if line.startswith("note: ")]


@pytest.mark.parametrize("case", sorted(CASES))
def test_json_notes_equal_the_text_notes(case: str) -> None:
    text = text_notes(kvplan(CASES[case]).stdout)
    payload = json.loads(kvplan(CASES[case] + " --json").stdout)
    assert text != []
    assert payload["notes"] == text


def test_serve_notes_name_each_kind() -> None:
    notes = " | ".join(json.loads(kvplan(CASES["serve"] + " --json").stdout)["notes"])
    for words in ("at full length", "queue:", "dp=2:", "--max-prefill-tokens 512 raised", "extrapolated"):
        assert words in notes
