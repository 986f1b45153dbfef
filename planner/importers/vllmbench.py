"""`vllm bench serve --save-result` JSON -> ServingResult.

Field names as vLLM writes them (vllm/benchmarks/serve.py: `result_json` = the run's settings
`max_concurrency`, `request_rate`, `num_prompts`, merged with the metrics `duration`, `completed`,
`total_input_tokens`, `total_output_tokens`, `output_throughput`, `mean_ttft_ms`, `mean_tpot_ms`, ...).
The same keys come from the older benchmarks/benchmark_serving.py and from SGLang's bench_serving JSON.
vLLM computes output_throughput as total_output_tokens / duration (calculate_metrics): a file stating them
apart is refused (servingresult.check_rate).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner import units
from planner.errors import DataFileError
from planner.importers.servingresult import ServingResult, check_rate, mean_tokens, number

REQUIRED = ("completed", "total_input_tokens", "total_output_tokens", "output_throughput")


def _optional_ms(data: Mapping[str, Any], key: str, *, where: str) -> float | None:
    if data.get(key) is None:
        return None
    return number(data[key], where=where, field=key) * units.MS_S


def _concurrency(data: Mapping[str, Any], *, where: str) -> int | None:
    """max_concurrency when set; with none and every request sent at once (request_rate inf), num_prompts."""
    if data.get("max_concurrency") is not None:
        cap = number(data["max_concurrency"], where=where, field="max_concurrency")
        if cap != int(cap) or cap < 1:
            raise DataFileError(f"{where}: max_concurrency: not a whole count >= 1 (got {cap:g})")
        return int(cap)
    if str(data.get("request_rate", "")) == "inf" and data.get("num_prompts") is not None:
        return int(number(data["num_prompts"], where=where, field="num_prompts"))
    return None


def _speculation(data: Mapping[str, Any], *, where: str) -> tuple[int | None, float | None]:
    """(draft tokens per step, accepted / drafted tokens) from the spec_decode_* fields vLLM's bench writes
    when the server ran speculative decoding (spec_decode_num_drafts, _draft_tokens, _accepted_tokens;
    vllm/benchmarks/serve.py); (None, None) when they are absent or no draft was made. The method is not
    among them: the file does not say who drafted.

    Formula: k = round(draft_tokens / num_drafts)   (each draft proposes k tokens)
             accepted fraction = accepted_tokens / draft_tokens
    """
    fields = ("spec_decode_num_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens")
    if any(data.get(key) is None for key in fields):
        return None, None
    counts = [number(data[key], where=where, field=key) for key in fields]
    for key, count in zip(fields, counts, strict=True):
        if count != int(count):
            raise DataFileError(f"{where}: {key}: not a whole count (got {count:g}, expected 0, 1, 2, ...)")
    drafts, drafted, accepted = counts
    if drafts == 0 and drafted == 0:
        return None, None
    if drafted < drafts or drafts == 0:  # each draft proposes k >= 1 tokens: drafted = k x drafts
        raise DataFileError(
            f"{where}: spec_decode_draft_tokens: fewer than one per draft (got {drafted:g} draft tokens over "
            f"{drafts:g} drafts, expected at least spec_decode_num_drafts and drafts > 0)"
        )
    if accepted > drafted:
        raise DataFileError(
            f"{where}: spec_decode_accepted_tokens: more than were drafted (got {accepted:g}, expected <= "
            f"spec_decode_draft_tokens {drafted:g})"
        )
    return max(1, round(drafted / drafts)), accepted / drafted


def from_dict(data: Mapping[str, Any], *, where: str) -> ServingResult:
    """The run a vllm bench serve result JSON describes; errors name the file and the missing field."""
    missing = [key for key in REQUIRED if data.get(key) is None]
    if missing:
        raise DataFileError(
            f"{where}: {missing[0]}: required field missing (got none of {', '.join(missing)}; "
            f"expected a `vllm bench serve --save-result` JSON)"
        )
    completed = number(data["completed"], where=where, field="completed")
    total_in = number(data["total_input_tokens"], where=where, field="total_input_tokens")
    total_out = number(data["total_output_tokens"], where=where, field="total_output_tokens")
    duration = (
        None if data.get("duration") is None else number(data["duration"], where=where, field="duration")
    )
    speculative_tokens, accepted_fraction = _speculation(data, where=where)
    result = ServingResult(
        concurrency=_concurrency(data, where=where),
        input_tokens=mean_tokens(total_in, completed, where=where, field="total_input_tokens"),
        output_tokens=mean_tokens(total_out, completed, where=where, field="total_output_tokens"),
        output_tokens_per_s=number(data["output_throughput"], where=where, field="output_throughput"),
        ttft_s=_optional_ms(data, "mean_ttft_ms", where=where),
        tpot_s=_optional_ms(data, "mean_tpot_ms", where=where),
        requests=int(completed),
        duration_s=duration,
        tool="vllm-bench-serve",
        where=where,
        model_id=str(data["model_id"]).strip() or None if data.get("model_id") is not None else None,
        speculative_tokens=speculative_tokens,
        accepted_draft_fraction=accepted_fraction,
        failed_requests=int(number(data.get("failed") or 0, where=where, field="failed")),
    )
    if (
        duration is not None and duration > 0
    ):  # vLLM writes output_throughput = total_output_tokens / duration
        check_rate(
            result.output_tokens_per_s,
            total_out / duration,
            where=where,
            field="output_throughput",
            derivation=f"total_output_tokens / duration = {total_out:.6g} / {duration:.6g} s",
        )
    return result
