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
            profile = catalog.resolve_card(card_id, engine=engine, profile_engine=fit_engine)
            assert by_engine[engine] == profile.calibration_status
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


def test_an_engine_reading_another_engines_fit_keeps_its_own_software_costs() -> None:
    """SGLang on the 910C reads vllm-ascend's fit (registry.fitted_profile_engine): the fit's chip terms, but
    not what vllm-ascend's own software costs per request and per prefill pass (catalog.ENGINE_SOFTWARE_COSTS,
    the datasheet's values instead); the status says so. vllm itself keeps every fitted term."""
    fitted_for = registry.fitted_profile_engine("sglang")
    assert fitted_for == "vllm"
    own = catalog.resolve_card("ascend-910c", engine="vllm")
    borrowed = catalog.resolve_card("ascend-910c", engine="sglang", profile_engine=fitted_for)
    datasheet = catalog.load_card("ascend-910c").default_coefficients
    fit, read = own.coefficients(), borrowed.coefficients()
    for term in catalog.ENGINE_SOFTWARE_COSTS:
        assert getattr(fit, term) > getattr(datasheet, term) == getattr(read, term)
    chip = fit.model_dump(exclude=set(catalog.ENGINE_SOFTWARE_COSTS))
    assert chip == read.model_dump(exclude=set(catalog.ENGINE_SOFTWARE_COSTS))
    assert borrowed.calibration_status.startswith(own.calibration_status)
    assert "read by sglang without vllm's own per-request" in borrowed.calibration_status
