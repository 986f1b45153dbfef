"""One serving-benchmark measurement, whatever tool printed it, and the bench row it becomes.

A load tool reports, for one run at a fixed cap on requests in flight: the aggregate output tokens/s, the mean
tokens in and out per request, and mean TTFT / TPOT. `ServingResult` holds exactly that, in SI units; the tool
parsers (vllmbench.py, aisbench.py, genaiperf.py) fill it; servingfiles.read_serving_result picks the parser
from the file's content. `bench_row` adds what no result file records (model, card, dtypes, tp, engine,
MTP) and gives the serving bench-row columns `kvplan calibrate --from-bench` reads (issue 10's interface).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from planner import readers, units
from planner.errors import DataFileError

# Columns of a serving bench row, in order (issue 10: `--from-bench` accepts rows with these columns).
ROW_COLUMNS = (
    "model", "card", "dtype", "kv_dtype", "tp", "dp", "ep", "engine", "concurrency", "input_tokens",
    "output_tokens", "output_tokens_per_s", "ttft_s", "tpot_s", "mtp", "mtp_acceptance", "speculative_method",
    "num_prompts",
    "duration_s", "tool", "source",
)  # fmt: skip
MAX_VALUE = 1e11  # above any count, rate or time (s) a serving run reports
MIN_MEASURED = 1e-12  # benchpoints.MIN_POSITIVE: a row below it (0 ms, say) is not re-readable
_NUMBER_RE = re.compile(r"^\s*([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*([A-Za-z/%]*)\s*$")


@dataclass(frozen=True)
class ServingResult:
    """One serving run: cap on requests in flight, mean lengths, aggregate output rate, mean latencies."""

    concurrency: int | None  # the client's cap on requests in flight (None: the file does not say)
    input_tokens: int  # mean prompt tokens per request
    output_tokens: int  # mean generated tokens per request
    output_tokens_per_s: float  # all generated tokens / benchmark duration (ramp and tail included)
    ttft_s: float | None  # mean time to first token
    tpot_s: float | None  # mean time per output token after the first
    requests: int | None  # completed requests
    duration_s: float | None  # benchmark duration
    tool: str  # which tool's format was read
    where: str  # the file, for messages
    model_id: str | None = None  # the model the run served, when the file records it (vllm bench: model_id)
    # speculative decoding as the file states it (vllm bench: spec_decode_*), None where it does not: draft
    # tokens per verify step, and accepted / drafted tokens (vLLM's "draft acceptance rate", as a fraction)
    speculative_tokens: int | None = None
    accepted_draft_fraction: float | None = None
    # requests the run lost (vllm bench: failed): its rates count the completed ones only
    failed_requests: int = 0


def parse_json(text: str, *, where: str) -> dict[str, Any]:
    """A JSON object from `text`; DataFileError naming the file when it is not one."""
    return readers.json_object(text, where=where)


def number(value: object, *, where: str, field: str, unit: str = "") -> float:
    """A finite number >= 0 from a JSON/CSV value, optionally suffixed by `unit` ("146.1 ms", "480 token/s").

    Errors name the file and the field, with the value and the limit.
    """
    if isinstance(value, bool) or value is None:
        raise DataFileError(f"{where}: {field}: expected a number (got {value!r})")
    text = str(value)
    match = _NUMBER_RE.match(text)
    if match is None or (match.group(2) and unit and match.group(2) != unit):
        expected = f"a number in {unit}" if unit else "a number"
        raise DataFileError(f"{where}: {field}: expected {expected} (got {text!r})")
    result = float(match.group(1))
    if not math.isfinite(result) or not 0 <= result <= MAX_VALUE:
        raise DataFileError(f"{where}: {field}: must be in [0, {MAX_VALUE:g}] (got {text!r})")
    return result


def mean_tokens(total: float, count: float, *, where: str, field: str) -> int:
    """Mean tokens per request = total / count, rounded; errors when the count is 0 or the mean is < 1."""
    if count < 1:  # also a denormal count, whose quotient overflows round()
        raise DataFileError(f"{where}: {field}: no completed requests to average over (got {count:g})")
    mean = total / count
    if not 1 <= mean <= units.MAX_TOKENS:
        raise DataFileError(
            f"{where}: {field}: mean tokens per request out of range "
            f"(got {mean:g}, expected 1..{units.MAX_TOKENS})"
        )
    return round(mean)


def checked(result: ServingResult) -> ServingResult:
    """The result if it can describe a serving run; DataFileError naming the file and the bad value."""
    if result.output_tokens_per_s <= 0:
        raise DataFileError(
            f"{result.where}: output token throughput: must be > 0 (got {result.output_tokens_per_s:g})"
        )
    if result.concurrency is not None and result.concurrency < 1:
        raise DataFileError(f"{result.where}: concurrency: must be >= 1 (got {result.concurrency})")
    for field in ("output_tokens_per_s", "ttft_s", "tpot_s", "duration_s"):  # what a bench row re-reads
        value = getattr(result, field)
        if value is not None and not MIN_MEASURED <= value <= MAX_VALUE:
            raise DataFileError(
                f"{result.where}: {field}: out of range "
                f"(got {value:g}, expected {MIN_MEASURED:g}..{MAX_VALUE:g})"
            )
    return result


# A stated output rate may differ from tokens / duration by this much before the file is refused: vLLM's bench
# (vllm/benchmarks/serve.py, calculate_metrics: output_throughput = sum(actual_output_lens) / dur_s, written
# beside total_output_tokens and duration), AISBench (calculators/base_perf_metric_calculator.py: Output Token
# Throughput = Total Generated Tokens / the stage's time, 4 decimals) and genai-perf (llm_profile_data_parser:
# output and request throughput over the same benchmark_duration) compute it from the very figures they
# write, so only rounding parts them: three figures copied to 3 significant digits move the ratio <= 1.5 %.
# A larger gap is another quantity (total-token rate, one request's rate) or a corrupted digit.  [assumed]
RATE_TOLERANCE_FRACTION = 0.02


def check_rate(
    stated_per_s: float,
    expected_per_s: float,
    *,
    where: str,
    field: str,
    derivation: str,
    tolerance_fraction: float = RATE_TOLERANCE_FRACTION,
) -> None:
    """DataFileError naming the file and both figures when a stated output rate (`field`) contradicts the
    rate the file's own figures give (`derivation` says how: 'total_output_tokens / duration = 131072 /
    152.4 s'): which of them is right cannot be told, so the file is refused, not imported.

    Formula: |stated_per_s / expected_per_s - 1| <= tolerance_fraction
    Skipped where either rate is out of the range `checked` enforces (it names that one).
    """
    if not all(MIN_MEASURED <= rate <= MAX_VALUE for rate in (stated_per_s, expected_per_s)):
        return
    if abs(stated_per_s / expected_per_s - 1.0) <= tolerance_fraction:
        return
    raise DataFileError(
        f"{where}: {field}: contradicts {derivation} (got {stated_per_s:.6g} tok/s, expected "
        f"{expected_per_s:.6g} tok/s within {tolerance_fraction * units.PERCENT:.3g} %); which figure is "
        "wrong cannot be told: re-export the result"
    )


def rounding_fraction(cell: str) -> float:
    """The relative error a decimal cell carries from its printed digits: half a unit of its last digit over
    its value ('1.65' -> 0.005 / 1.65); 0 for a cell that is not a plain positive decimal."""
    match = _NUMBER_RE.match(cell)
    if match is None or float(match.group(1)) <= 0 or "e" in match.group(1).lower():
        return 0.0
    digits = match.group(1).partition(".")[2]
    return 0.5 * 10.0 ** -len(digits) / float(match.group(1))


def _cell(value: float | int | None) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else f"{value:.6g}"


def bench_row(result: ServingResult, *, setup: dict[str, str]) -> dict[str, str]:
    """The serving bench row: `setup` (model, card, dtype, kv_dtype, tp, engine, mtp, ...) + the result.

    Errors when the result has no concurrency (genai-perf without --concurrency).
    """
    if result.concurrency is None:
        raise DataFileError(
            f"{result.where}: concurrency: not recorded in this file (got nothing); pass --concurrency"
        )
    measured = {
        "concurrency": _cell(result.concurrency),
        "input_tokens": _cell(result.input_tokens),
        "output_tokens": _cell(result.output_tokens),
        "output_tokens_per_s": _cell(result.output_tokens_per_s),
        "ttft_s": _cell(result.ttft_s),
        "tpot_s": _cell(result.tpot_s),
        "num_prompts": _cell(result.requests),  # completed requests: the run's length for the closed loop
        "duration_s": _cell(result.duration_s),
        "tool": result.tool,
        "source": result.where,
    }
    return {column: {**setup, **measured}.get(column, "") for column in ROW_COLUMNS}
