"""Per-phase errors of the SGLang rows: mean TTFT and TPOT of every single-instance SGLang row that publishes
them, predicted by the row's own `kvplan serve` command (predictions-after.csv), exactly as typed.

    PYTHONPATH=. python lab/published/sglang_phases.py [predictions.csv]

Predicted TTFT = the analytic estimate's TTFT plus the per-request cost outside the forward pass (what a
client sees); TPOT = the estimate's per output token. error = predicted / published - 1. SGLang rows are never
fitted: they read the card's vllm-ascend fit without its per-request and per-prefill-pass costs
(planner.catalog.borrowed_fit). Printed: count and median |error| per phase, then each row's errors.
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

from lab.published import predict


def phase_errors(predictions: Path) -> dict[str, list[tuple[int, float]]]:
    """{"ttft": [(corpus line, error)], "tpot": [...]} over the SGLang single-instance rows with phases."""
    with predict.CORPUS.open(encoding="utf-8") as handle:
        corpus = dict(enumerate(csv.DictReader(handle), start=2))
    with predictions.open(encoding="utf-8") as handle:
        rows = [
            row
            for row in csv.DictReader(handle)
            if row["engine"] == "sglang" and row["status"] == "predicted" and " --pd " not in row["command"]
        ]
    errors: dict[str, list[tuple[int, float]]] = {"ttft": [], "tpot": []}
    for row in rows:
        line = int(row["row"])
        published = corpus[line]
        if not (published["ttft_s"] or published["tpot_s"]):
            continue
        estimate = predict.simulate_json(row["command"])["estimate"]
        predicted = {
            "ttft": estimate["ttft_s"] + estimate.get("request_overhead_s", 0.0),
            "tpot": estimate["tpot_s"],
        }
        for phase in errors:
            if published[f"{phase}_s"]:
                errors[phase].append((line, predicted[phase] / float(published[f"{phase}_s"]) - 1.0))
    return errors


def main(argv: list[str]) -> int:
    predictions = Path(argv[0]) if argv else predict.HERE / "predictions-after.csv"
    errors = phase_errors(predictions)
    for phase, found in errors.items():
        middle = statistics.median(abs(error) for _, error in found)
        print(f"{phase}: {len(found)} rows, median |error| {middle:.1%}")
        print("  " + ", ".join(f"{line} {error:+.0%}" for line, error in found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
