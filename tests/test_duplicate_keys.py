"""A key given twice in a data file or a JSON flag is one clear error naming where, never "the last one
wins": YAML cards and profiles, JSON bench results and configs (planner/readers.py), --speculative-config."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner import readers
from planner.cli import app
from planner.errors import DataFileError

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_yaml_and_json_refuse_a_key_given_twice() -> None:
    with pytest.raises(DataFileError, match=r"^f.yaml: line 3: key 'a' given twice in one mapping"):
        readers.parse_yaml("a: 1\nb: {c: 2}\na: 3\n", where="f.yaml")
    with pytest.raises(DataFileError, match=r"^f.yaml: line 1: key 'c' given twice"):
        readers.parse_yaml("b: {c: 2, c: 3}\n", where="f.yaml")
    with pytest.raises(DataFileError, match=r"^f.json: key 'x' given twice in one object"):
        readers.parse_json('{"x": 1, "y": {"x": 2}, "x": 3}', where="f.json")
    text = '{\n  "x": 1,\n  "y": {"x": 2},\n  "x": 3\n}'
    with pytest.raises(DataFileError, match=r"given twice in one object \(the key is on lines 2, 3, 4\)"):
        readers.parse_json(text, where="f.json")  # lines 2 and 4 hold the repeat; line 3 another object's
    nested = readers.parse_json('{"x": {"y": 1}, "z": {"y": 2}}', where="f.json")
    assert nested == {"x": {"y": 1}, "z": {"y": 2}}  # the same key in two objects is fine


def test_a_model_card_with_a_key_twice_is_refused_in_one_line(tmp_path: Path) -> None:
    card = (REPO / "modelcards" / "qwen3-8b.yaml").read_text() + "num_hidden_layers: 2\n"
    (tmp_path / "twice.yaml").write_text(card)
    result = runner.invoke(app, ["--model", str(tmp_path / "twice.yaml")])
    assert result.exit_code != 0 and "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "key 'num_hidden_layers' given twice" in lines[0] and "twice.yaml" in lines[0]


def test_speculative_config_refuses_a_key_twice() -> None:
    spec = '{"method": "mtp", "method": "eagle3", "num_speculative_tokens": 1}'
    result = runner.invoke(app, ["-m", "qwen3-8b", "--engine", "vllm", "--speculative-config", spec])
    assert result.exit_code == 2
    assert "--speculative-config: key 'method' given twice" in result.stderr
