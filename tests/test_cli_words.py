"""Issue 25, "Speak the engine's language": --version, the spellings vLLM users type as aliases, and one flag
name for one thing on every sub-command."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
import typer.main
from typer.testing import CliRunner

import planner
from planner.cli import app

runner = CliRunner()
PLAN = ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8", "--json"]

# Flags whose value is a list on `kvplan sweep` (grid axes), not the one value the others take.
GRID_AXES = {("sweep", "--batch"), ("sweep", "--ctx"), ("sweep", "--dtype")}
# simulate keeps MindIE's maxPrefillTokens and vLLM's max_num_batched_tokens as two scheduler knobs.
SCHEDULER_KNOBS = {
    ("simulate", "--max-prefill-tokens"),
    ("simulate", "--max-batched-tokens"),
    ("simulate", "--max-num-batched-tokens"),
}


def commands() -> dict[str, object]:
    """Every command of the app, by its path ('' is the plan)."""
    root = typer.main.get_command(app)
    found: dict[str, object] = {"": root}

    def walk(group: object, prefix: str) -> None:
        for name in group.list_commands(None):  # type: ignore[attr-defined]
            command = group.get_command(None, name)  # type: ignore[attr-defined]
            found[f"{prefix}{name}"] = command
            if hasattr(command, "list_commands"):
                walk(command, f"{prefix}{name} ")

    walk(root, "")
    return found


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == f"kvplan {planner.__version__}\n"


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        (["--max-model-len", "8k"], ["--ctx", "8k"]),
        (["--tensor-parallel-size", "2"], ["--tp", "2"]),
        (["--kv-cache-dtype", "fp16"], ["--kv-dtype", "fp16"]),
        (["--gpu-memory-utilization", "0.9"], ["--memory-fraction", "0.9"]),
        (["--max-num-seqs", "4"], ["--batch", "4"]),
        (["--max-num-batched-tokens", "16384"], ["--max-prefill-tokens", "16384"]),
    ],
)
def test_vllm_spellings_are_aliases(alias: list[str], canonical: list[str]) -> None:
    base = ["--model", "qwen3-27b", "--dtype", "fp8", "--json"]
    got, want = (runner.invoke(app, [*base, *flags]) for flags in (alias, canonical))
    assert got.exit_code == 0, got.output
    assert json.loads(got.output) == json.loads(want.output)
    default = json.loads(runner.invoke(app, base).output)
    assert json.loads(got.output) != default  # the alias was not ignored


def test_one_flag_name_for_one_thing_on_every_command() -> None:
    """A flag spelling means one option, with the same spellings, wherever it appears."""
    spellings: dict[str, dict[frozenset[str], list[str]]] = defaultdict(lambda: defaultdict(list))
    for path, command in commands().items():
        name = path.split(" ")[0]
        for param in command.params:  # type: ignore[attr-defined]
            opts = frozenset(o for o in param.opts if o.startswith("--"))
            for opt in opts:
                if (name, opt) not in GRID_AXES | SCHEDULER_KNOBS:
                    spellings[opt][opts].append(path or "plan")
    mixed = {opt: dict(by) for opt, by in spellings.items() if len(by) > 1}
    assert mixed == {}
    for opt in ("--tensor-parallel-size", "--max-model-len", "--max-num-seqs", "--kv-cache-dtype"):
        assert opt in spellings


def test_the_plan_forwards_every_flag_the_config_commands_share_with_it() -> None:
    """CONFIG_OPTIONS (the plan's flags its `Next: kvplan mindie|vllm ...` line repeats) is a hand list kept
    so the mission command builds no sub-command: it must name exactly the options the plan, `mindie` and
    `vllm` all take (--json aside: it changes the output, not the config)."""
    from planner.cli import CONFIG_OPTIONS

    found = commands()
    shared = set.intersection(
        *({param.name for param in found[path].params} for path in ("", "mindie", "vllm"))  # type: ignore[attr-defined]
    )
    assert set(CONFIG_OPTIONS) == shared - {"as_json", "version"}


def test_a_given_batch_is_not_called_bound_by_memory() -> None:
    plan = ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8"]
    given = runner.invoke(app, [*plan, "--batch", "16"], terminal_width=200)
    assert given.exit_code == 0
    assert "(set by --batch;" in given.output and "bound by memory" not in given.output
    assert (
        json.loads(runner.invoke(app, [*plan, "--batch", "16", "--json"]).output)["recommendation"][
            "binding_constraint"
        ]
        == "batch"
    )
    free = runner.invoke(app, plan, terminal_width=200)
    assert "(bound by memory;" in free.output


def engine_words(output: str, title: str) -> dict[str, str]:
    """{field: value} of the plan's `title: name value, ...` line."""
    line = next(row.strip() for row in output.splitlines() if row.strip().startswith(f"{title}:"))
    return dict(item.split(" ", 1) for item in line.split(": ", 1)[1].split(", "))


# The plan both parametrized tests below start from (and vary: another engine, an SLO with a memory override).
LONG_FP8 = ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8"]


def next_command(output: str) -> list[str]:
    line = next(row.strip() for row in output.splitlines() if row.strip().startswith("Next: kvplan "))
    return line.removeprefix("Next: kvplan ").replace("<checkpoint dir>", "/w").split()


@pytest.mark.parametrize(
    "flags",
    [
        LONG_FP8,
        ["--model", "qwen3-32b", "--ctx", "8k", "--tp", "2", "--card", "ascend-910b3"],
        # the SLO lowers the batch (bound by ttft): the next command carries it as --batch; 700 ms binds below
        # the memory limit (19) on the fitted 950PR profile: batch 12 (the simulated search at the default
        # 256 in / 128 out workload; the old analytic one timed a 32k prompt)
        [*LONG_FP8, "--ttft-ms", "700", "--memory-gib", "96.0"],
    ],
)
def test_plan_speaks_mindie_and_its_next_command_writes_the_same_numbers(flags: list[str]) -> None:
    plan = runner.invoke(app, flags, terminal_width=240)
    assert plan.exit_code == 0, plan.output
    words = engine_words(plan.output, "MindIE config.json")
    args = next_command(plan.output)
    slo = {"--ttft-ms", "700"}
    assert args[0] == "mindie" and all(flag in args for flag in flags if flag not in slo | {"96.0"})
    assert ("--batch" in args) == ("--ttft-ms" in flags)
    written = runner.invoke(app, [*args[: args.index("-o")], "--json"])
    assert written.exit_code == 0, written.output
    config = json.loads(written.stdout)["mindie"]["config"]["BackendConfig"]
    schedule, deploy = config["ScheduleConfig"], config["ModelDeployConfig"]
    assert int(words["maxBatchSize"]) == schedule["maxBatchSize"]
    assert int(words["maxSeqLen"]) == deploy["maxSeqLen"]
    assert int(words["maxPrefillTokens"]) == schedule["maxPrefillTokens"]
    assert words["npuMemSize"].split()[0] == str(deploy["ModelConfig"][0]["npuMemSize"])


def test_plan_speaks_vllm_and_its_next_command_prints_the_same_flags() -> None:
    flags = ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8", "--engine", "vllm"]
    plan = runner.invoke(app, flags, terminal_width=240)
    assert plan.exit_code == 0, plan.output
    words = engine_words(plan.output, "vllm serve")
    args = next_command(plan.output)
    assert args[0] == "vllm" and "--engine" not in args
    printed = runner.invoke(app, [*args, "--json"])
    assert printed.exit_code == 0, printed.output
    served = dict(json.loads(printed.stdout)["vllm"]["args"])
    for name in ("--max-num-seqs", "--max-model-len", "--max-num-batched-tokens", "--gpu-memory-utilization"):
        assert float(words[name]) == float(served[name]), name


def test_fit_jargon_becomes_what_it_means_and_stays_technical_in_explain_and_json() -> None:
    # the 910C vllm-ascend fit ships KV-read on its bound (with a written reason); the 950PR seed fit
    # saw 384-token contexts only
    bound = ["--model", "qwen3-32b", "--card", "ascend-910c", "--engine", "vllm", "--tp", "2", "--ctx", "4k"]
    plan = ["--model", "qwen3-27b", "--ctx", "4k", "--dtype", "fp8"]
    text = (
        runner.invoke(app, bound, terminal_width=400).output
        + runner.invoke(app, plan, terminal_width=400).output
    )
    assert "sits on its upper bound" not in text and "is outside the fitted range" not in text
    assert "the speed figures are less firm than their range says" in text
    assert "the card's fit saw contexts of 384 only, this plan is at 4096" in text
    assert "calibrate --from-bench" in text  # what would make it firmer
    explained = runner.invoke(app, [*bound, "--explain"], terminal_width=400).output
    assert (
        "fit detail: speed from a fitted profile: kv_read_bandwidth_fraction = 1 sits on its upper"
        in explained
    )
    warnings = [
        *json.loads(runner.invoke(app, [*bound, "--json"]).output)["warnings"],
        *json.loads(runner.invoke(app, [*plan, "--json"]).output)["warnings"],
    ]
    assert any("sits on its upper bound" in w for w in warnings)
    assert any("ctx 4096 is outside the fitted range 384-384" in w for w in warnings)


@pytest.mark.parametrize(
    "flags",
    [
        LONG_FP8,
        [*LONG_FP8, "--engine", "vllm"],
        [*LONG_FP8, "--ttft-ms", "4500", "--memory-gib", "96.0"],
    ],
)
def test_json_carries_the_engine_words_and_the_next_command_the_text_prints(flags: list[str]) -> None:
    """--json has the engine's own field names with their values and the next command, the same as the
    text's `<title>: name value, ...` and `Next:` lines (which stay as they were)."""
    text = runner.invoke(app, flags, terminal_width=240)
    data = runner.invoke(app, [*flags, "--json"])
    assert text.exit_code == 0 and data.exit_code == 0, (text.output, data.output)
    config = json.loads(data.stdout)["engine_config"]
    assert config["fields"] == engine_words(text.output, config["title"])
    assert config["next_command"].replace("<checkpoint dir>", "/w").split() == [
        "kvplan",
        *next_command(text.output),
    ]
    names = set(config["fields"])
    if "--engine" in flags:
        assert {"--max-num-seqs", "--max-model-len", "--gpu-memory-utilization"} <= names
    else:
        assert {"maxBatchSize", "maxSeqLen", "maxPrefillTokens", "npuMemSize"} == names
        assert config["next_command"].startswith("kvplan mindie --model qwen3-27b")


def test_json_engine_config_is_null_for_an_engine_without_a_config_command() -> None:
    result = runner.invoke(app, [*PLAN, "--engine", "transformers"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["engine_config"] is None
