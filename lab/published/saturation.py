"""Where does the engine stop keeping up? kvplan's capacity against the published saturation rates.

    PYTHONPATH=. python lab/published/saturation.py [--out lab/published/saturation-capacity.csv]

Alauda's open-loop sweeps (ascend-serving.csv, guidellm --rate-type constant at 1..9 req/s) publish, per
workload and set-up, a "saturation capacity" in requests/s per replica and mark every rate the engine did not
keep up with (`*`). Past that rate a run has no steady state: its output tok/s depends on how long the run
lasted and how many requests timed out (predict.py simulates each such run's own length, open_loop_runs.py).
Compared here is the capacity itself, and the verdict at each published rate:

- capacity: `kvplan simulate` of the set-up at an overloading rate (OVERLOAD_FACTOR x the highest published
  rate), exactly as a user types it (predict.command), read as its completed requests/s;
- verdict: kvplan calls a published rate overloaded when it exceeds that capacity; the page when it marks
  the rate `*`. Agreement is counted over every published rate of the workload.

None of these rows is in any fit (lab/published/fit-rows/ has no Alauda row; MindIE on the 910B3 has no
fitted profile and uses the datasheet one), so every figure here is held out. Printed: one line per workload
and the median |error| per engine; the CSV has the command of each workload.
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
from pathlib import Path

from lab.published import predict

PUBLISHED_CAPACITY = re.compile(r"Saturation capacity[^:]*: ([\d.]+) RPS/replica")
PAST_SATURATION = "past saturation"
# The probe's rate: far enough past the highest published rate that kvplan's run saturates whenever the
# engine's did (a probe that keeps up reports its capacity as ">= rate", never a number).
OVERLOAD_FACTOR = 2.0
OUT_COLUMNS = (
    "workload", "model", "card", "engine", "tp", "ep", "input_tokens", "output_tokens",
    "published_capacity_per_s", "predicted_capacity_per_s", "error", "published_rates", "published_past",
    "predicted_past", "verdicts_agree", "status", "command", "source_url",
)  # fmt: skip


def workloads(corpus: list[dict[str, str]]) -> dict[tuple[str, ...], list[tuple[int, dict[str, str]]]]:
    """Corpus rows that state a saturation capacity, grouped by set-up and lengths (in corpus order)."""
    groups: dict[tuple[str, ...], list[tuple[int, dict[str, str]]]] = {}
    for index, row in enumerate(corpus, start=2):
        if PUBLISHED_CAPACITY.search(row["notes"]) and predict.open_loop_rate(row) is not None:
            key = tuple(row[k] for k in ("model", "card", "engine", "engine_version", "dtype", "tp", "ep"))
            groups.setdefault((*key, row["input_tokens"], row["output_tokens"]), []).append((index, row))
    return groups


def compare(rows: list[tuple[int, dict[str, str]]]) -> dict[str, str]:
    """One workload's line: published and predicted capacity, and the verdict at each published rate."""
    first = rows[0][1]
    published = float(PUBLISHED_CAPACITY.search(first["notes"]).group(1))  # type: ignore[union-attr]
    rates = [predict.open_loop_rate(row) or 0.0 for _, row in rows]
    past = [PAST_SATURATION in row["notes"] for _, row in rows]
    probe = dict(first) | {"notes": first["notes"]}
    bench = predict.mindie_prompt_budget(first, predict.bench_row(probe))
    bench["request_rate"] = f"{OVERLOAD_FACTOR * max(rates):g}"
    command = predict.command(bench, card=first["card"])
    out = {
        key: first[key] for key in ("model", "card", "engine", "tp", "ep", "input_tokens", "output_tokens")
    }
    out |= {
        "workload": f"rows {rows[0][0]}-{rows[-1][0]}",
        "command": command,
        "source_url": first["source_url"],
    }
    out |= {
        "published_capacity_per_s": f"{published:g}",
        "published_rates": " ".join(f"{r:g}" for r in rates),
    }
    out["published_past"] = " ".join(f"{r:g}" for r, p in zip(rates, past, strict=True) if p)
    try:
        payload = predict.simulate_json(command)
    except predict.RefusedError as refusal:
        return out | {"status": f"refused: {refusal}"}
    if not payload["overloaded"]:
        return out | {"status": f"not saturated at {bench['request_rate']} req/s: capacity above the probe"}
    capacity = float(f"{payload['throughput']['requests_per_s']:.3g}")  # as the table prints it
    predicted_past = [rate > capacity for rate in rates]
    agree = sum(a == b for a, b in zip(predicted_past, past, strict=True))
    out["predicted_past"] = " ".join(f"{r:g}" for r, p in zip(rates, predicted_past, strict=True) if p)
    out |= {"predicted_capacity_per_s": f"{capacity:.3g}", "verdicts_agree": f"{agree}/{len(rates)}"}
    if published <= 0:
        return out | {"status": "published capacity 0: no error"}
    return out | {"error": f"{capacity / published - 1:+.3f}", "status": "compared"}


def summary(lines: list[dict[str, str]]) -> list[str]:
    """Per (engine, tp): workloads compared, median |capacity error| and signed error, verdicts agreeing."""
    out = ["| engine | tp | workloads | median abs error | median error | verdicts agree |"]
    out.append("|---|---|---|---|---|---|")
    for engine, tp in sorted({(line["engine"], int(line["tp"])) for line in lines}):
        mine = [line for line in lines if (line["engine"], int(line["tp"])) == (engine, tp)]
        errors = [float(line["error"]) for line in mine if line["status"] == "compared"]
        agree = [
            tuple(map(int, line["verdicts_agree"].split("/"))) for line in mine if line.get("verdicts_agree")
        ]
        hits, total = sum(a for a, _ in agree), sum(b for _, b in agree)
        abs_median = f"{statistics.median(abs(e) for e in errors):.0%}" if errors else "-"
        median = f"{statistics.median(errors):+.0%}" if errors else "-"
        out.append(f"| {engine} | {tp} | {len(errors)} | {abs_median} | {median} | {hits}/{total} |")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=predict.HERE / "saturation-capacity.csv")
    args = parser.parse_args(argv)
    with predict.CORPUS.open(encoding="utf-8") as handle:
        corpus = list(csv.DictReader(handle))
    lines = [compare(rows) for rows in workloads(corpus).values()]
    with args.out.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(OUT_COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows({key: line.get(key, "") for key in OUT_COLUMNS} for line in lines)
    for line in lines:
        print(
            f"{line['workload']:>12} {line['engine']:<11} tp{line['tp']:<2} {line['input_tokens']:>5}/"
            f"{line['output_tokens']:<5} published {line['published_capacity_per_s']:>5} req/s  kvplan "
            f"{line.get('predicted_capacity_per_s', '-'):>6}  {line.get('error', ''):>7}  "
            f"verdicts {line.get('verdicts_agree', '-')}  {line['status']}"
        )
    print("\n".join(summary(lines)))
    print(f"per-workload table: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
