"""lab/published/megagdn-ttft.csv (held-out single-prompt TTFTs on one 910B2, README there) is well
formed, and lab/accuracy/ttft_megagdn.py's chunked-GDN prefill term brings the 27B's long-prompt TTFT closer
to the measurement than the model without it. Predictions are computed here with the script's own function."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Any

import pytest

from planner import catalog, inputs
from planner.kinds import ENGINES

COLUMNS = [
    "model", "card", "dtype", "tp", "engine", "prompt_tokens", "ttft_s",
    "source_repo", "source_path", "source_commit", "notes",
]  # fmt: skip
CSV_PATH = Path(__file__).resolve().parents[1] / "lab" / "published" / "megagdn-ttft.csv"
with CSV_PATH.open(newline="", encoding="utf-8") as _handle:
    ROWS = list(csv.DictReader(_handle))
pytestmark = pytest.mark.lab  # checks a lab corpus and its script (lab/accuracy/ttft_megagdn.py)


@pytest.fixture(scope="module")
def ttft_megagdn():  # type: ignore[no-untyped-def]
    """The lab script, imported only when a lab check runs."""
    from lab.accuracy import ttft_megagdn as script

    return script


HF_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
CHUNKED_GDN_MODEL = "Qwen/Qwen3.6-27B"  # the hybrid model whose long prompts are mostly GDN + GEMM time
LONG_PROMPT_TOKENS = 8192  # below this the fixed per-request cost, not modelled, dominates the measurement


def test_columns_exact(ttft_megagdn: Any) -> None:
    with ttft_megagdn.CSV_PATH.open(newline="", encoding="utf-8") as handle:
        header = handle.readline().strip().split(",")
    assert header == COLUMNS
    assert ROWS, "no rows"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['model']}@{r['prompt_tokens']}")
def test_row_fields(row: dict[str, str]) -> None:
    assert HF_ID.match(row["model"]), row["model"]
    assert row["card"] in catalog.card_ids()
    assert inputs.parse_weight_scheme(row["dtype"]) == row["dtype"]
    assert int(row["tp"]) >= 1
    assert row["engine"] in ENGINES
    assert int(row["prompt_tokens"]) > 0
    ttft_s = float(row["ttft_s"])
    assert math.isfinite(ttft_s) and ttft_s > 0
    assert HF_ID.match(row["source_repo"]), row["source_repo"]
    assert row["source_path"].endswith(".jsonl") and not row["source_path"].startswith("/")
    assert COMMIT.match(row["source_commit"]), row["source_commit"]
    assert row["notes"].strip()


def test_one_row_per_model_and_prompt() -> None:
    keys = [(r["model"], r["prompt_tokens"]) for r in ROWS]
    assert len(keys) == len(set(keys))


def test_ttft_grows_with_prompt() -> None:
    """A harvested number in the wrong row or unit shows as a TTFT that falls when the prompt grows."""
    for model in {r["model"] for r in ROWS}:
        series = sorted((int(r["prompt_tokens"]), float(r["ttft_s"])) for r in ROWS if r["model"] == model)
        ttfts = [t for _, t in series]
        assert ttfts == sorted(ttfts), model


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['model']}@{r['prompt_tokens']}")
def test_notes_say_not_predicted_exactly_when_no_card(row: dict[str, str], ttft_megagdn: Any) -> None:
    reason = ttft_megagdn.skip_reason(row)
    assert ("not predicted" in row["notes"]) == (reason is not None), (row["model"], reason)


LONG_27B = [
    r for r in ROWS if r["model"] == CHUNKED_GDN_MODEL and int(r["prompt_tokens"]) >= LONG_PROMPT_TOKENS
]


def test_long_27b_rows_exist() -> None:
    assert len(LONG_27B) >= 2


@pytest.mark.parametrize("row", LONG_27B, ids=lambda r: r["prompt_tokens"])
def test_chunked_gdn_brings_27b_closer(row: dict[str, str], ttft_megagdn: Any) -> None:
    measured_s = float(row["ttft_s"])
    with_gdn_s = ttft_megagdn.predicted_ttft_s(row, profile="datasheet")
    without_gdn_s = ttft_megagdn.predicted_ttft_s(row, profile="no-chunked-gdn")
    assert with_gdn_s > without_gdn_s  # the term adds device time; equal would mean it was not applied
    assert abs(ttft_megagdn.error_fraction(with_gdn_s, measured_s)) < abs(
        ttft_megagdn.error_fraction(without_gdn_s, measured_s)
    )


def test_without_chunked_gdn_clears_only_that_field(ttft_megagdn: Any) -> None:
    row = LONG_27B[0]
    shipped = ttft_megagdn.deployment(row, profile="datasheet")
    cleared = ttft_megagdn.deployment(row, profile="no-chunked-gdn")
    before = shipped.hardware.coefficients(calibrated=shipped.calibrated)
    after = cleared.hardware.coefficients(calibrated=cleared.calibrated)
    assert before.chunked_gdn_ns_per_head_token is not None
    assert after == before.model_copy(update={"chunked_gdn_ns_per_head_token": None})
