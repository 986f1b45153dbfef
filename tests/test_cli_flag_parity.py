"""Issues 25 and 23: the same flag for the same thing on every command (--version, the vLLM spellings as
aliases, speculative decoding, the engine and layout on `sweep`, --ctx on `serve`, -m on `calibrate`),
speculative decoding carried through `kvplan vllm` / `kvplan mindie` and the plan's `Next:` line, and
`bench import` reading the speculative decoding a vllm bench result states."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

import planner
from planner import inputs, records
from planner.cli import app
from planner.errors import PlanInputError
from tests.test_cli_flags import every_command

runner = CliRunner()
EAGLE3 = '{"method": "eagle3", "model": "AngelSlim/Qwen3-8B_eagle3", "num_speculative_tokens": 3}'
VLLM = ["vllm", "--model", "qwen3-8b", "--card", "ascend-910b3", "--ctx", "8k"]
MINDIE = ["mindie", "--model", "qwen3-8b", "--card", "ascend-910b3", "--ctx", "8k", "--weights-path", "/w"]
DEEPSEEK = [
    "--model",
    "deepseek-v3",
    "--card",
    "ascend-910c",
    "--dtype",
    "int8",
    "--tp",
    "16",
    "--ctx",
    "16k",
]

# vLLM's spelling -> kvplan's: where a command takes the concept, it takes both spellings.
ALIASES = {
    "--ctx": "--max-model-len",
    "--tp": "--tensor-parallel-size",
    "--kv-dtype": "--kv-cache-dtype",
    "--memory-fraction": "--gpu-memory-utilization",
    "--batch": "--max-num-seqs",
    "--max-prefill-tokens": "--max-num-batched-tokens",
}
# sweep's --batch and --ctx are grid axes (lists). simulate's --max-prefill-tokens is the engine's prefill
# budget as everywhere (MindIE maxPrefillTokens, vLLM max_num_batched_tokens; --max-batched-tokens too).
NOT_THE_ENGINE_SETTING = {("sweep", "--batch"), ("sweep", "--ctx")}


def options_of(path: str) -> set[str]:
    """Every spelling a command accepts."""
    return {opt for param in every_command()[path].params for opt in param.opts}


def fails_with(args: list[str], message: str) -> None:
    """The command exits 2 with one `kvplan: error:` line starting with `message`."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"kvplan: error: {message}"), result.stderr
    assert result.stderr.count("\n") == 1


def test_every_command_prints_the_version() -> None:
    commands = {path: cmd for path, cmd in every_command().items() if not hasattr(cmd, "list_commands")}
    assert {"", "vllm", "mindie", "serve", "simulate", "layout", "sweep", "calibrate", "bench import"} <= {
        *commands,
        "",
    }
    for path in commands:
        result = runner.invoke(app, [*path.split(), "--version"])
        assert (result.exit_code, result.stdout) == (0, f"kvplan {planner.__version__}\n"), path
    root = runner.invoke(app, ["--version"])
    assert root.stdout == f"kvplan {planner.__version__}\n"


def test_every_command_taking_a_setting_takes_its_vllm_spelling() -> None:
    for path in every_command():
        name = path.split(" ")[0] if path else "plan"
        opts = options_of(path)
        for ours, vllms in ALIASES.items():
            if ours in opts and (name, ours) not in NOT_THE_ENGINE_SETTING:
                assert vllms in opts, (path, ours)


@pytest.mark.parametrize(
    ("path", "wanted"),
    [
        (
            "vllm",
            {"--speculative-config", "--acceptance-rate", "--mtp-acceptance", "--prefix-cached-fraction"},
        ),
        (
            "mindie",
            {"--speculative-config", "--acceptance-rate", "--mtp-acceptance", "--prefix-cached-fraction"},
        ),
        (
            "sweep",
            {
                "--engine",
                "--dp",
                "--pp",
                "--ep",
                "--memory-fraction",
                "--gpu-memory-utilization",
                "--speculative-config",
                "--acceptance-rate",
            },
        ),
        (
            "layout",
            {"--mtp", "--mtp-acceptance", "--speculative-config", "--acceptance-rate", "--uncalibrated"},
        ),
        ("serve", {"--ctx", "--max-model-len"}),
        ("simulate", {"--ctx", "--max-model-len"}),
        ("calibrate", {"-m", "--model", "--memory-fraction", "--gpu-memory-utilization"}),
        ("bench import", {"--speculative-config", "-m"}),
    ],
)
def test_the_commands_take_the_flags_the_others_have(path: str, wanted: set[str]) -> None:
    assert wanted <= options_of(path)


# --- speculative decoding through `kvplan vllm` and `kvplan mindie` --------------------------------------


def test_vllm_prints_the_draft_models_speculative_config_and_sizes_its_memory() -> None:
    plain = runner.invoke(app, [*VLLM, "--json"])
    drafted = runner.invoke(app, [*VLLM, "--speculative-config", EAGLE3, "--json"])
    assert drafted.exit_code == 0, drafted.output
    args = dict(json.loads(drafted.stdout)["vllm"]["args"])
    spec = json.loads(args["--speculative-config"])
    assert spec == {"method": "eagle3", "model": "AngelSlim/Qwen3-8B_eagle3", "num_speculative_tokens": 3}
    assert list(spec) == ["method", "model", "num_speculative_tokens"]  # vLLM's key names, its order
    with_draft, without = (json.loads(r.stdout)["plan"]["memory"] for r in (drafted, plain))
    # the eagle3 head (one decoder layer, its fc and lm_head, 16-bit) and one more cached layer per token
    assert with_draft["weights_bytes"] > without["weights_bytes"]
    assert with_draft["kv_bytes_per_token"] == without["kv_bytes_per_token"] * 37 // 36  # 36 layers + 1
    assert "--speculative-config" not in dict(json.loads(plain.stdout)["vllm"]["args"])


def test_vllm_refuses_a_draft_method_without_its_checkpoint() -> None:
    spec = '{"method": "eagle3", "num_speculative_tokens": 3}'
    fails_with([*VLLM, "--speculative-config", spec], '--speculative-config: method eagle3 needs "model"')
    empty = '{"method": "dflash", "model": " ", "num_speculative_tokens": 3}'
    fails_with([*VLLM, "--speculative-config", empty], "--speculative-config: model is not a checkpoint")


def test_vllm_writes_mtp_from_either_flag_the_same_way() -> None:
    spec = '{"method": "mtp", "num_speculative_tokens": 1}'
    base = ["vllm", *DEEPSEEK, "--weights-path", "/w", "--json"]
    by_spec, by_mtp = (
        runner.invoke(app, [*base, *flags]) for flags in (["--speculative-config", spec], ["--mtp", "1"])
    )
    assert by_spec.exit_code == 0, by_spec.output
    assert json.loads(by_spec.stdout)["vllm"] == json.loads(by_mtp.stdout)["vllm"]
    printed = dict(json.loads(by_spec.stdout)["vllm"]["args"])["--speculative-config"]
    assert json.loads(printed) == {"method": "mtp", "num_speculative_tokens": 1}


def test_mindie_writes_its_mtp_plugin_from_the_speculative_config() -> None:
    base = ["mindie", *DEEPSEEK, "--weights-path", "/w", "--json"]
    spec = '{"method": "mtp", "num_speculative_tokens": 1}'
    by_spec, by_mtp = (
        runner.invoke(app, [*base, *flags]) for flags in (["--speculative-config", spec], ["--mtp", "1"])
    )
    assert by_spec.exit_code == 0, by_spec.output
    config = json.loads(by_spec.stdout)["mindie"]["config"]
    assert config == json.loads(by_mtp.stdout)["mindie"]["config"]
    params = config["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["plugin_params"]
    assert json.loads(params) == {"plugin_type": "mtp", "num_speculative_tokens": 1}


def test_mindie_refuses_what_its_plugin_cannot_run_in_one_line() -> None:
    fails_with(
        [*MINDIE, "--speculative-config", EAGLE3],
        "--speculative-config: mindie runs no separate draft model (got method eagle3, expected mtp",
    )
    three = '{"method": "mtp", "num_speculative_tokens": 3}'
    fails_with(
        ["mindie", *DEEPSEEK, "--weights-path", "/w", "--speculative-config", three],
        "--speculative-config: MindIE's mtp plugin takes 1 or 2 speculative tokens (got "
        "num_speculative_tokens 3, expected 1 or 2)",
    )


def test_mindie_notes_prefix_cache_hits_its_config_turns_off() -> None:
    result = runner.invoke(app, [*MINDIE, "--prefix-cached-fraction", "0.5", "--json"])
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["mindie"]["notes"]
    assert any(n.startswith("--prefix-cached-fraction 0.5:") and "--prefix-cache" in n for n in notes)
    quiet = runner.invoke(app, [*MINDIE, "--prefix-cached-fraction", "0.5", "--prefix-cache", "--json"])
    assert not any("--prefix-cached-fraction" in n for n in json.loads(quiet.stdout)["mindie"]["notes"])


def test_the_next_command_carries_the_speed_flags_and_runs() -> None:
    plan = [
        "--model", "qwen3-8b", "--card", "ascend-910b3", "--ctx", "8k", "--engine", "vllm",
        "--speculative-config", EAGLE3, "--acceptance-rate", "0.6", "--prefix-cached-fraction", "0.5",
        "--uncalibrated", "--json",
    ]  # fmt: skip
    result = runner.invoke(app, plan)
    assert result.exit_code == 0, result.output
    command = json.loads(result.stdout)["engine_config"]["next_command"]
    words = shlex.split(command)
    assert words[:2] == ["kvplan", "vllm"]
    for flag, value in (("--speculative-config", EAGLE3), ("--acceptance-rate", "0.6")):
        assert words[words.index(flag) + 1] == value
    assert words[words.index("--prefix-cached-fraction") + 1] == "0.5"
    assert "--uncalibrated" in words and words[words.index("--uncalibrated") + 1].startswith("--")
    ran = runner.invoke(app, words[1:])
    assert ran.exit_code == 0, ran.output
    assert "--speculative-config" in ran.stdout


# --- sweep, layout, serve ----------------------------------------------------------------------------


def test_sweep_takes_the_engine_layout_and_drafts() -> None:
    base = [
        "sweep",
        "-m",
        "qwen3-32b",
        "--card",
        "ascend-910b3",
        "--batch",
        "1,64",
        "--ctx",
        "32k",
        "--format",
        "json",
    ]
    mindie, vllm = (runner.invoke(app, [*base, "--engine", e]) for e in ("mindie", "vllm"))
    assert mindie.exit_code == vllm.exit_code == 0, vllm.output
    assert json.loads(mindie.stdout) != json.loads(vllm.stdout)  # the engine's step model and memory
    eagle = runner.invoke(app, [*base, "--engine", "vllm", "--speculative-config", EAGLE3])
    assert json.loads(eagle.stdout)["tokens_per_step"] > 1.0
    table = runner.invoke(
        app,
        [
            "sweep",
            "-m",
            "qwen3-32b",
            "--batch",
            "1",
            "--ctx",
            "1k",
            "--dp",
            "2",
            "--pp",
            "2",
            "--engine",
            "vllm",
        ],
    )  # vLLM: kvplan knows no MindIE pipeline-parallel setting (sweep refuses it as plan does)
    assert table.exit_code == 0, table.output
    assert "dp=2, pp=2, batch per DP group, aggregate per DP group" in " ".join(table.stdout.split())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--dp", "0"], "--dp: out of range (got 0, expected 1..1024)"),
        (["--pp", "2000"], "--pp: out of range (got 2000, expected 1..1024)"),
        (["--ep", "0"], "--ep: out of range (got 0, expected 1..1024)"),
        (["--engine", "foo"], "--engine: unknown engine (got 'foo'"),
        (
            ["--gpu-memory-utilization", "1.5"],
            "--gpu-memory-utilization: out of range (got 1.5, expected in [0.01, 1]",  # named as typed
        ),
        (["--speculative-config", "{"], "--speculative-config: not JSON (got '{'"),
        (
            ["--mtp", "1", "--acceptance-rate", "2"],
            "--acceptance-rate: out of range (got 2.0, expected in [0, 1])",
        ),
    ],
)
def test_sweep_new_flags_are_validated_in_one_line(extra: list[str], message: str) -> None:
    fails_with(["sweep", "-m", "qwen3-8b", "--batch", "1", "--ctx", "1k", *extra], message)


def test_layout_takes_speculative_decoding() -> None:
    base = [
        "layout",
        "-m",
        "qwen3-32b",
        "--card",
        "ascend-910c",
        "--budget-devices",
        "2",
        "--engine",
        "vllm",
        "--json",
    ]
    plain = runner.invoke(app, base)
    drafted = runner.invoke(app, [*base, "--speculative-config", EAGLE3, "--acceptance-rate", "0.6"])
    assert drafted.exit_code == 0, drafted.output
    assert json.loads(plain.stdout)["candidates"] != json.loads(drafted.stdout)["candidates"]
    fails_with([*base, "--mtp", "1"], "--mtp: qwen3-32b ships no MTP layers")
    fails_with([*base, "--mtp-acceptance", "1.5"], "--mtp-acceptance")


def test_serve_takes_the_engines_context_length() -> None:
    base = [
        "serve",
        "-m",
        "qwen3-32b",
        "--input-tokens",
        "1k",
        "--output-tokens",
        "512",
        "--concurrency",
        "4",
    ]
    default, given, alias = (
        runner.invoke(app, [*base, *flags, "--json"])
        for flags in ([], ["--ctx", "1536"], ["--max-model-len", "1536"])
    )
    assert default.exit_code == given.exit_code == 0, given.output
    assert (
        json.loads(default.stdout) == json.loads(given.stdout) == json.loads(alias.stdout)
    )  # input + output
    longer = runner.invoke(app, [*base, "--ctx", "32k", "--json"])
    assert longer.exit_code == 0, longer.output
    fails_with(
        [*base, "--ctx", "1k"],
        "--ctx: shorter than one request (got 1024, expected >= --input-tokens + --output-tokens = 1536)",
    )
    fails_with([*base, "--ctx", "12q"], "--ctx: not a token count (got '12q'")


# --- bench import ----------------------------------------------------------------------------------------

RESULT = Path(__file__).parent / "fixtures" / "bench_results" / "vllm_bench_serve.json"
IMPORT = ["bench", "import", "--card", "ascend-910b3", "-m", "qwen3-8b"]


def spec_result(tmp_path: Path, **fields: float) -> str:
    """The fixture vllm bench result with spec_decode_* fields (what vLLM's bench adds after a run with
    speculative decoding): 1000 drafts of 3 tokens, 1926 accepted = 64.2 %."""
    data = json.loads(RESULT.read_text())
    stated = {
        "spec_decode_num_drafts": 1000, "spec_decode_draft_tokens": 3000, "spec_decode_accepted_tokens": 1926,
        "spec_decode_acceptance_rate": 64.2, "spec_decode_acceptance_length": 2.926,
    }  # fmt: skip
    data.update({**stated, **fields})
    path = tmp_path / f"spec-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(data))
    return str(path)


def row_of(result: object) -> dict[str, str]:
    lines = result.stdout.splitlines()  # type: ignore[attr-defined]
    return dict(zip(lines[0].split(","), lines[1].split(","), strict=True))


def test_bench_import_records_the_speculative_decoding_the_file_states(tmp_path: Path) -> None:
    path = spec_result(tmp_path)
    result = runner.invoke(app, [*IMPORT, path])
    assert result.exit_code == 0, result.output
    row = row_of(result)
    # 3000 / 1000 = 3 drafts per step; a + a^2 + a^3 = 3 x 0.642 = 1.926 -> a = 0.7942 (chained_acceptance)
    assert (row["mtp"], row["mtp_acceptance"], row["speculative_method"]) == ("3", "0.7942", "")
    assert "3 draft tokens per step, 64.2% of drafted tokens accepted" in result.stderr
    assert "method not stated" in result.stderr
    named = runner.invoke(app, [*IMPORT, path, "--speculative-config", EAGLE3])
    assert (
        row_of(named)["speculative_method"] == "eagle3"
        and "method eagle3 from --speculative-config" in named.stderr
    )


def test_bench_import_says_when_the_file_states_none() -> None:
    result = runner.invoke(app, [*IMPORT, str(RESULT)])
    assert result.exit_code == 0, result.output
    assert row_of(result)["mtp"] == "0"
    assert (
        result.stderr
        == f"note: {RESULT}: speculative decoding not stated in the file; rows record none (mtp 0)\n"
    )


def test_bench_import_refuses_flags_or_files_that_contradict(tmp_path: Path) -> None:
    path = spec_result(tmp_path)
    two = '{"method": "eagle3", "num_speculative_tokens": 2}'
    fails_with(
        [*IMPORT, path, "--speculative-config", two], f"--speculative-config: {path} states 3 draft tokens"
    )
    fails_with([*IMPORT, path, "--mtp", "1", "--speculative-config", two], "--mtp: give the drafts once")
    many = spec_result(tmp_path, spec_decode_draft_tokens=40_000, spec_decode_accepted_tokens=100)
    fails_with([*IMPORT, many], f"{many}: spec_decode_draft_tokens / spec_decode_num_drafts: too many")
    over = spec_result(tmp_path, spec_decode_accepted_tokens=4000)
    fails_with([*IMPORT, over], f"{over}: spec_decode_accepted_tokens: more than were drafted")


@pytest.mark.parametrize("path", ["serve", "simulate"])
def test_serve_and_simulate_take_the_shared_slo_flags(path: str) -> None:
    """--tpot-ms / --ttft-ms come from the shared table (one declaration, one help, one error line)."""
    shared = {param.name: param for param in every_command()[""].params}
    mine = {param.name: param for param in every_command()[path].params}
    for name in ("tpot_ms", "ttft_ms"):
        assert mine[name].opts == shared[name].opts and mine[name].help == shared[name].help
    args = [path, "-m", "qwen3-8b", *(["--rate", "2", "--requests", "20"] if path == "simulate" else [])]
    fails_with([*args, "--tpot-ms", "-3"], "--tpot-ms: must be > 0 (got -3.0)")


COMMAND_BASES = {
    "vllm": VLLM,
    "mindie": MINDIE,
    "layout": ["layout", "-m", "qwen3-8b", "--budget-devices", "2"],
    "bench import": [*IMPORT, str(RESULT)],
}


@pytest.mark.parametrize(
    ("path", "extra", "message"),
    [
        (
            "vllm",
            ["--prefix-cached-fraction", "2"],
            "--prefix-cached-fraction: out of range (got 2.0, expected in [0, 1]",
        ),
        ("mindie", ["--mtp-acceptance", "3"], "--mtp-acceptance: out of range (got 3.0, expected in [0, 1])"),
        ("vllm", ["--bandwidth-gbps", "-1"], "--bandwidth-gbps: out of range (got -1.0"),
        ("mindie", ["--speculative-config", "[]"], "--speculative-config: not a JSON object (got '[]'"),
        ("vllm", ["--acceptance-rate", "0.5"], "--acceptance-rate: no speculative decoding to apply it to"),
        ("layout", ["--prefix-cached-fraction", "-1"], "--prefix-cached-fraction: out of range (got -1.0"),
        (
            "layout",
            ["--speculative-config", '{"method": "ngram"}'],
            "--speculative-config: method not modelled",
        ),
        (
            "bench import",
            ["--speculative-config", '{"method": "x"}'],
            "--speculative-config: method not modelled",
        ),
    ],
)
def test_new_flags_are_validated_in_one_line(path: str, extra: list[str], message: str) -> None:
    fails_with([*COMMAND_BASES[path], *extra], message)


def test_simulate_takes_the_engines_context_length() -> None:
    """--ctx on `simulate` is the engine's configured context: the longest request by default (the same
    run), refused below it, and a MindIE maxSeqLen of 128k holds fewer sequences at full length, so the
    running batch the simulator reaches cannot grow (hand check: qwen3-8b bf16 on a 64 GB 910B3 holds
    one or two 128k sequences)."""
    base = [
        "simulate",
        "-m",
        "qwen3-8b",
        "--card",
        "ascend-910b3",
        "--rate",
        "2",
        "--requests",
        "50",
        "--json",
    ]
    default, given, alias, long = (
        runner.invoke(app, [*base, *flags])
        for flags in ([], ["--ctx", "384"], ["--max-model-len", "384"], ["--ctx", "128k"])
    )
    assert default.exit_code == given.exit_code == alias.exit_code == long.exit_code == 0, long.output
    assert json.loads(default.stdout) == json.loads(given.stdout) == json.loads(alias.stdout)
    assert json.loads(long.stdout)["max_batch_reached"] < json.loads(default.stdout)["max_batch_reached"]
    fails_with([*base, "--ctx", "383"], "--ctx: shorter than the longest request (got 383, expected >= 384")


FRACTION_REFUSED = "--memory-fraction: out of range (got 1e-300, expected in [0.01, 1]: below 1 % the runtime"


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "qwen3-27b", "--dtype", "fp8"],
        ["mindie", "-m", "qwen3-27b", "--dtype", "fp8", "--weights-path", "/w"],
        ["vllm", "-m", "qwen3-27b", "--dtype", "fp8"],
        ["sglang", "-m", "qwen3-27b", "--dtype", "fp8"],
        ["serve", "-m", "qwen3-27b", "--dtype", "fp8"],
        ["simulate", "-m", "qwen3-27b", "--dtype", "fp8", "--concurrency", "2", "--requests", "4"],
        ["layout", "-m", "qwen3-27b", "--dtype", "fp8", "--budget-devices", "8"],
        ["sweep", "-m", "qwen3-27b", "--dtype", "fp8", "--batch", "1", "--ctx", "1k"],
    ],
)
def test_a_memory_fraction_that_leaves_nothing_usable_is_a_range_error(command: list[str]) -> None:
    """1e-300 of a card is no memory at all: exit 2 naming the flag, the value and the 1 % floor
    (inputs.MIN_MEMORY_FRACTION: the runtime reserve alone is 0.94-3.3 % of every catalogued card), as 0
    is; before, the plan ran and exited 3 with "0.00 GiB usable"."""
    fails_with([*command, "--memory-fraction", "1e-300"], FRACTION_REFUSED)


def test_the_dashboard_request_meets_the_same_floor() -> None:
    """The dashboard's memory-fraction widget reaches the plan through inputs.to_deployment (app.py's
    records.replace), so its floor is the flag's; the slider itself starts at 0.5, above it."""
    request = inputs.PlanRequest(model="qwen3-27b", memory_fraction=1e-300)
    with pytest.raises(PlanInputError, match=r"--memory-fraction: out of range \(got 1e-300"):
        inputs.to_deployment(request)
    assert inputs.to_deployment(records.replace(request, memory_fraction=0.5)).memory_fraction == 0.5
