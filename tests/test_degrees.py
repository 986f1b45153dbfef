"""planner/degrees.py: the parallel degrees every layout record carries, and carried()."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner import records
from planner.degrees import DEGREES, Degrees, carried
from planner.deployment import Deployment
from planner.inputs import REQUEST_ECHOES, PlanRequest, to_deployment
from planner.plan.compose import PLAN_ECHOES
from planner.results import Plan
from planner.schema import Frozen


def test_degrees_are_frozen_like_every_record() -> None:
    assert Degrees.model_config == Frozen.model_config
    with pytest.raises(ValidationError):
        Degrees(tp=2, sp=2)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        Degrees(tp=0)


def test_carried_hands_same_named_fields_over() -> None:
    dep = to_deployment(PlanRequest(model="qwen3-32b", card="ascend-910b4", tp=2, dp=2, pp=2, engine="vllm"))
    assert carried(dep, DEGREES) == {"tp": 2, "dp": 2, "ep": 1, "pp": 2}
    assert Degrees(**carried(dep, DEGREES)) == Degrees(tp=2, dp=2, pp=2)


def test_echoed_fields_exist_on_both_records() -> None:
    """Every name the boundary and the plan pass by name is a field of both records."""
    request_fields = set(records.field_names(PlanRequest))
    assert set(REQUEST_ECHOES) <= request_fields & set(Deployment.model_fields)
    assert set(PLAN_ECHOES) <= set(Deployment.model_fields) & set(Plan.model_fields)
