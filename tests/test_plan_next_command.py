"""The plan's engine words and its Next: command agree with what `kvplan mindie` writes: a
--max-prefill-tokens below maxInputTokenLen is raised to it everywhere (MindIE's rule maxPrefillTokens >=
maxInputTokenLen, docs/mindie.md Lengths), and a plan counting prefix-cache hits hands --prefix-cache on."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()
PLAN = ["--model", "qwen3-27b", "--dtype", "fp8", "--ctx", "32k"]


def plan_json(extra: list[str]) -> dict[str, object]:
    result = runner.invoke(app, [*PLAN, *extra, "--json"])
    assert result.exit_code == 0, result.output
    payload: dict[str, object] = json.loads(result.stdout)
    return payload


def run_next(payload: dict[str, object], out: Path) -> dict[str, object]:
    """Run the plan's Next: command (its placeholders filled) and return the config it wrote."""
    config = payload["engine_config"]
    assert isinstance(config, dict)
    words = shlex.split(config["next_command"].replace("<checkpoint dir>", "/data/w"))
    assert words[:2] == ["kvplan", "mindie"]
    words[words.index("-o") + 1] = str(out)
    result = runner.invoke(app, words[1:])
    assert result.exit_code == 0, result.output
    written: dict[str, object] = json.loads(out.read_text())
    return written


def test_small_max_prefill_tokens_is_raised_to_max_input_token_len(tmp_path: Path) -> None:
    """ctx 32k: maxInputTokenLen = 32768 - 8192 (a quarter, whole blocks) = 24576. --max-prefill-tokens 1000
    is raised to 24576 in the plan's words, its activation peak (the default's: max(8192, 24576)) and the
    config its Next: command writes; both print the note. Before: the plan wrote 1000 and sized 1000
    tokens of activations, and its Next: command exited 2."""
    default, given = plan_json([]), plan_json(["--max-prefill-tokens", "1000"])
    assert given["engine_config"]["fields"]["maxPrefillTokens"] == "24576"  # type: ignore[index]
    memory = given["memory"], default["memory"]
    assert memory[0]["activation_bytes"] == memory[1]["activation_bytes"]  # type: ignore[index]
    note = "--max-prefill-tokens 1000 raised to 24576 (maxInputTokenLen)"
    assert any(note in warning for warning in given["warnings"])  # type: ignore[attr-defined]
    written = run_next(given, tmp_path / "config.json")
    backend = written["BackendConfig"]
    assert backend["ScheduleConfig"]["maxPrefillTokens"] == 24576  # type: ignore[index]
    assert backend["ModelDeployConfig"]["maxInputTokenLen"] == 24576  # type: ignore[index]
    stderr = runner.invoke(app, ["mindie", *PLAN, "--max-prefill-tokens", "1000", "--weights-path", "/w"])
    assert stderr.exit_code == 0 and note in stderr.output


def test_a_max_prefill_tokens_above_the_input_is_kept() -> None:
    payload = plan_json(["--max-prefill-tokens", "30000"])
    assert payload["engine_config"]["fields"]["maxPrefillTokens"] == "30000"  # type: ignore[index]
    assert not any("raised" in warning for warning in payload["warnings"])  # type: ignore[attr-defined]


@pytest.mark.parametrize("engine", ["mindie", "vllm", "sglang"])
def test_next_command_keeps_the_prefix_cache_the_plan_counts(engine: str) -> None:
    """--prefix-cached-fraction 0.9: the plan's TTFT counts hits, so Next: carries --prefix-cache (MindIE
    writes its prefix_cache plugin, vLLM --enable-prefix-caching); without hits it does not."""
    cached = plan_json(["--engine", engine, "--prefix-cached-fraction", "0.9"])["engine_config"]
    plain = plan_json(["--engine", engine])["engine_config"]
    assert "--prefix-cache" in shlex.split(cached["next_command"])  # type: ignore[index]
    assert "--prefix-cache" not in shlex.split(plain["next_command"])  # type: ignore[index]


def test_next_command_with_prefix_hits_writes_the_plugin(tmp_path: Path) -> None:
    written = run_next(plan_json(["--prefix-cached-fraction", "0.9"]), tmp_path / "config.json")
    model = written["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]  # type: ignore[index]
    assert "prefix_cache" in json.dumps(model["plugin_params"])


def test_simulate_raises_max_prefill_tokens_as_the_plan_does() -> None:
    """simulate's MindIE scheduler batches prefill up to the raised budget (the plan's), not the value given:
    3000-token prompts are served, not refused, and the note says so."""
    load = ["--input-tokens", "3000", "--concurrency", "4"]
    flags = ["simulate", *PLAN, "--max-prefill-tokens", "1000", *load]
    result = runner.invoke(app, [*flags, "--json"])
    assert result.exit_code == 0, result.output
    scheduler = json.loads(result.stdout)["scheduler"]
    planned = plan_json(["--max-prefill-tokens", "1000"])["engine_config"]
    assert isinstance(planned, dict)
    assert scheduler["max_prefill_tokens"] == int(planned["fields"]["maxPrefillTokens"]) == 24576
    text = runner.invoke(app, flags)
    assert "--max-prefill-tokens 1000 raised to 24576" in text.stdout


def test_serve_says_when_it_raised_max_prefill_tokens() -> None:
    """serve plans MindIE with the budget raised to its 3000-token prompts and says so (text and JSON)."""
    flags = ["serve", "-m", "qwen3-27b", "--dtype", "fp8", "--max-prefill-tokens", "1000"]
    load = ["--input-tokens", "3000", "--concurrency", "4"]
    text = runner.invoke(app, [*flags, *load])
    assert text.exit_code == 0, text.output
    assert "note: --max-prefill-tokens 1000 raised to 3000" in text.stdout
    payload = json.loads(runner.invoke(app, [*flags, *load, "--json"]).stdout)
    assert any("raised to 3000" in note for note in payload["notes"])
    kept = json.loads(runner.invoke(app, [*flags[:-1], "4096", *load, "--json"]).stdout)
    assert not any("raised" in note for note in kept["notes"])


def test_pd_simulate_says_when_it_raised_max_prefill_tokens() -> None:
    flags = ["simulate", "-m", "qwen3-27b", "--dtype", "fp8", "--rate", "1", "--pd", "1:1"]
    result = runner.invoke(app, [*flags, "--max-prefill-tokens", "100", "--json"])
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    assert any(note.startswith("--max-prefill-tokens 100 raised to 288") for note in notes)


@pytest.mark.parametrize("target", ["missing-dir/m.json", "."])
def test_every_output_refusal_names_the_flag(tmp_path: Path, target: str) -> None:
    """A missing folder or a directory as -o: one line that starts with the flag, before any planning."""
    result = runner.invoke(app, ["mindie", *PLAN, "-o", str(tmp_path / target)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("kvplan: error: -o/--out: "), result.stderr
