"""One served model name for every config command: MindIE's modelName rule (model_deploy_config.cpp:423-443
@8b4871a) decides the default, `kvplan vllm` passes the same name, a name MindIE refuses is refused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from planner.cli import app
from planner.engines import registry
from planner.engines.mindie import rules as mindie_rules
from planner.errors import PlanInputError

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
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


@pytest.mark.parametrize("bad", ["my model", "a/b", "x" * 257, "_lead"])
def test_mindie_refuses_a_model_name_its_server_would_not_start_with(bad: str) -> None:
    result = runner.invoke(app, ["mindie", "-m", "qwen3-32b", *LAYOUT, "--model-name", bad])
    assert result.exit_code == 2
    line = result.output.strip().splitlines()[-1]
    assert "modelName" in line and "--model-name" in line and "Traceback" not in result.output
    assert len(line) < 400  # a 257-character name is shown cut


@pytest.mark.parametrize("command", ["mindie", "vllm", "sglang"])
@pytest.mark.parametrize("bad", ["-x", "a\nb", "tab\there"])
def test_no_engine_takes_a_name_read_as_a_flag_or_split_over_lines(command: str, bad: str) -> None:
    name = bad.encode().decode("unicode_escape")
    result = runner.invoke(app, [command, "-m", "qwen3-32b", *LAYOUT, "--model-name", name])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1].startswith("kvplan: error: --model-name: ")


def test_a_model_path_no_engine_names_falls_back_to_the_card_id(tmp_path: Path) -> None:
    """h63 finding 1: an explicit --model-name was refused when --model had no servable name."""
    card = tmp_path / "my cards" / "qwen3 tiny.yaml"
    card.parent.mkdir()
    card.write_text((ROOT / "modelcards" / "qwen3-0.6b.yaml").read_text())
    # the note speaks only of a name kvplan chose: a --model-name equal to that name is the user's own
    for extra, expected in (
        ([], "qwen3-0.6b"),
        (["--model-name", "ok"], "ok"),
        (["--model-name", "qwen3-0.6b"], "qwen3-0.6b"),
    ):
        name, served, notes = served_names(str(card), *extra)
        assert name == served == expected
        assert any(n.startswith("served as") for n in notes) == (not extra)


def test_the_default_name_has_a_note_only_when_it_is_not_as_typed() -> None:
    assert registry.default_served_name("qwen3-0.6b", card_id="qwen3-0.6b") == ("qwen3-0.6b", [])
    name, notes = registry.default_served_name("Qwen/Qwen3-32B", card_id="qwen3-32b")
    assert name == "Qwen3-32B"
    assert len(notes) == 1 and notes[0].startswith("served as 'Qwen3-32B': --model 'Qwen/Qwen3-32B'")


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=80))
def test_the_default_name_is_always_one_mindie_accepts(typed: str) -> None:
    name = registry.served_model_name(typed, card_id="qwen3-0.6b")
    assert re.fullmatch(mindie_rules.MODEL_NAME_PATTERN, name)


def test_a_card_id_no_engine_takes_asks_for_model_name() -> None:
    with pytest.raises(PlanInputError, match=r"^--model-name: required"):
        registry.served_model_name("cards/my model.yaml", card_id="my card")


@pytest.mark.parametrize("command", ["mindie", "vllm"])
def test_a_checkpoint_path_read_as_a_flag_is_refused(command: str) -> None:
    """h64: `--weights-path -h` printed `vllm serve -h`, which vLLM reads as its help flag."""
    words = [w for w in LAYOUT if w not in ("--weights-path", "/x")]
    result = runner.invoke(app, [command, "-m", "qwen3-32b", *words, "--weights-path=-h"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1].startswith("kvplan: error: --weights-path: printable")
