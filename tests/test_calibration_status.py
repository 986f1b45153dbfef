"""One calibration status per card and engine: `kvplan cards`, the plan and the dashboard read the same
HardwareProfile.calibration_status of the profile catalog.resolve_card picks for that engine (an engine that
borrows another's fit, SGLang on Ascend, reads that engine's: registry.fitted_profile_engine)."""

from __future__ import annotations

import json

import pytest

from planner import catalog
from planner.engines import registry
from planner.kinds import ENGINES
from tests.helpers import kvplan


def test_cards_shows_the_status_every_plan_uses() -> None:
    rows = json.loads(kvplan("cards --json").output)  # one row per card variant
    listed = {row["profile"]: row for row in rows}
    assert {row["profile"] for row in rows} == set(catalog.card_ids())
    for card_id in catalog.card_ids():
        by_engine = listed[card_id]["calibration"]
        assert set(by_engine) == set(ENGINES)
        for engine in ENGINES:
            fit_engine = registry.fitted_profile_engine(engine)
            assert by_engine[engine] == catalog.resolve_card(card_id, engine=fit_engine).calibration_status
        assert listed[card_id]["calibrated"] == any(s.startswith("calibrated") for s in by_engine.values())


@pytest.mark.parametrize(("card", "engine"), [("ascend-910c", "vllm"), ("ascend-910c", "mindie")])
def test_the_plan_header_agrees_with_cards(card: str, engine: str) -> None:
    """The 910C is fitted for vllm-ascend only: plans with --engine vllm say calibrated, MindIE ones not."""
    status = catalog.calibration_by_engine(card)[engine]
    header = kvplan(f"--model qwen3-8b --card {card} --engine {engine} --ctx 4k").output.splitlines()[0]
    word = "uncalibrated" if status.startswith("uncalibrated") else "calibrated"
    assert f", {word})" in header


def test_statuses_name_their_source() -> None:
    assert catalog.calibration_by_engine("ascend-950pr")["mindie"].startswith("calibrated: fit from")
    assert catalog.calibration_by_engine("nvidia-h200")["vllm"].startswith(
        "calibrated: measured by `kvplan calibrate` on NVIDIA H200"
    )
    assert catalog.calibration_by_engine("ascend-910b1")["mindie"].startswith("uncalibrated: datasheet")
