"""Alauda's open-loop runs past the engine's capacity: the finite run each rate level made, and the runs the
engine failed.

Each rate level of Alauda's sweeps (ascend-serving.csv, lab/published/README.md "Alauda open-loop sweeps") is
`guidellm benchmark --rate-type constant --rate R --max-seconds 300 --max-error-rate 0.5`, as the rows' notes
quote from the guide's methodology: R requests/s for 300 s, so at most 300 R requests, a run ending early once
over half of its requests have errored. Its published TPS is guidellm's output_tokens_per_second: output
tokens of the completed requests over the time they were generated in.

A run the engine kept up with has a steady state, which predict.py predicts with the fit's analytic open loop.
Past the engine's capacity the queue grows through the run, and the run delivers what the engine can: the
prediction is kvplan's simulation of the same finite run, `kvplan simulate --rate R --num-requests 300R`
(requests = run_requests), read as the simulated output tokens / makespan. It differs from the benchmark in
two ways, both small once the engine is saturated (the queue, not the spacing, then sets the pace):
kvplan's arrivals are Poisson where guidellm's are evenly spaced, and kvplan completes every request where
guidellm stops at 300 s and drops those in flight.  [assumed: guidellm's max_seconds cut]

Some runs are not serving results but failures: nearly every request errored and the run reports the few that
completed (5.5 tok/s at 6 req/s of 1024-token replies, where the same set-up made 124 tok/s at 1 req/s).
failure_evidence names them; predict.py answers each with kvplan's overload verdict for the same run
(predict.failure_verdict), with that evidence, and never fits them.
"""

from __future__ import annotations

import csv
import functools
import re
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "ascend-serving.csv"
# The run length the rows' notes quote ("RUN LENGTH: guidellm benchmark ... --max-seconds 300 ...").
MAX_SECONDS = re.compile(r"--max-seconds (\d+)")
# The quoted 22-column table row: rate | replica | Total RPS | RPS/rep | Mean In | Mean Out | TTFT p90 p95 p99
# mean | E2E p90 p95 p99 mean | ITL ... | TPS ...
QUOTED_ROW = re.compile(r"row '\|([^']*)\|'")
E2E_P90, E2E_P99 = 10, 12  # cells of the quoted row
# A run that delivered less than this share of the output tok/s the same set-up reached on the same workload
# at another rate collapsed: past capacity an engine that still serves delivers about its capacity (the
# sweeps' other saturated runs keep 0.27-1.0 of their workload's best), not a few per cent of it.
# [assumed: the gap in the corpus between 0.153 (row 369) and 0.218 (row 267)]
COLLAPSE_FRACTION = 0.2
ENGINE_FAILURE = "engine failure, not a serving result"  # failure_evidence's opening words


def run_requests(row: dict[str, str], *, rate_per_s: float) -> int | None:
    """Requests the row's run sent at most: rate x its --max-seconds (None when its notes state no length).

    Formula: N = R x T;  R the constant request rate (req/s), T guidellm's --max-seconds (s).
    """
    seconds = MAX_SECONDS.search(row["notes"])
    return round(rate_per_s * int(seconds.group(1))) if seconds else None


def _workload(row: dict[str, str]) -> tuple[str, ...]:
    """The set-up and lengths a row shares with the other rate levels of its sweep."""
    keys = ("model", "card", "engine", "engine_version", "dtype", "tp", "ep", "input_tokens", "output_tokens")
    return tuple(row[key] for key in keys)


@functools.cache
def _sweeps() -> dict[tuple[str, ...], list[dict[str, str]]]:
    """Corpus rows that quote a rate level's table row, by workload (corpus order)."""
    with CORPUS.open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if QUOTED_ROW.search(row["notes"])]
    sweeps: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for row in rows:
        sweeps.setdefault(_workload(row), []).append(row)
    return sweeps


def _best_neighbour(row: dict[str, str]) -> tuple[float, str] | None:
    """(output tok/s, rate) of the best other rate level of the row's workload, or None (no other level)."""
    others = [other for other in _sweeps().get(_workload(row), []) if other["notes"] != row["notes"]]
    if not others:
        return None
    best = max(others, key=lambda other: float(other["output_tokens_per_s"]))
    rate = QUOTED_ROW.search(best["notes"]).group(1).split("|")[0].strip()  # type: ignore[union-attr]
    return float(best["output_tokens_per_s"]), f"{rate.rstrip('*')} req/s"


def failure_evidence(row: dict[str, str]) -> str | None:
    """Why the row's run is an engine failure rather than a serving result, or None.

    Evidence, either of: a collapse, output tok/s below COLLAPSE_FRACTION of the best the same set-up made on
    the same workload at another rate; or coinciding E2E percentiles (p90 = p99 to the millisecond), which
    only a handful of completed requests give, out of up to 300 x rate sent.
    """
    quoted = QUOTED_ROW.search(row["notes"])
    if quoted is None:
        return None
    cells = [cell.strip().replace(",", "") for cell in quoted.group(1).split("|")]
    tokens_per_s = float(row["output_tokens_per_s"])
    found = []
    best = _best_neighbour(row)
    if best is not None and tokens_per_s < COLLAPSE_FRACTION * best[0]:
        share = tokens_per_s / best[0]
        found.append(
            f"{tokens_per_s:g} tok/s is {share:.1%} of the {best[0]:g} this set-up made at {best[1]}"
        )
    if cells[E2E_P90] == cells[E2E_P99]:
        found.append(f"E2E p90 = p99 = {cells[E2E_P90]} ms: a handful of requests completed")
    if not found:
        return None
    return (
        f"{ENGINE_FAILURE}: "
        + "; ".join(found)
        + " (guidellm --max-error-rate 0.5 ends a run once over half its requests error)"
    )
