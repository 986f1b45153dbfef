"""One served model name for every config command: MindIE's modelName rule (model_deploy_config.cpp:423-443
@8b4871a) decides the default, `kvplan vllm` passes the same name, a name MindIE refuses is refused."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from planner.cli import app
from planner.engines import registry
from planner.engines.mindie import rules as mindie_rules
from planner.errors import PlanInputError

runner = CliRunner()
LAYOUT = ["--card", "ascend-910b3", "--dtype", "int8", "--tp", "4", "--weights-path", "/x", "--json"]


def served_names(model: str, *extra: str) -> tuple[str, str, list[str]]:
    """(MindIE's modelName, vLLM's --served-model-name, MindIE's notes) for the same flags."""
    mindie = runner.invoke(app, ["mindie", "-m", model, *LAYOUT, *extra])
    assert mindie.exit_code == 0, mindie.output
    payload = json.loads(mindie.output)["mindie"]
    name = payload["config"]["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["modelName"]
    vllm = runner.invoke(app, ["vllm", "-m", model, *LAYOUT, *extra])
    assert vllm.exit_code == 0, vllm.output
    served = dict(json.loads(vllm.output)["vllm"]["args"])["--served-model-name"]
    return name, served, payload["notes"]


@pytest.mark.parametrize(
    ("typed", "expected"),
    [("qwen3-32b", "qwen3-32b"), ("Qwen/Qwen3-32B", "Qwen3-32B"), ("modelcards/qwen3-32b.yaml", "qwen3-32b")],
)
def test_mindie_and_vllm_serve_one_name_that_mindie_accepts(typed: str, expected: str) -> None:
    name, served, notes = served_names(typed)
    assert name == served == expected
    assert re.fullmatch(mindie_rules.MODEL_NAME_PATTERN, name)
    renamed = [note for note in notes if note.startswith("served as")]
    assert bool(renamed) == (typed != expected)


def test_an_explicit_model_name_is_kept_by_both() -> None:
    name, served, _ = served_names("Qwen/Qwen3-32B", "--model-name", "q32")
    assert name == served == "q32"


@pytest.mark.parametrize("bad", ["my model", "-x-", "a/b", "x" * 257, "_lead"])
def test_mindie_refuses_a_model_name_its_server_would_not_start_with(bad: str) -> None:
    result = runner.invoke(app, ["mindie", "-m", "qwen3-32b", *LAYOUT, "--model-name", bad])
    assert result.exit_code == 2
    line = result.output.strip().splitlines()[-1]
    assert "modelName" in line and "--model-name" in line and "Traceback" not in result.output


def test_a_model_with_no_acceptable_name_asks_for_model_name() -> None:
    with pytest.raises(PlanInputError, match=r"^--model-name: required"):
        registry.served_model_name("cards/my model.yaml")


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=80))
def test_the_default_name_is_always_one_mindie_accepts_or_refused(typed: str) -> None:
    try:
        name = registry.served_model_name(typed)
    except PlanInputError as exc:
        assert str(exc).startswith("--model-name: ")
        return
    assert re.fullmatch(mindie_rules.MODEL_NAME_PATTERN, name)
