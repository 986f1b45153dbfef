"""genai-perf's CSV export (`profile_export_genai_perf.csv`; AIPerf's `profile_export_aiperf.csv` alike) ->
ServingResult.

Layout as genai-perf writes it (triton-inference-server/perf_analyzer genai-perf tests/test_csv_exporter.py):
a per-request table `Metric,avg,min,max,p99,...` with rows "Time To First Token (ms)", "Inter Token Latency
(ms)", "Request Latency (ms)", "Output Sequence Length (tokens)", "Input Sequence Length (tokens)"; a blank
line; then `Metric,Value` with "Output Token Throughput (tokens/sec)", "Request Throughput (per sec)",
"Request Count (count)". AIPerf spells "Time to First Token (ms)" and "Request Count": names are matched
case-insensitively, units ignored. The concurrency is a command-line setting the CSV does not record.
"""

from __future__ import annotations

from planner import csvfiles, units
from planner.errors import DataFileError
from planner.importers.servingresult import (
    RATE_TOLERANCE_FRACTION,
    ServingResult,
    check_rate,
    number,
    rounding_fraction,
)

TTFT = "time to first token"
ITL = "inter token latency"
OUTPUT_LENGTH = "output sequence length"
INPUT_LENGTH = "input sequence length"
THROUGHPUT = "output token throughput"
REQUESTS = "request count"
REQUEST_RATE = "request throughput"
NAMES = (THROUGHPUT, OUTPUT_LENGTH, REQUEST_RATE)


def _name(cell: str) -> str:
    """Metric name without its unit, lower-case: 'Time To First Token (ms)' -> 'time to first token'."""
    return cell.split("(")[0].strip().lower()


def tables(text: str, *, where: str) -> tuple[dict[str, str], dict[str, str]]:
    """({metric: avg} from the per-request table, {metric: value} from the Metric,Value table); a header
    naming a column twice, or a metric given twice in one table, is one line naming it (which would count
    is a guess)."""
    averages: dict[str, str] = {}
    values: dict[str, str] = {}
    table: tuple[dict[str, str], int] | None = None  # the table being read and its value column
    for line_no, line in enumerate(csvfiles.csv_reader(text.splitlines(), where=where), start=1):
        if not any(cell.strip() for cell in line):
            table = None
        elif line[0].strip().lower() == "metric":
            csvfiles.check_header(line, where=f"{where}:{line_no}")
            header = [cell.strip().lower() for cell in line]
            table = (averages, header.index("avg")) if "avg" in header else None
            table = (values, header.index("value")) if "value" in header else table
        elif table is not None and len(line) > table[1]:
            if _name(line[0]) in table[0]:
                raise DataFileError(f"{where}:{line_no}: {line[0].strip()[:80]}: given twice in one table")
            table[0][_name(line[0])] = line[table[1]].strip()
    if THROUGHPUT not in values:
        raise DataFileError(
            f"{where}: Output Token Throughput (tokens/sec): required row missing "
            f"(expected a 'Metric,Value' table from genai-perf or AIPerf)"
        )
    return averages, values


MIN_TOKENS_PER_S = 1e-3  # [assumed: a run that made fewer output tokens per second made none]


def _required(table: dict[str, str], name: str, *, where: str, least: float = 0.0) -> float:
    """The row's value; a missing row, or one below `least` (the plan's own minimum), is one line."""
    if not table.get(name):
        raise DataFileError(f"{where}: {name}: required row missing (got none)")
    value = number(table[name], where=where, field=name)
    if value < least:
        raise DataFileError(f"{where}: {name}: too small (got {table[name]!r}, expected >= {least:g})")
    return value


def check_throughput(averages: dict[str, str], values: dict[str, str], *, where: str) -> None:
    """Output Token Throughput against mean Output Sequence Length x Request Throughput: genai-perf divides
    the summed lengths and the request count by one benchmark duration (llm_profile_data_parser.py), so the
    two rates are in the ratio of the mean length; a file stating them apart is refused.

    Formula: output tok/s = mean output tokens per request x requests/s, checked by servingresult.check_rate
    within RATE_TOLERANCE_FRACTION plus what the cells' printed digits allow ('1.65' req/s: 0.3 %).
    """
    cells = [values.get(THROUGHPUT), averages.get(OUTPUT_LENGTH), values.get(REQUEST_RATE)]
    if not all(cells):
        return
    rate, length, requests_per_s = (
        number(cell, where=where, field=name) for cell, name in zip(cells, NAMES, strict=True)
    )
    check_rate(
        rate,
        length * requests_per_s,
        where=where,
        field="Output Token Throughput",
        derivation=f"mean Output Sequence Length x Request Throughput = {length:g} x {requests_per_s:g} /s",
        tolerance_fraction=RATE_TOLERANCE_FRACTION + sum(rounding_fraction(str(cell)) for cell in cells),
    )


def from_csv(text: str, *, where: str) -> ServingResult:
    """The run in a genai-perf / AIPerf CSV export (concurrency None: the caller supplies it)."""
    averages, values = tables(text, where=where)
    check_throughput(averages, values, where=where)
    ttft = averages.get(TTFT)
    itl = averages.get(ITL)
    requests = values.get(REQUESTS)
    return ServingResult(
        concurrency=None,
        input_tokens=round(_required(averages, INPUT_LENGTH, where=where, least=1)),  # a request has tokens
        output_tokens=round(_required(averages, OUTPUT_LENGTH, where=where, least=1)),
        output_tokens_per_s=_required(values, THROUGHPUT, where=where, least=MIN_TOKENS_PER_S),
        ttft_s=None if not ttft else number(ttft, where=where, field=TTFT) * units.MS_S,
        # genai-perf's inter-token latency is the mean time per output token after the first (its TPOT)
        tpot_s=None if not itl else number(itl, where=where, field=ITL) * units.MS_S,
        requests=None if not requests else int(number(requests, where=where, field=REQUESTS)),
        duration_s=None,
        tool="genai-perf",
        where=where,
    )
