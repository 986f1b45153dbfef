"""MindIE's maxBatchSize ceiling (planner/engines/mindie/limits.py) and the --base plugin_params forms
(planner/engines/mindie/plugins.py): h61's findings 2-4.

- The ceiling is the engine's own: 5000, MindIE-LLM's check in every release branch before 3.0.0.beta.3
  (which takes 819200 since 2407474); kvplan cited it as the docs of a snapshot that says 819200.
- The Atlas 300I Duo's documented range is [1, 2000]: a card fact (hwprofiles/atlas-300i-duo.yaml) that the
  plan, `kvplan mindie`, serve and the dashboard all apply.
- A --base plugin_params written as a JSON object (MindIE dumps it to its string form,
  model_deploy_config.cpp:200-203) was dropped silently; any other non-string type is refused in one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.engines.mindie import limits, plugins
from planner.engines.mindie import rules as mindie_rules
from planner.errors import DataFileError
from tests.helpers import kvplan
from tests.test_engine_agreement import answers_for

TINY_950 = "--model qwen3-0.6b --card ascend-950pr --ctx 128 --tp 8"
DUO = "--model qwen3-0.6b --card atlas-300i-duo --dtype fp16 --ctx 128"
SCHEDULE = ("BackendConfig", "ScheduleConfig")
MTP_MODEL = "--model qwen3.5-27b --card ascend-950pr --ctx 32k --dtype fp8 --tp 2"  # ships an MTP layer


def written(words: str, *args: str | Path) -> dict[str, Any]:
    """The JSON payload of `kvplan mindie <words> --weights-path /w --json`."""
    return json.loads(kvplan(f"mindie {words} --weights-path /w --json", *args).output)


def schedule(payload: dict[str, Any]) -> dict[str, Any]:
    return payload["mindie"]["config"]["BackendConfig"]["ScheduleConfig"]


def test_kvplan_writes_and_accepts_what_every_release_takes() -> None:
    """5000 written and accepted (every release before 3.0.0.beta.3 stops above it), less on a card whose
    docs say so."""
    assert limits.MAX_BATCH_SIZE == 5000
    rule = next(r for r in mindie_rules.RANGE_RULES if r.path == (*SCHEDULE, "maxBatchSize"))
    assert (rule.lo, rule.hi) == (1, 5000)
    assert limits.max_batch_size(card_cap=2000) == 2000
    assert limits.max_batch_size(card_cap=None) == 5000


@pytest.mark.parametrize("version", ["2.x", "1.0.RC3"])
def test_a_tiny_model_is_held_at_5000_and_says_the_engine_binds(version: str) -> None:
    plan = json.loads(kvplan(f"{TINY_950} --json").output)["recommendation"]
    assert (plan["max_batch_size"], plan["binding_constraint"]) == (5000, "engine limit")
    payload = written(TINY_950, "--mindie-version", version)
    assert schedule(payload)["maxBatchSize"] == 5000
    assert schedule(payload)["maxPrefillBatchSize"] <= 5000


@pytest.mark.parametrize(
    ("words", "flag"),
    [
        (f"{TINY_950} --batch 6000", "--batch"),
        (f"{DUO} --tp 2 --batch 3000", "--batch"),
        (
            f"serve {DUO} --tp 2 --max-batch 3000 --concurrency 10 --input-tokens 64 --output-tokens 64",
            "--max-batch",
        ),
        (
            f"simulate {DUO} --tp 2 --max-batch 3000 --rate 10 --input-tokens 64 --output-tokens 64",
            "--max-batch",
        ),
    ],
)
def test_a_batch_above_maxbatchsize_is_refused_as_an_input_on_every_command(words: str, flag: str) -> None:
    """h63: the plan called it memory not fitting (exit 3); serve and simulate ran it."""
    line = kvplan(f"{words} --engine mindie", code=2).output.strip().splitlines()[-1]
    assert line.startswith(f"kvplan: error: {flag}: above the engine's range") and "maxBatchSize" in line


@pytest.mark.parametrize("extra", ["", " --dtype int8 --tp 2"])
def test_the_300i_duo_is_held_at_its_documented_2000(extra: str) -> None:
    """h61 finding 2: 2284 (fp16) and 4692 (int8, tp 2) were written on the Duo, above its [1, 2000]."""
    words = DUO.replace(" --dtype fp16", "") + extra if extra else DUO
    plan = json.loads(kvplan(f"{words} --json").output)["recommendation"]
    assert (plan["max_batch_size"], plan["binding_constraint"]) == (2000, "engine limit")
    assert schedule(written(words))["maxBatchSize"] == 2000


def test_every_command_holds_the_duo_at_2000() -> None:
    """Plan, `kvplan mindie`, serve and the dashboard (and its download) agree on the card's cap."""
    answers = answers_for("qwen3-0.6b", "atlas-300i-duo", "mindie", "1", dtype="fp16", ctx="128")
    assert set(answers.values()) == {(0, 2000)}, answers


def base_with(tmp_path: Path, value: object) -> Path:
    """kvplan's 2.x base with ModelConfig[0].plugin_params set to value, written to tmp_path."""
    cfg = mindie_rules.load_base("2.x")
    cfg["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["plugin_params"] = value
    path = tmp_path / "base.json"
    path.write_text(json.dumps(cfg))
    return path


def test_an_object_plugin_params_is_kept(tmp_path: Path) -> None:
    """h61 finding 4: the base's SplitFuse plugin vanished from the written config."""
    base = base_with(tmp_path, {"plugin_type": "splitfuse", "x": 1})
    payload = written(TINY_950, "--base", base)
    model = payload["mindie"]["config"]["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert json.loads(model["plugin_params"]) == {"plugin_type": "splitfuse", "x": 1}
    both = plugins.merge_plugins({"plugin_type": "splitfuse"}, mtp=0, prefix_cache=True)
    assert both == ('{"plugin_type":"splitfuse,prefix_cache"}', [])


def test_mtp_sees_an_object_bases_plugins(tmp_path: Path) -> None:
    base = base_with(tmp_path, {"plugin_type": "la"})
    result = kvplan(f"mindie {MTP_MODEL} --mtp 1 --base", base, code=2)
    refusal = "--mtp: MindIE's MTP cannot be combined with parallel decoding (got plugin_type la"
    assert refusal in result.output


@pytest.mark.parametrize("value", [["splitfuse"], 5, True, None])
def test_other_plugin_params_types_are_refused_in_one_line(tmp_path: Path, value: object) -> None:
    base = base_with(tmp_path, value)
    result = kvplan(f"mindie {TINY_950} --base", base, code=DataFileError.exit_code)
    line = (
        f"kvplan: error: --base {base}: BackendConfig.ModelDeployConfig.ModelConfig[0].plugin_params: not a "
        f"JSON object (got {json.dumps(value)}, expected an object or its string form"
    )
    assert line in result.output, result.output
    assert "Traceback" not in result.output


def test_serve_says_the_engine_limit_not_the_pool_binds() -> None:
    """h63: serve said "the KV pool holds 2000 sequences" where MindIE's maxBatchSize, not memory, binds."""
    words = f"serve {DUO} --tp 2 --input-tokens 64 --output-tokens 64 --concurrency 3000 --engine mindie"
    out = kvplan(words).output
    assert "the engine's own batch limit allows 2000 sequences" in out
    assert "the KV pool holds" not in out
    payload = json.loads(kvplan(f"{words} --json").output)
    assert payload["admission"]["full_length_bound"] == "engine limit"


@pytest.mark.parametrize(
    ("value", "flag"),
    [
        ({"plugin_type": "prefix_cache"}, "--prefix-cache"),
        ('{"plugin_type":"mtp","num_speculative_tokens":1}', "--mtp N"),
    ],
)
def test_a_bases_plugin_the_flags_leave_off_is_removed_with_a_note(
    tmp_path: Path, value: object, flag: str
) -> None:
    """h67: a --base's prefix_cache or mtp plugin vanished from the written config without a word."""
    payload = written(TINY_950, "--base", base_with(tmp_path, value))
    model = payload["mindie"]["config"]["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert "plugin_params" not in model or "prefix_cache" not in model["plugin_params"]
    assert any("plugin removed" in note and flag in note for note in payload["mindie"]["notes"])
