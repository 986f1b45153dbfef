"""Hostile input against the surface added on 2026-12-05: `kvplan sglang`, `--engine sglang`, the speculative
and prefix-cache flags of `vllm` / `mindie`, sweep's layout flags, `bench import`'s spec_decode_* fields and
`--version` on command groups. One regression test per root cause; each failed on main at 5833fa9.

In-process (typer's CliRunner): every case is a plan of qwen3-8b, ~0.1-0.5 s each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import planner
from planner.cli import app
from tests.helpers import fails_with, stdout_of

runner = CliRunner()
QWEN = ["-m", "qwen3-8b"]
EAGLE3 = '{"method": "eagle3", "num_speculative_tokens": 3, "model": "org/qwen3-8b-eagle3"}'
DFLASH = '{"method": "dflash", "num_speculative_tokens": 3}'
RESULT = Path(__file__).parent / "fixtures" / "bench_results" / "vllm_bench_serve.json"


# --- speculative decoding with pipeline parallelism (vLLM refuses it: PR #10975, issues #44697, #52069) ---


@pytest.mark.parametrize(
    "command", [[], ["serve"], ["vllm"], ["sweep", "--batch", "1,8", "--ctx", "1k"]], ids=str
)
def test_vllm_refuses_speculation_with_pipeline_stages(command: list[str]) -> None:
    """Was: exit 0 and a plan / `vllm serve` line with --pipeline-parallel-size 2 and a speculative config."""
    engine = [] if command == ["vllm"] else ["--engine", "vllm"]
    args = [*command, *QWEN, *engine, "--pp", "2", "--speculative-config", EAGLE3]
    fails_with(args, "--pp:", "got --pp 2 with 3 speculative tokens", "expected --pp 1")


def test_layout_ranks_no_pipeline_layout_with_speculation() -> None:
    """Was: layouts with pp 2 and 4 among the ranked candidates of an eagle3 plan on vLLM."""
    args = ["layout", *QWEN, "--engine", "vllm", "--budget-devices", "4", "--speculative-config", EAGLE3]
    found = json.loads(stdout_of([*args, "--json"]))["candidates"]
    assert found and {c["pp"] for c in found} == {1}
    plain = json.loads(stdout_of(["layout", *QWEN, "--engine", "vllm", "--budget-devices", "4", "--json"]))
    assert {c["pp"] for c in plain["candidates"]} > {1}  # without drafts pipeline layouts stay in


# --- SGLang ---


@pytest.mark.parametrize("command", [["sglang"], ["serve", "--engine", "sglang"]], ids=str)
def test_sglang_refuses_a_dflash_drafter(command: list[str]) -> None:
    """Was: `kvplan sglang` printed --speculative-algorithm NEXTN (the model's MTP layers, which qwen3-8b
    lacks) for a dflash draft model."""
    fails_with([*command, *QWEN, "--speculative-config", DFLASH], "--speculative-config:", "dflash", "eagle3")


def test_sglang_writes_the_draft_model_it_was_given() -> None:
    """Was: `--speculative-draft-model-path '<draft model dir>'` although the config named the model."""
    result = runner.invoke(app, ["sglang", *QWEN, "--speculative-config", EAGLE3])
    assert result.exit_code == 0, result.output
    assert "--speculative-draft-model-path org/qwen3-8b-eagle3" in result.stdout
    assert "replace" not in result.stderr


def test_sglang_keeps_the_radix_cache_the_plan_counts_hits_of() -> None:
    """Was: --disable-radix-cache written while the plan's TTFT counted --prefix-cached-fraction's hits."""
    assert "--disable-radix-cache" in stdout_of(["sglang", *QWEN])
    assert "--disable-radix-cache" not in stdout_of(["sglang", *QWEN, "--prefix-cached-fraction", "0.5"])


def test_sglang_refuses_an_int8_kv_cache() -> None:
    """Was: exit 0, the pool sized for int8 KV and no --kv-cache-dtype (SGLang's choices have no int8)."""
    args = ["sglang", "-m", "deepseek-v3", "--card", "ascend-910c", "--tp", "16", "--dtype", "int8"]
    fails_with([*args, "--kv-dtype", "int8"], "--kv-dtype:", "got int8")


def test_sglang_refuses_a_block_size_it_does_not_write() -> None:
    """Was: exit 0 with --page-size 128 printed for --block-size 16 (the flag silently ignored)."""
    fails_with(["sglang", *QWEN, "--block-size", "16"], "--block-size:", "got 16", "expected 128")
    assert "--page-size 128" in stdout_of(["sglang", *QWEN, "--block-size", "128"])


# --- sweep checks what every other command checks ---


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--tp", "3"], ["--tp:", "3"]),
        (["--ep", "4"], ["--ep:", "dense"]),
        (["--card", "ascend-910b3", "--kv-dtype", "fp8"], ["--kv-dtype:", "fp8"]),
        (["--engine", "mindie", "--pp", "2"], ["--pp:", "MindIE"]),
        (["--engine", "sglang", "--speculative-config", DFLASH], ["--speculative-config:", "dflash"]),
    ],
    ids=str,
)
def test_sweep_refuses_what_plan_refuses(flags: list[str], words: list[str]) -> None:
    """Was: exit 0 and a grid of speeds for a layout, KV dtype or drafter no engine runs."""
    fails_with(["sweep", *QWEN, "--batch", "1,8", "--ctx", "1k", *flags], *words)


# --- layout names the input every candidate refuses ---


@pytest.mark.parametrize(
    "flags",
    [
        ["--engine", "mindie", "--block-size", "256"],
        ["--engine", "sglang", "--speculative-config", DFLASH],
        ["--card", "ascend-910b3", "--kv-dtype", "fp8"],
    ],
    ids=str,
)
def test_layout_names_an_input_every_layout_refuses(flags: list[str]) -> None:
    """Was: exit 3 "no layout ... fits and meets the SLOs" for a flag no layout could take."""
    line = fails_with(["layout", *QWEN, "--budget-devices", "2", *flags], f"{flags[-2]}:")
    assert "no layout" not in line


# --- bench import: spec_decode_* counts that cannot be ---


def spec_result(tmp_path: Path, drafts: float, drafted: float, accepted: float) -> str:
    data = json.loads(RESULT.read_text())
    data.update(
        spec_decode_num_drafts=drafts, spec_decode_draft_tokens=drafted, spec_decode_accepted_tokens=accepted
    )
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(
    ("counts", "words"),
    [
        ((1_000_000, 10, 5), ["spec_decode_draft_tokens:", "fewer than one per draft"]),
        ((0, 32768, 100), ["spec_decode_draft_tokens:", "over 0 drafts"]),
        ((5, 0, 0), ["spec_decode_draft_tokens:", "fewer than one per draft"]),
        ((0.5, 1.5, 1), ["spec_decode_num_drafts:", "not a whole count", "0.5"]),
        ((1000, 3000.5, 10), ["spec_decode_draft_tokens:", "not a whole count"]),
    ],
    ids=str,
)
def test_bench_import_refuses_impossible_draft_counts(
    tmp_path: Path, counts: tuple[float, float, float], words: list[str]
) -> None:
    """Was: exit 0, rows with 1 draft token per step (fewer drafted tokens than drafts) or with no
    speculation at all (0 drafts but 32768 drafted tokens, fractional counts)."""
    path = spec_result(tmp_path, *counts)
    fails_with(["bench", "import", path, *QWEN, "--card", "ascend-910b3"], path, *words)


def test_bench_import_still_reads_no_speculation(tmp_path: Path) -> None:
    path = spec_result(tmp_path, 0, 0, 0)
    result = runner.invoke(app, ["bench", "import", path, *QWEN, "--card", "ascend-910b3"])
    assert result.exit_code == 0, result.output


# --- --version on command groups too ---


@pytest.mark.parametrize("group", ["models", "bench"])
def test_command_groups_print_the_version(group: str) -> None:
    """Was: exit 2 "No such option: --version"."""
    assert stdout_of([group, "--version"]) == f"kvplan {planner.__version__}\n"


@pytest.mark.parametrize("command", [["sglang"], ["vllm"]])
def test_a_draft_model_with_a_nul_is_refused(command: list[str]) -> None:
    """Was: exit 0 with the NUL printed inside the launch command's quoted path (no shell can pass it)."""
    config = '{"method": "eagle3", "num_speculative_tokens": 3, "model": "org/d\\u0000raft"}'
    fails_with([*command, *QWEN, "--speculative-config", config], "--speculative-config: model", "NUL")


# --- calibrate -m, empty ids ---

FIT_ROWS = Path(__file__).parents[1] / "lab" / "published" / "fit-rows" / "ascend-950pr.vllm.csv"


def test_calibrate_refuses_a_model_the_fit_would_ignore(tmp_path: Path) -> None:
    """Was: exit 0 and a fitted profile, `-m nonexistent` silently ignored next to --from-bench."""
    out = str(tmp_path / "fit.yaml")
    args = ["calibrate", "-m", "nonexistent", "--card", "ascend-950pr", "--from-bench", str(FIT_ROWS)]
    fails_with([*args, "--out", out], "--model:", "'nonexistent'", "--from-bench")
    assert not Path(out).exists()


def test_calibrate_names_an_unknown_model_before_the_device() -> None:
    """Was: "--device cpu: torch is not installed" for a mistyped -m (the id checked only after torch)."""
    args = ["calibrate", "-m", "nonexistent", "--card", "ascend-950pr", "--device", "cpu", "--dry-run"]
    fails_with(args, "unknown model card 'nonexistent'")


@pytest.mark.parametrize("flags", [["-m", ""], ["-m", "qwen3-8b", "--card", ""]], ids=str)
def test_an_empty_id_gets_no_suggestions(flags: list[str]) -> None:
    """Was: "unknown model card ''; did you mean 'deepseek-r1', ...?" (the empty id is in every id)."""
    line = fails_with(flags, "''")
    assert "did you mean" not in line


# --- MindIE's speculative token range reaches the plan ---


@pytest.mark.parametrize("command", [[], ["serve"], ["layout", "--budget-devices", "16"]], ids=str)
def test_mindie_plans_refuse_drafts_its_plugin_cannot_take(command: list[str]) -> None:
    """Was: exit 0 and a plan with --mtp 3 on MindIE, whose `kvplan mindie` then refused the same flags."""
    deepseek = ["-m", "deepseek-v3", "--card", "ascend-910c", "--dtype", "int8"]
    tp = [] if "layout" in command else ["--tp", "16"]
    fails_with([*command, *deepseek, *tp, "--engine", "mindie", "--mtp", "3"], "--mtp:", "got 3", "1 or 2")


# --- the two acceptance flags ---


def test_both_acceptance_flags_are_refused() -> None:
    """Was: exit 0, --mtp-acceptance 0.9 silently dropped for --acceptance-rate 0.5."""
    args = ["-m", "deepseek-v3", "--card", "ascend-910c", "--tp", "16", "--dtype", "int8", "--mtp", "1"]
    fails_with([*args, "--acceptance-rate", "0.5", "--mtp-acceptance", "0.9"], "--acceptance-rate:", "once")
    # the default value typed is a flag given too (was: accepted silently, 0.7 being the default)
    fails_with([*args, "--acceptance-rate", "0.5", "--mtp-acceptance", "0.7"], "--acceptance-rate:", "once")


def test_a_draft_model_takes_the_per_draft_acceptance_given() -> None:
    """Was: --mtp-acceptance ignored with --speculative-config (always 0.7): the same tokens/s for 0.9."""
    args = [*QWEN, "--engine", "vllm", "--speculative-config", EAGLE3, "--json"]
    speeds = [
        json.loads(stdout_of([*args, "--mtp-acceptance", a]))["performance"]["tokens_per_s"]
        for a in ("0.7", "0.9")
    ]
    assert speeds[1] > speeds[0]
    assert json.loads(stdout_of(args))["performance"]["tokens_per_s"] == speeds[0]  # 0.7 is the default
