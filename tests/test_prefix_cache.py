"""--prefix-cached-fraction: the share of each prompt a prefix cache holds (issue 23's shared-prefix rows).

The hit follows vLLM v1's KVCacheManager.get_computed_blocks: whole blocks only, never the last prompt token
(planner/perf/prefix.py prefix_hit_tokens); prefill computes the rest, attending the whole prompt.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner import inputs
from planner.cli import app
from planner.engines import registry
from planner.perf import roofline
from planner.perf.prefix import prefix_hit_tokens
from planner.serving import closed_loop

PREDICTIONS = Path(__file__).resolve().parents[1] / "lab" / "published" / "predictions-after.csv"
SERVE = ["serve", "-m", "qwen3-32b", "--card", "ascend-910c", "--engine", "vllm", "--tp", "2"]
LOAD = [
    "--input-tokens",
    "8192",
    "--output-tokens",
    "256",
    "--concurrency",
    "8",
    "--max-prefill-tokens",
    "16384",
]


def deployment(fraction: float, *, model: str = "qwen3-32b", tp: int = 2, ctx: str = "8448"):
    request = inputs.PlanRequest(
        model=model, card="ascend-910c", engine="vllm", tp=tp, ctx=ctx, max_prefill_tokens=16384,
        prefix_cached_fraction=fraction,
    )  # fmt: skip
    return inputs.to_deployment(request)


@pytest.mark.parametrize(
    ("prompt", "fraction", "block", "expected"),
    [
        # Qwen3.5-27B at tp=2 on vllm-ascend: 1536-token hybrid blocks; floor(0.9 * 32768) = 29491 shared
        # tokens hold 19 whole blocks = 29184 (< floor(32767 / 1536) = 21 blocks)
        (32768, 0.9, 1536, 19 * 1536),
        # 128-token blocks: 29491 // 128 = 230 blocks = 29440 tokens
        (32768, 0.9, 128, 230 * 128),
        # the whole prompt shared: 8 blocks, but the last prompt token is recomputed: floor(1023 / 128) = 7
        (1024, 1.0, 128, 7 * 128),
        # a shared prefix shorter than one block hits nothing
        (1024, 0.1, 128, 0),
        (1024, 0.0, 128, 0),
    ],
)
def test_hit_is_whole_blocks_and_never_the_last_token(
    prompt: int, fraction: float, block: int, expected: int
):
    assert prefix_hit_tokens(prompt, cached_fraction=fraction, block_tokens=block) == expected


def test_hybrid_hit_uses_the_engines_block() -> None:
    dep = deployment(0.9, model="qwen3.5-27b", ctx="33280")
    assert registry.prefix_cache_block_tokens(dep) == 1536  # vllm-ascend's aligned hybrid block at tp=2
    assert roofline.cached_prompt_tokens(dep, prompt_tokens=32768) == 19 * 1536


def test_prefill_computes_only_the_uncached_tokens() -> None:
    dep = deployment(0.5)
    hit = roofline.cached_prompt_tokens(dep, prompt_tokens=8192)
    assert hit == 4096  # 0.5 * 8192 = 32 whole 128-token blocks
    step = roofline.prefill_step(dep, prompt_tokens=8192, cached_tokens=hit)
    assert step.tokens.sum() == 8192 - 4096
    assert step.cached_tokens[0] == 4096  # the cached prefix is read, then attended
    assert step.attended_tokens[0] == 4096 + (4096 + 1) / 2
    full_s = roofline.ttft_s(deployment(0.0), prompt_tokens=8192)
    cached_s = roofline.ttft_s(dep, prompt_tokens=8192)
    # half the tokens computed; each still attends the whole prompt, so the time falls by less than half
    assert 0.5 * full_s < cached_s < full_s


def test_fraction_zero_is_todays_estimate() -> None:
    plain = deployment(0.0)
    assert roofline.cached_prompt_tokens(plain, prompt_tokens=8192) == 0
    default = plain.model_copy(update={"prefix_cached_fraction": 0.0})
    one = closed_loop.serving_estimate(plain, input_tokens=8192, output_tokens=256, concurrency=8)
    two = closed_loop.serving_estimate(default, input_tokens=8192, output_tokens=256, concurrency=8)
    assert one == two


def test_serve_with_a_cached_prefix_is_faster_and_zero_changes_nothing() -> None:
    runner = CliRunner()
    base = json.loads(runner.invoke(app, [*SERVE, *LOAD, "--json"]).stdout)
    zero = json.loads(runner.invoke(app, [*SERVE, *LOAD, "--prefix-cached-fraction", "0", "--json"]).stdout)
    cached = json.loads(
        runner.invoke(app, [*SERVE, *LOAD, "--prefix-cached-fraction", "0.9", "--json"]).stdout
    )
    assert zero == base
    assert cached["instance_output_tokens_per_s"] > base["instance_output_tokens_per_s"]


@pytest.mark.parametrize("command", ["serve", "simulate"])
@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan"])
def test_out_of_range_fraction_is_one_error_line(command: str, value: str) -> None:
    args = [command, "-m", "qwen3-32b", "--card", "ascend-910c", "--concurrency", "4"]
    args += ["--prefix-cached-fraction", value]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"kvplan: error: --prefix-cached-fraction: out of range (got {float(value)}")
    assert "expected in [0, 1]" in lines[0]


def test_simulate_prefills_less_with_a_cached_prefix() -> None:
    args = ["simulate", "-m", "qwen3-32b", "--card", "ascend-910c", "--engine", "vllm", "--tp", "2"]
    args += ["--input-tokens", "8192", "--output-tokens", "64", "--concurrency", "4", "--requests", "40"]
    runner = CliRunner()
    plain = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    cached = json.loads(runner.invoke(app, [*args, "--prefix-cached-fraction", "0.9", "--json"]).stdout)
    assert cached["throughput"]["output_tokens_per_s"] > plain["throughput"]["output_tokens_per_s"]


@pytest.mark.lab
def test_shared_prefix_rows_are_predicted_not_skipped() -> None:
    with PREDICTIONS.open(encoding="utf-8") as handle:
        rows = {int(row["row"]): row for row in csv.DictReader(handle)}
    assert not any("shared-prefix dataset" in row["status"] for row in rows.values())
    cached = [391, 393, 394, 397, 399, 400, 401, 402, 403, 409, 410, 413, 414]
    for index in cached:
        assert rows[index]["status"] == "predicted", index
        assert "--prefix-cached-fraction 0.9" in rows[index]["command"], index
    for index in (32, 40, 100, 404):  # prefix caching off in those CI cases (predict.PREFIX_CACHING_OFF)
        assert rows[index]["status"] == "predicted", index
        assert "--prefix-cached-fraction" not in rows[index]["command"], index


def test_plan_ttft_reads_the_cached_share() -> None:
    args = ["--model", "qwen3-32b", "--card", "ascend-910c", "--engine", "vllm", "--tp", "2", "--ctx", "32k"]
    args += ["--prompt-tokens", "24k", "--json"]
    runner = CliRunner()
    plain = json.loads(runner.invoke(app, args).stdout)
    cached = json.loads(runner.invoke(app, [*args, "--prefix-cached-fraction", "0.9"]).stdout)
    assert cached["performance"]["ttft_s"] < plain["performance"]["ttft_s"]
