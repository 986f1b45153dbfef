"""AISBench performance results (the load tool vllm-ascend's nightly CI runs) -> ServingResult.

`ais_bench --mode perf` writes, per dataset, `performances/<model task>/<dataset>.json` and a `.csv` beside it
(vllm-ascend tools/aisbench.py reads both: `result_json["Output Token Throughput"]["total"]`, and the CSV
indexed by metric with an "Average" column). Names as AISBench writes them:
- JSON: {metric: {stage: value}}, stage "total" (or "stable"), values carrying units: "Benchmark Duration"
  ("40152.7 ms"), "Total Requests", "Success Requests", "Concurrency" (mean in flight), "Max Concurrency"
  (the cap), "Total Input Tokens", "Total generated tokens", "Output Token Throughput" ("3264.3 token/s").
- CSV: `Performance Parameters,Stage,Average,Min,Max,Median,P75,P90,P99,N` with rows E2EL, TTFT, TPOT, ITL
  ("146.1 ms"), and InputTokens / OutputTokens per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from planner import csvfiles, readers, units
from planner.errors import DataFileError
from planner.importers.servingresult import ServingResult, check_rate, mean_tokens, number, parse_json

THROUGHPUT = "Output Token Throughput"
GENERATED = "Total generated tokens"
DURATION = "Benchmark Duration"
STAGES = ("total", "stable")


def is_aisbench(data: Mapping[str, Any]) -> bool:
    """True for an AISBench performance JSON ({"Output Token Throughput": {"total": ...}, ...})."""
    return isinstance(data.get(THROUGHPUT), Mapping)


def _stages(data: Mapping[str, Any], name: str) -> tuple[str, Mapping[str, Any]] | None:
    """(the key as the file spells it, its {stage: value}) for metric `name`, matched case-insensitively
    (AISBench's calculator writes "Total Generated Tokens", older dumps "Total generated tokens")."""
    for key, stages in data.items():
        if str(key).lower() == name.lower() and isinstance(stages, Mapping):
            return str(key), stages
    return None


def _metric(
    data: Mapping[str, Any], name: str, *, where: str, unit: str = "", stages: tuple[str, ...] = STAGES
) -> float | None:
    """The value of `name` at stage total (else stable; or the first of `stages`), or None when absent."""
    found = _stages(data, name)
    if found is None:
        return None
    key, values = found
    for stage in stages:
        if values.get(stage) is not None:
            return number(values[stage], where=where, field=f"{key}.{stage}", unit=unit)
    return None


def check_throughput(data: Mapping[str, Any], *, where: str) -> None:
    """Output Token Throughput against Total Generated Tokens / Benchmark Duration of one stage (AISBench
    computes it so: servingresult.RATE_TOLERANCE_FRACTION); a file stating them apart is refused."""
    for stage in STAGES:
        rate = _metric(data, THROUGHPUT, where=where, unit="token/s", stages=(stage,))
        tokens = _metric(data, GENERATED, where=where, stages=(stage,))
        duration_ms = _metric(data, DURATION, where=where, unit="ms", stages=(stage,))
        if rate is not None and tokens is not None and duration_ms:
            check_rate(
                rate,
                tokens / (duration_ms * units.MS_S),
                where=where,
                field=f"{THROUGHPUT}.{stage}",
                derivation=f"{GENERATED} / {DURATION} = {tokens:.6g} / {duration_ms:.6g} ms",
            )
            return


def csv_averages(text: str, *, where: str) -> dict[str, str]:
    """{metric: Average cell} from an AISBench performance CSV (the "total" or "stable" stage)."""
    rows = list(csvfiles.csv_dict_reader(text.splitlines(), where=where))
    if not rows or "Average" not in rows[0] or "Performance Parameters" not in rows[0]:
        raise DataFileError(
            f"{where}:1: header: expected 'Performance Parameters,Stage,Average,...' (AISBench CSV)"
        )
    averages: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()
    for line_no, row in enumerate(rows, start=2):
        metric = (row.get("Performance Parameters") or "").strip()
        stage = (row.get("Stage") or "total").strip()
        if (metric, stage) in seen:  # which row counts would be a guess
            raise DataFileError(f"{where}:{line_no}: {metric[:80]} ({stage}): given twice")
        seen.add((metric, stage))
        if stage in STAGES:
            averages[metric] = (row.get("Average") or "").strip()
    return averages


def _sibling(path: Path, suffix: str) -> str | None:
    other = path.with_suffix(suffix)
    return readers.read_text_capped(other) if other.is_file() else None


def _csv_ms(averages: Mapping[str, str], name: str, *, where: str) -> float | None:
    if not averages.get(name):
        return None
    return number(averages[name], where=where, field=f"{name} Average", unit="ms") * units.MS_S


def _tokens(
    data: Mapping[str, Any], averages: Mapping[str, str], keys: tuple[str, str], *, where: str
) -> int:
    """Mean tokens per request: JSON total / successful requests, else the CSV per-request average."""
    total_key, csv_key = keys
    total = _metric(data, total_key, where=where)
    count = _metric(data, "Success Requests", where=where) or _metric(data, "Total Requests", where=where)
    if total is not None and count:
        return mean_tokens(total, count, where=where, field=total_key)
    if averages.get(csv_key):
        return mean_tokens(
            number(averages[csv_key], where=where, field=csv_key), 1, where=where, field=csv_key
        )
    raise DataFileError(f"{where}: {total_key}: required field missing (and no {csv_key} row in the CSV)")


def _pair(path: Path, data: Mapping[str, Any] | None, *, where: str) -> tuple[Mapping[str, Any], str | None]:
    """(the JSON's data, the CSV's text or None): given the JSON, its CSV sibling; given the CSV, its JSON."""
    if data is not None:
        return data, _sibling(path, ".csv")
    json_text = _sibling(path, ".json")
    if json_text is None:
        raise DataFileError(f"{where}: {THROUGHPUT}: needs the AISBench JSON beside the CSV (not found)")
    return parse_json(json_text, where=str(path.with_suffix(".json"))), readers.read_text_capped(path)


def from_files(path: Path, data: Mapping[str, Any] | None, *, where: str) -> ServingResult:
    """The run in an AISBench JSON (`data`, read from `path`) and the CSV beside it, or in the CSV alone."""
    data, csv_text = _pair(path, data, where=where)
    averages = {} if csv_text is None else csv_averages(csv_text, where=str(path.with_suffix(".csv")))
    throughput = _metric(data, THROUGHPUT, where=where, unit="token/s")
    if throughput is None:
        raise DataFileError(
            f"{where}: {THROUGHPUT}: required field missing (expected {{'total': 'N token/s'}})"
        )
    check_throughput(data, where=where)
    cap = _metric(data, "Max Concurrency", where=where)
    duration_ms = _metric(data, DURATION, where=where, unit="ms")
    requests = _metric(data, "Success Requests", where=where)
    return ServingResult(
        concurrency=None if cap is None else int(cap),
        input_tokens=_tokens(data, averages, ("Total Input Tokens", "InputTokens"), where=where),
        output_tokens=_tokens(data, averages, (GENERATED, "OutputTokens"), where=where),
        output_tokens_per_s=throughput,
        ttft_s=_csv_ms(averages, "TTFT", where=where),
        tpot_s=_csv_ms(averages, "TPOT", where=where),
        requests=None if requests is None else int(requests),
        duration_s=None if duration_ms is None else duration_ms * units.MS_S,
        tool="aisbench",
        where=where,
    )
