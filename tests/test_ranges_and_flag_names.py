"""A printed range holds its printed point (units.fmt_span's point), and errors name the flag the user typed:
--min-user-tps, --input-tokens / --prompt-tokens, --search and --quantile apart (review items 15, 10, 11)."""

import re

import pytest

from planner import kinds, units
from tests.helpers import kvplan


@pytest.mark.parametrize(
    ("low", "high", "point", "decimals", "expected"),
    [
        (47.78, 177.0, 47.78, 1, "47.8-177"),  # the fast end is the point: printed as the point is
        (5.65, 20.94, 20.94, 1, "5.65-20.9"),
        (226.0, 837.66, 837.66, 1, "226-837.7"),
        (0.0117, 0.0432, 0.0432, 1, "0.0-0.0"),  # a point printed 0.0 is inside its range
        (28.81, 107.2, 50.0, 1, "28.8-108"),  # an inner point leaves the outward rounding alone
        (99.96, 120.0, 99.96, None, "100.0-120"),  # as fmt_figures prints the point
    ],
)
def test_span_holds_its_point(
    low: float, high: float, point: float, decimals: int | None, expected: str
) -> None:
    text = units.fmt_span(low, high, point=point, point_decimals=decimals)
    assert text == expected
    ends = [float(x.replace(",", "")) for x in text.split("-")]
    shown = round(point, units._span_decimals(point) if decimals is None else decimals)
    assert ends[0] <= shown <= ends[1]


FIGURE_AND_RANGE = re.compile(
    r"([\d,.]+) (?:ms|tok/s)(?: per user| aggregate)? \((?:range )?([\d,.]+)-([\d,.]+)"
)


@pytest.mark.parametrize(
    "args",
    [
        "-m deepseek-v3 --card ascend-910c --dtype int8 --tp 8 --dp 2 --ep 16 --ctx 4k",
        "-m qwen3-27b --dtype fp8 --ctx 32k --mtp 1",
    ],
)
def test_plan_speed_ranges_hold_their_figures(args: str) -> None:
    speed = " ".join(kvplan(args).stdout.split()).split("Speed at")[1].split("Load knee")[0]
    found = FIGURE_AND_RANGE.findall(speed)
    assert len(found) >= 3, speed
    for point, low, high in found:
        value, lo, hi = (float(x.replace(",", "")) for x in (point, low, high))
        assert lo <= value <= hi, speed
    assert "TPOT 47.8 ms (range 47.8-177" in speed or "deepseek" not in args


def test_min_user_tps_is_named_in_the_slo_error() -> None:
    run = kvplan("-m qwen3-27b --dtype fp8 --min-user-tps 1e308", code=3)
    assert "--min-user-tps 1e+308" in run.output
    run = kvplan("serve -m qwen3-27b --dtype fp8 --min-user-tps 1000", code=3)
    assert "--min-user-tps 1000" in run.output
    tighter_tpot = kvplan("serve -m qwen3-27b --dtype fp8 --min-user-tps 1000 --tpot-ms 0.5", code=3)
    assert "--min-user-tps" not in tighter_tpot.output and "TPOT <= 0.5 ms" in tighter_tpot.output


@pytest.mark.parametrize("flag", ["--input-tokens", "--prompt-tokens"])
def test_plan_names_the_prompt_flag_typed(flag: str) -> None:
    run = kvplan(f"-m qwen3-27b --dtype fp8 {flag} 0", code=2)
    assert f"{flag}: not a token count" in run.output
    other = {"--input-tokens": "--prompt-tokens", "--prompt-tokens": "--input-tokens"}[flag]
    assert other not in run.output
    assert f"{flag}: not a token count" in kvplan(f"-m qwen3-27b --dtype fp8 {flag}=0", code=2).output


def test_search_and_quantile_checked_apart() -> None:
    base = "simulate -m qwen3-27b --dtype fp8 --rate 1"
    quantile = kvplan(f"{base} --quantile p50 --search knee", code=2).output
    assert "--quantile: unknown (got 'p50'" in quantile and "'knee'" not in quantile
    search = kvplan(f"{base} --quantile p99 --search kne", code=2).output
    assert "--search: unknown (got 'kne'" in search and "--quantile" not in search


@pytest.mark.parametrize(
    ("words", "typed"),
    [
        ("vllm -m qwen3-27b --gpu-memory-utilization 0.005", "--gpu-memory-utilization"),
        ("vllm -m qwen3-27b --memory-fraction 0.005", "--memory-fraction"),
        ("vllm -m qwen3-27b --max-num-batched-tokens 0", "--max-num-batched-tokens"),
        ("-m qwen3-27b --max-model-len 0", "--max-model-len"),
        ("-m qwen3-27b --ctx 0", "--ctx"),
        ("-m qwen3-27b --ctx 4k --prompt-tokens 8k", "--prompt-tokens"),
        ("-m qwen3-27b --ctx 4k --input-tokens 8k", "--input-tokens"),
    ],
)
def test_a_range_error_names_the_spelling_typed(words: str, typed: str) -> None:
    result = kvplan(words, code=2)
    assert result.output.startswith(f"kvplan: error: {typed}:"), result.output


@pytest.mark.parametrize(
    "words",
    [
        "-m qwen3-27b --dtype fp8",
        "mindie -m qwen3-27b --dtype fp8 --weights-path /w",
        "vllm -m qwen3-27b --dtype fp8",
        "sglang -m qwen3-27b --dtype fp8",
        "serve -m qwen3-27b --dtype fp8 --input-tokens 1 --output-tokens 1",
        "sweep -m qwen3-27b --dtype fp8",
    ],
)
def test_every_command_refuses_a_context_under_two_tokens(words: str) -> None:
    """A context holds at least one input and one output token (kinds.MIN_CTX_TOKENS = 2) on every command:
    --ctx 1 is refused in one line naming --ctx, its value and the limit (the plan used to accept it and
    print a Next: command that failed on flags the user never typed)."""
    run = kvplan(f"{words} --ctx 1", code=2)
    assert "--ctx: a context holds at least 1 input and 1 output token (got 1, expected >= 2)" in run.output
    assert "--max-input-tokens" not in run.output
    if not words.startswith("sweep"):  # the sweep's --ctx is a list and has no vLLM spelling
        assert kvplan(f"{words} --max-model-len 1", code=2).output.count("--max-model-len: a context") == 1


@pytest.mark.parametrize("ctx", [2, 3, 4, 7, 200, 384, 1000, 32768])
def test_default_workload_fits_the_context(ctx: int) -> None:
    """The load knee's and TTFT's default workload never exceeds --ctx (at ctx 2 and 3 it was 2+1, 3+1)."""
    prompt, output = kinds.default_request_tokens(ctx)
    assert prompt >= 1 and output >= 1 and prompt + output <= ctx
    if ctx >= 384:
        assert (prompt, output) == (kinds.DEFAULT_INPUT_TOKENS, kinds.DEFAULT_OUTPUT_TOKENS)


def test_the_shortest_context_plans_and_writes_configs() -> None:
    """--ctx 2 (the smallest) plans with a knee of 1 in / 1 out, and its Next: command runs."""
    text = " ".join(kvplan("-m qwen3-27b --dtype fp8 --ctx 2").stdout.split())
    assert "at 1 in / 1 out" in text
    kvplan("mindie -m qwen3-27b --dtype fp8 --ctx 2 --weights-path /w")
    kvplan("vllm -m qwen3-27b --dtype fp8 --ctx 2 --weights-path /w")


@pytest.mark.parametrize("flag", ["--max-prefill-tokens", "--max-num-batched-tokens"])
def test_mindie_prefill_limit_names_the_prefill_flag(flag: str) -> None:
    """A prefill budget past MindIE's 4194304 from the flag (not from --ctx) names the flag as typed, its
    value and the limit, on the plan and `kvplan mindie`."""
    for words in ("-m qwen3-27b --dtype fp8", "mindie -m qwen3-27b --dtype fp8 --weights-path /w"):
        run = kvplan(f"{words} {flag} 100000000", code=2)
        text = " ".join(run.output.split())
        assert f"{flag}: MindIE's maxPrefillTokens is at most 4194304 tokens (got 100000000" in text
        assert "--ctx" not in text


@pytest.mark.parametrize(
    ("words", "flag", "got"),
    [
        (
            "serve -m qwen3-8b --engine mindie --input-tokens 5000000 --output-tokens 10",
            "--input-tokens",
            5000000,
        ),
        (
            "simulate -m qwen3-8b --engine mindie --input-tokens 5000000 --output-tokens 10 --rate 1",
            "--input-tokens",
            5000000,
        ),
        (
            "mindie -m qwen3-8b --ctx 5000000 --max-input-tokens 4500000 --weights-path /w",
            "--max-input-tokens",
            4500000,
        ),
    ],
)
def test_a_prompt_past_mindies_limit_names_the_prompt_flag(words: str, flag: str, got: int) -> None:
    """A budget MindIE raised to fit the prompt is the prompt's fault: the error names --input-tokens (serve,
    simulate) or --max-input-tokens (kvplan mindie), not --max-prefill-tokens nobody typed (review h58)."""
    result = kvplan(words, code=2)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"kvplan: error: {flag}: ") and f"got {got}, expected <= 4194304" in lines[0]
