"""Per-phase table: TTFT, TPOT and throughput of every published Ascend row with them, fitted and held out.

    PYTHONPATH=. python lab/published/phase_table.py          # print the markdown table
    PYTHONPATH=. python lab/published/phase_table.py --write  # also write phase-table.md, phase-residuals.csv

Rows: fit_profiles.corpus_groups() (the rows predict.py can predict, one per set-up), grouped by (card, kvplan
engine). A group is listed when any of its rows publishes a TTFT or a TPOT (per-phase truth). For each group:

- in sample: the group's fit (planner.perf.fit.fit_coefficients from the card's shipped default coefficients,
  what `kvplan calibrate --from-bench` runs) predicting its own rows;
- leave-one-model-out (LOMO): for every model of the group, the fit on the other models' rows predicting
  that model's rows; needs at least LOMO_MIN_MODELS models (one model: nothing to hold out).

Errors are predicted / published - 1 of mean TTFT, mean TPOT (per output token: with MTP the model divides
its step by the tokens per step that the row's stated acceptance gives) and output tok/s; the table gives
their median |error| and the number of observations. Closed-loop rows are timed by
planner/perf/closed_loop.py, open-loop (request-rate) rows by planner/perf/open_loop.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fit_profiles  # noqa: E402  (this directory's script)

LOMO_MIN_MODELS = 2  # one model left out, at least one to fit on
QUANTITIES = ("ttft", "tpot", "throughput")
TARGETS = {"ttft": 0.25, "tpot": 0.15, "throughput": 0.15}  # issue 27's done-when thresholds
OUT_TABLE = HERE / "phase-table.md"
OUT_ROWS = HERE / "phase-residuals.csv"


def row_errors(points: list[Any], card: str, coefficients: Any) -> list[dict[str, float | None]]:
    """Per row: {'ttft', 'tpot', 'throughput'} predicted / published - 1 (None where not published)."""
    from planner import catalog
    from planner.fit import serving_rows as fit_serving

    hw = catalog.load_card(card)
    prepared = fit_serving.prepare(points, hardware=hw, calibrated=False)
    out = []
    for row in prepared:
        est = fit_serving.estimate(row, coefficients)
        point = row.point
        out.append({
            "ttft": None if point.ttft_s is None else est.ttft_s / point.ttft_s - 1.0,
            "tpot": None if point.tpot_s is None or est.tpot_s is None else est.tpot_s / point.tpot_s - 1.0,
            "throughput": point.dp * est.output_tokens_per_s / point.output_tokens_per_s - 1.0,
        })  # fmt: skip
    return out


def lomo_errors(group: fit_profiles.Group, card: str) -> list[dict[str, float | None] | None]:
    """Per row (group order): its errors under a fit on the other models' rows (None: fit refused)."""
    points = [p for _, _, p in group]
    models = sorted({p.model for p in points})
    out: list[dict[str, float | None] | None] = [None] * len(points)
    if len(models) < LOMO_MIN_MODELS:
        return out
    for model in models:
        train = [p for p in points if p.model != model]
        test = [i for i, p in enumerate(points) if p.model == model]
        result = fit_profiles.fitted(train, card)
        if result is None:
            continue
        for i, errs in zip(
            test, row_errors([points[i] for i in test], card, result.coefficients), strict=True
        ):
            out[i] = errs
    return out


def summary(errors: list[dict[str, float | None] | None], quantity: str) -> tuple[float, int]:
    """(median |error|, observations) of one quantity; nan when none."""
    values = [abs(e[quantity]) for e in errors if e is not None and e[quantity] is not None]  # type: ignore[arg-type]
    return (statistics.median(values) if values else float("nan")), len(values)


def cell(errors: list[dict[str, float | None] | None], quantity: str) -> str:
    median, count = summary(errors, quantity)
    if not count:
        return "-"
    mark = "" if median <= TARGETS[quantity] else " (over)"
    return f"{median:.1%} ({count}){mark}"


def group_report(
    key: tuple[str, str], group: fit_profiles.Group, residuals: list[dict[str, str]]
) -> list[str]:
    """Markdown table rows for one group (in sample, LOMO); appends its per-row residuals."""
    card, engine = key
    points = [p for _, _, p in group]
    result = fit_profiles.fitted(points, card)
    if result is None:
        return [f"| {card} | {engine} | {len(group)} | fit refused: {fit_profiles.REFUSALS[-1]} | | | | | |"]
    inside = row_errors(points, card, result.coefficients)
    held = lomo_errors(group, card)
    models = len({p.model for p in points})
    lines = [
        f"| {card} | {engine} | {len(group)} ({models} models) | in sample | "
        + " | ".join(cell(inside, q) for q in QUANTITIES)
        + " |",
        "| | | | LOMO | " + " | ".join(cell(held, q) for q in QUANTITIES) + " |",
    ]
    for (row, bench, _point), a, b in zip(group, inside, held, strict=True):
        residuals.append({
            "corpus_row": bench["corpus_row"], "card": card, "engine": engine, "model": row["model"],
            "engine_version": row["engine_version"], "concurrency": row["concurrency"],
            "request_rate": bench.get("request_rate", ""), "input_tokens": bench["input_tokens"],
            "output_tokens": row["output_tokens"], "mtp": row["mtp"], "mtp_acceptance": row["mtp_acceptance"],
            "ttft_s": row["ttft_s"], "tpot_s": row["tpot_s"],
            "output_tokens_per_s": bench["output_tokens_per_s"],
            **{f"{q}_error_in_sample": _fmt(a[q]) for q in QUANTITIES},
            **{f"{q}_error_lomo": _fmt(None if b is None else b[q]) for q in QUANTITIES},
        })  # fmt: skip
    return lines


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:+.3f}"


def has_phase_rows(group: fit_profiles.Group) -> bool:
    return any(p.ttft_s is not None or p.tpot_s is not None for _, _, p in group)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write phase-table.md and phase-residuals.csv")
    parser.add_argument(
        "--only",
        metavar="CARD.ENGINE",
        help="one group only (e.g. ascend-910b3.mindie); --write then "
        "replaces that group's lines of phase-table.md and rows of phase-residuals.csv",
    )
    args = parser.parse_args(argv)
    lines = [
        "| card | engine | rows | fit | TTFT median abs error (obs.) | TPOT | output tok/s |",
        "|---|---|---|---|---|---|---|",
    ]
    residuals: list[dict[str, str]] = []
    groups = fit_profiles.selected(fit_profiles.corpus_groups(), args.only)
    for key, group in sorted(groups.items()):
        if has_phase_rows(group):
            lines += group_report(key, group, residuals)
            print(lines[-2], lines[-1], sep="\n", flush=True)
    if args.only is not None:
        lines = merged_table(lines, replaced=set(groups))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        OUT_TABLE.write_text(
            "# Per-phase table (generated by lab/published/phase_table.py --write; do not edit)\n\n"
            f"Targets (issue 27): TTFT <= {TARGETS['ttft']:.0%}, TPOT <= {TARGETS['tpot']:.0%}, "
            f"throughput <= {TARGETS['throughput']:.0%} median |error|; '(over)' marks a miss. LOMO: each "
            "model's rows predicted by a fit on the group's other models. Per row: phase-residuals.csv.\n\n"
            + text,
            encoding="utf-8",
        )
        fit_profiles.write_residuals(OUT_ROWS, residuals, replaced=set(groups))
    return 0


def merged_table(lines: list[str], *, replaced: set[tuple[str, str]]) -> list[str]:
    """The table of phase-table.md (header included) with the groups in `replaced` taken from `lines` (a
    group is its in-sample line, whose first cells name it, and the lines after it)."""
    text = OUT_TABLE.read_text(encoding="utf-8") if OUT_TABLE.exists() else ""
    old = [line for line in text.splitlines() if line.startswith("|")]
    blocks = {k: v for k, v in _blocks(old[2:]).items() if k not in replaced}
    blocks |= _blocks(lines[2:])
    return lines[:2] + [line for key in sorted(blocks) for line in blocks[key]]


def _blocks(lines: list[str]) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    key = ("", "")
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0]:
            key = (cells[0], cells[1])
        out.setdefault(key, []).append(line)
    return out


if __name__ == "__main__":
    sys.exit(main())
