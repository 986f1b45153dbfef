"""Which load tool wrote a result file, and the ServingResult in it (dispatch to the tool parsers)."""

from __future__ import annotations

from pathlib import Path

from planner import readers
from planner.errors import DataFileError
from planner.importers import aisbench, genaiperf, vllmbench
from planner.importers.servingresult import ServingResult, checked, parse_json


def read_serving_result(path: Path, *, concurrency: int | None = None) -> ServingResult:
    """The run in a result file of vllm bench serve (JSON), AISBench (JSON or CSV) or genai-perf/AIPerf (CSV).

    `concurrency` supplies the cap on requests where the file does not record it (genai-perf's CSV); where
    the file records another, DataFileError names both (a mismatched --model is refused the same way).
    """
    text = readers.read_text_capped(path)
    head = text.lstrip("\ufeff \t\r\n")[:200]
    if head.startswith(("{", "[")):
        data = parse_json(text, where=str(path))
        if aisbench.is_aisbench(data):
            result = aisbench.from_files(path, data, where=str(path))
        else:
            result = vllmbench.from_dict(data, where=str(path))
    elif head.lower().startswith("performance parameters"):
        result = aisbench.from_files(path, None, where=str(path))
    elif head.lower().startswith("metric,"):
        result = genaiperf.from_csv(text, where=str(path))
    else:
        raise DataFileError(
            f"{path}: unknown result format (got {head[:40]!r}, expected vllm bench serve --save-result "
            f"JSON, an AISBench performances/*.json or *.csv, or genai-perf's profile_export_genai_perf.csv)"
        )
    if concurrency is not None and result.concurrency not in (None, concurrency):
        raise DataFileError(
            f"{path}: its run sent at most {result.concurrency} requests at once, not --concurrency "
            f"{concurrency} (expected the file's figure, or no --concurrency)"
        )
    if concurrency is not None:
        result = ServingResult(**{**result.__dict__, "concurrency": concurrency})
    return checked(result)
