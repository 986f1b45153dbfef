"""The CLI: the mission command, JSON shape, and one clear line + exit code for every bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app
from tests.helpers import kvplan

runner = CliRunner()
MISSION = ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8"]


def run(*args: str):
    return runner.invoke(app, list(args))


def test_mission_command_as_typed() -> None:
    result = run(*MISSION)
    assert result.exit_code == 0, result.output
    assert "'qwen3-27b' is an alias of qwen3.5-27b" in result.output
    assert "ascend-950pr" in result.output
    assert "Recommended: max_batch_size =" in result.output
    # issue 10: ascend-950pr + mindie picks the profile fitted to the seed's published points, and says so
    assert "speeds: calibrated: fit from" in result.output and "published points" in result.output


def test_json_shape_and_units() -> None:
    result = run(*MISSION, "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    for key in (
        "model",
        "card",
        "dtype",
        "kv_dtype",
        "tp",
        "ctx_tokens",
        "batch",
        "memory",
        "recommendation",
        "performance",
    ):
        assert key in plan
    assert plan["ctx_tokens"] == 32768  # 32k means 32 * 1024
    mem = plan["memory"]
    for key in (
        "device_capacity_bytes",
        "usable_bytes",
        "weights_bytes",
        "kv_bytes_per_token",
        "state_bytes_per_sequence",
        "activation_bytes",
        "reserved_bytes",
        "kv_budget_bytes",
    ):
        assert isinstance(mem[key], int)
    assert mem["kv_bytes_per_token"] == 2 * 16 * 4 * 256 * 2  # 16 full-attention layers, bf16 KV
    rec = plan["recommendation"]
    per_seq = mem["kv_bytes_per_sequence"]
    assert rec["max_batch_size"] * per_seq <= mem["kv_budget_bytes"]
    # MindIE (the default engine) also keeps one block, and qwen3.5's explicit npuMemSize is whole GiB.
    block = 128 * mem["kv_bytes_per_token"]

    def mindie_holds(batch: int) -> bool:
        paged = (mem["kv_budget_bytes"] - batch * mem["state_bytes_per_sequence"]) // 2**30 * 2**30
        return paged // block - 1 >= batch * (32768 // 128)

    assert mindie_holds(rec["max_batch_size"]) and not mindie_holds(rec["max_batch_size"] + 1)
    perf = plan["performance"]
    assert perf["batch"] == rec["max_batch_size"]
    assert perf["tokens_per_s"] == pytest.approx(perf["per_user_tokens_per_s"] * perf["batch"])
    assert perf["calibrated"] is True  # issue 10: the fitted ascend-950pr/mindie profile (seed points)


def test_batch_gives_max_seq_len() -> None:
    plan = json.loads(run(*MISSION, "--batch", "4", "--json").output)
    assert plan["batch"] == 4
    assert plan["recommendation"]["max_batch_size"] == 4
    assert plan["recommendation"]["max_seq_len"] >= 32768
    assert plan["performance"]["batch"] == 4


def test_memory_override_changes_budget() -> None:
    big = json.loads(run(*MISSION, "--json").output)
    small = json.loads(run(*MISSION, "--memory-gib", "64", "--json").output)
    assert small["memory"]["device_capacity_bytes"] == 64 * 2**30
    assert small["recommendation"]["max_batch_size"] < big["recommendation"]["max_batch_size"]


def test_card_accepts_a_path(tmp_path: Path) -> None:
    from planner import catalog

    copy = tmp_path / "my-card.yaml"
    shutil.copy(catalog.data_dir("hwprofiles") / "nvidia-h100.yaml", copy)
    result = run("--model", "qwen3-8b", "--card", str(copy), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["card"] == "nvidia-h100"


@pytest.mark.parametrize(
    ("args", "code", "pattern"),
    [
        (["--model", "qwen3-27b", "--ctx", "32q"], 2, r"--ctx: not a token count \(got '32q'"),
        (
            ["--model", "qwen3-32", "--ctx", "4k"],
            2,
            r"unknown model card 'qwen3-32'; did you mean .*'qwen3-32b'",
        ),
        (
            ["--model", "qwen3-8b", "--card", "h100"],
            2,
            r"unknown hardware profile 'h100'; did you mean .*nvidia-h100",
        ),
        (
            ["--model", "qwen3-8b", "--card", "ascend-910b1", "--dtype", "fp8"],
            2,
            r"--dtype: fp8 needs native fp8 units, which ascend-910b1 lacks .*try --dtype int8",
        ),
        (["--model", "qwen3-8b", "--dtype", "fp7"], 2, r"--dtype: unknown weight dtype \(got 'fp7'"),
        (["--model", "qwen3-8b", "--kv-dtype", "fp4"], 2, r"--kv-dtype: unknown KV dtype"),
        (
            ["--model", "qwen3-8b", "--tp", "3"],
            2,
            r"--tp: 3 cannot shard qwen3-8b: 32 attention heads are not divisible by 3",
        ),
        (
            ["--model", "qwen3-8b", "--memory-fraction", "1.5"],
            2,
            r"--memory-fraction: out of range \(got 1.5",
        ),
        (["--model", "qwen3-8b", "--card", "missing.yaml"], 2, r"--card: profile file not found"),
        # a directory or a device at the path is named as such, not "not found" (it is there)
        (["--model", "/tmp"], 2, r"--model: model card file not readable \(a directory\)"),
        (["--model", "/dev/zero"], 2, r"--model: model card file not readable \(not a regular file\)"),
        (["--model", "qwen3-8b", "--card", "/tmp"], 2, r"--card: profile file not readable \(a directory\)"),
        (["--model", "qwen3-8b", "--card", "/dev/zero"], 2, r"--card: profile file not readable \(not a"),
        (
            ["--model", "llama-3.1-70b", "--card", "ascend-910b4"],
            3,
            r"llama-3.1-70b \(bf16\) does not fit on ascend-910b4 at tp=1: .*try --tp 8$",
        ),
        (["--model", "qwen3-8b", "--ctx", "4k", "--batch", "4000"], 3, r"--batch: 4000 sequences"),
        (["--model", "qwen3-8b", "--ctx", "4k", "--batch", "100000"], 2, r"--batch: above the engine's"),
        ([], 2, r"--model: required"),
    ],
)
def test_bad_input_one_line_and_exit_code(args: list[str], code: int, pattern: str) -> None:
    result = run(*args)
    assert result.exit_code == code, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("kvplan: error: ")
    import re

    assert re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in result.output


def test_malformed_profile_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    from planner import catalog

    text = (catalog.data_dir("hwprofiles") / "nvidia-h100.yaml").read_text()
    bad.write_text(text.replace("memory_bandwidth_gb_per_s:", "memory_bandwith_gb_per_s:"))
    result = run("--model", "qwen3-8b", "--card", str(bad))
    assert result.exit_code == 2
    assert f"{bad}: memory_bandwith_gb_per_s: Extra inputs are not permitted" in result.output


def test_group_defaults_run_only_without_a_subcommand() -> None:
    """planner/cli/groups.py default_command: a group's own listing (bench, models) runs alone, and not
    before one of its sub-commands; the root's plan (no --model: an error) not before `cards`."""
    listing = run("bench")
    assert listing.exit_code == 0 and "reads:" in listing.output, listing.output
    for args, listing_words in (
        (("bench", "import", "--help"), "reads:"),
        (("models", "import", "--help"), "qwen3-32b"),
    ):
        result = run(*args)
        assert result.exit_code == 0 and listing_words not in result.output, result.output
    cards = run("cards", "--json")
    assert cards.exit_code == 0 and "--model: required" not in cards.output, cards.output


def test_listings() -> None:
    models = run("models", "--json")
    assert models.exit_code == 0, models.output
    ids = {row["id"] for row in json.loads(models.output)}
    assert {"qwen3-32b", "qwen3.5-27b", "deepseek-v3"} <= ids
    cards = run("cards", "--json")
    assert cards.exit_code == 0, cards.output
    rows = json.loads(cards.output)
    assert {"ascend-950pr-112g", "ascend-950pr-64g", "nvidia-h200"} <= {row["id"] for row in rows}
    assert {"ascend-950pr", "nvidia-h200"} <= {row["profile"] for row in rows}
    table = run("cards")
    assert "ascend-910b1" in table.output


@pytest.mark.parametrize("command", ["", "serve ", "layout --budget-devices 8 "])
def test_mtp_acceptance_without_drafts_is_refused(command: str) -> None:
    """--mtp-acceptance typed with no --mtp / --speculative-config has nothing to apply to: one line, exit 2
    (as --acceptance-rate alone); with --mtp it is taken."""
    result = kvplan(f"{command}-m qwen3-27b --dtype fp8 --mtp-acceptance 0.5", code=2)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [
        "kvplan: error: --mtp-acceptance: no speculative decoding to apply it to (got 0.5, expected with "
        "--mtp N or --speculative-config)"
    ]
    kvplan("-m qwen3-27b --dtype fp8 --mtp 1 --mtp-acceptance 0.5")


def test_json_with_explain_carries_the_decode_ledger() -> None:
    """--json --explain: the ledger --explain prints, as data; its total is the plan's decode step."""
    data = json.loads(kvplan("-m qwen3-27b --dtype fp8 --json --explain").stdout)
    ledger = data["decode_ledger"]
    assert ledger["batch"] == data["performance"]["batch"]
    assert ledger["time_s"] == pytest.approx(data["performance"]["decode_step_s"], rel=1e-9)
    assert sum(op["time_s"] for op in ledger["ops"]) == pytest.approx(ledger["time_s"], rel=1e-6)
    assert "decode_ledger" not in json.loads(kvplan("-m qwen3-27b --dtype fp8 --json").stdout)
