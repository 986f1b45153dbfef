"""Calibrated engine profiles per (hardware, engine) from the published corpus, and their honest error.

    PYTHONPATH=. python lab/published/fit_profiles.py           # fit, LOMO, Qwen3.5 hold-out: print
    PYTHONPATH=. python lab/published/fit_profiles.py --write   # also write the fit rows and profiles

Rows: every row of ascend-serving.csv that predict.py can predict (same conversion, same closed-loop model as
`kvplan validate`). Groups: (card, kvplan engine). A group's fit uses only its own rows, so a fit from one
hardware's rows never changes another's profile. The fit is planner.fit.solver.fit_coefficients, what
`kvplan calibrate --from-bench` runs, started from the card's shipped default coefficients.

--check: refit every group that ships a profile (its fit on all rows only, ~5 s of CPU for all of them) and
compare the terms with hwprofiles/fitted/<card>.<engine>.yaml (REPRODUCE_REL_TOL); exit 1 naming each term the
script no longer reproduces (tests/test_fitted_profiles.py runs the same check).

--write: fit-rows/<card>.<engine>.csv (the group's serving bench rows, each with its corpus line), then
`kvplan calibrate --from-bench fit-rows/<card>.<engine>.csv --card <card> --engine <engine>` writes
hwprofiles/fitted/<card>.<engine>.yaml, whose measured block names the rows it stands on.

CI floors (issue 27): the shipped profiles read every ci-baseline-floor row as an exact throughput.
--floor-margin M: read them as lower bounds instead (column floor_fraction = 0.97, the CI's pass threshold;
column floor_margin_fraction = M): a prediction below 0.97 x the floor pulls as a measurement would, one above
it as a measurement M wide (planner/fit/censored.py); 0: one-sided (an excess costs nothing). Tried at 0.2 on
2026-12-06 and not shipped: held-out errors got worse on both cards (docs/accuracy.md, "CI floors as lower
bounds").
--floor-headroom H (with --floor-margin): also a ceiling, (1 + H) x the floor: outside [0.97, 1 + H] x the
floor it pulls fully.

Printed (markdown, for ACCURACY.md): per group the shipped and fitted in-sample median |error|; leave-one-
model-out (fit without model X, predict X's rows) for groups with >= 4 models; every Qwen3.5 row predicted
by a fit on the group's other families only. Per-row residuals: fit-residuals.csv.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import predict  # noqa: E402  (this directory's script)

# The 950PR/MindIE profile is the seed's four rows (corpus lines 119, 122, 124, 125), this group's rows.
# Groups reported but not shipped: too little, or too unlike a serving benchmark, to become the default of a
# card and engine (the datasheet profile stays the default).
NOT_WRITTEN = {
    # GPUStack's MindIE 2.1RC1 runs of one model (Qwen3-8B), 1000 requests at once, card SKU not stated
    ("ascend-910b3", "mindie"),
    # one model (Qwen3-32B) on two replicas with a shared-prefix workload: prefill far below the prompt length
    ("ascend-910b4", "vllm"),
}
REFUSALS: list[str] = []  # messages of fits that refused (the last one explains a None)
# A fitted term on its box ships only with a written reason here (issue 27); without one, --write refuses the
# group's profile and names the observations that pull the term there (solver.FitResult.bound_pullers).
# Each reason says why the bound is physical (the chip's datasheet, or an assumed engine limit) and what the
# rows pulling it there are; fit_profiles.py prints the pullers, and the profile's notes carry them.
BOUND_REASONS: dict[tuple[str, str], dict[str, str]] = {
    ("ascend-910c", "vllm"): {
        "weight_read_bandwidth_fraction": (
            "at the A3 die's datasheet bandwidth (1.0), not beyond it: high-concurrency CI floors without "
            "MTP (Qwen3-30B-A3B int8 TP1 at 45 clients, Qwen3-235B bf16 and Qwen3-32B int8 at 700 / 76, "
            "MiniMax-M2.5) ran faster than any lower fraction allows with the per-kernel costs the other "
            "rows set; which term over-counts at high batch is not identified (no per-phase vLLM row on A3)"
        ),
        "kv_read_bandwidth_fraction": (
            "at the datasheet bandwidth (1.0), pulled by the same high-concurrency floors as the weight "
            "fraction: their KV reads at 3.5k-5k tokens x 45-700 clients leave no room below it"
        ),
        "prefill_pass_overhead_us": (
            "at the 100 ms per prefill pass that an eager pass's launches can cost at most "
            "(fitted_params.py); pulled there by the 16k / 32k-prompt Qwen3.5 weekly floors (their prefill "
            "runs slower than the compute fraction the x/1.5 prior allows, even with prefill attention at a "
            "fitted fraction of its own, 0.44 of a GEMM's rate); it was 697 ms before the box ended at 100 "
            "ms, and the per-request cost now carries what a request pays outside the forward pass"
        ),
    },
    ("ascend-910b3", "vllm"): {
        "kv_read_bandwidth_fraction": (
            "at the datasheet bandwidth (1.0): pulled by Alauda's Qwen3-14B open-loop TPOTs at 3-5 req/s "
            "(lines 222, 223, 258: 40-145 sequences of ~650 tokens, whose KV reads grow with the rate) and "
            "the Qwen3-32B / Qwen3-235B CI floors (lines 83, 94); since the per-collective latency is fitted "
            "(~200 us) the weight fraction left its bound (0.78)"
        ),
    },
    ("ascend-950pr", "vllm"): {
        "state_read_bandwidth_fraction": (
            "at the datasheet bandwidth (1.0): four rows of one model (Qwen3.8-27B with MTP 3: three 10 x "
            "64K/3K runs and the single stream of line 170, whose prompt and acceptance are assumed) cannot "
            "tell the Gated DeltaNet state reads from the other step terms; its prior is the unknown x/100 "
            "(no state measurement on a 950)"
        ),
    },
}
HELD_OUT_FAMILY = "Qwen/Qwen3.5-"  # the hybrid family the mission names
Group = list[tuple[dict[str, str], dict[str, str], Any]]  # (corpus row, bench row, ServingPoint)
OLDER: dict[tuple[str, str], Group] = defaultdict(list)  # predict.not_fitted rows: predicted, never fitted
# how the fit reads CI floors (main sets it from the options before corpus_groups reads the corpus)
FLOORS: dict[str, Any] = {"one_sided": False, "headroom": None, "margin": None}


def corpus_groups() -> dict[tuple[str, str], Group]:
    """(card, engine) -> every predictable row that fits its card."""
    from planner.errors import KvplanError
    from planner.fit import serving_rows
    from planner.importers.benchpoints import parse_serving_row

    groups: dict[tuple[str, str], Group] = defaultdict(list)
    with predict.CORPUS.open(encoding="utf-8") as handle:
        for index, row in enumerate(csv.DictReader(handle), start=2):
            if predict._skip_reason(row) is not None:
                continue
            bench = predict.bench_row(
                row, floors=FLOORS["one_sided"], headroom=FLOORS["headroom"], margin=FLOORS["margin"]
            )
            bench |= {"corpus_row": str(index)}
            point = parse_serving_row(bench, where=f"{predict.CORPUS.name}:{index}")
            try:
                serving_rows.prepare([point])
            except KvplanError:
                continue
            key = (row["card"], bench["engine"])
            (OLDER[key] if predict.not_fitted(index, row) else groups[key]).append((row, bench, point))
    return {key: one_per_setup(group) for key, group in groups.items()}


SETUP_KEYS = ("model", "dtype", "kv_dtype", "tp", "dp", "ep", "concurrency", "input_tokens", "output_tokens",
              "mtp", "max_num_seqs", "max_num_batched_tokens", "num_prompts", "memory_gib",
              "request_rate")  # fmt: skip


def one_per_setup(group: Group) -> Group:
    """One row per identical set-up, so the fit sees no contradictions it cannot explain.

    CI floors of one set-up move over time (baselines are hand-edited, and lowered when CI regressed): the
    latest floor is kept. Rows of one date (the seed's table 4.1: MindIE + continuous batching / + PD split /
    + all at batch 16, read as prompt + output tokens/s: predict.SEED_BATCH16) keep the lower median of those
    giving the most observations (the seed's section 2.4 single stream also gives TTFT and TPOT).
    """
    by_setup: dict[tuple[str, ...], Group] = defaultdict(list)
    for item in group:
        by_setup[tuple(item[1].get(key, "") for key in SETUP_KEYS)].append(item)
    kept = []
    for rows in by_setup.values():
        latest = max(row["source_date"] for row, _, _ in rows)
        same_day = [r for r in rows if r[0]["source_date"] == latest]
        most = max(_observations(r[2]) for r in same_day)  # a row that also gives TTFT / TPOT says more
        same_day = sorted(
            (r for r in same_day if _observations(r[2]) == most), key=lambda r: r[2].output_tokens_per_s
        )
        kept.append(same_day[(len(same_day) - 1) // 2])
    return sorted(kept, key=lambda item: int(item[1]["corpus_row"]))


def _observations(point: Any) -> int:
    """Observations a serving row gives the fit: output tok/s, and TTFT and TPOT when published."""
    return 1 + (point.ttft_s is not None) + (point.tpot_s is not None)


def fitted(points: list[Any], card: str) -> Any:
    """FitResult of the card's shipped coefficients refitted on these rows (None: the fit refuses)."""
    from planner import catalog
    from planner.errors import KvplanError
    from planner.fit import solver as perf_fit

    try:
        return perf_fit.fit_coefficients([], hardware=catalog.load_card(card), serving=points)
    except KvplanError as exc:
        REFUSALS.append(str(exc))
        return None


def errors_or_none(test: list[Any], train: list[Any], card: str) -> list[float] | None:
    """Errors of `test` under a fit on `train`; None when the fit refuses (e.g. one training row)."""
    result = fitted(train, card)
    return None if result is None else errors(test, card, result.coefficients)


def errors(points: list[Any], card: str, coefficients: Any = None) -> list[float]:
    """predicted / published - 1 per point (the datasheet card with assumed efficiencies when coefficients
    is None)."""
    from planner import catalog
    from planner.fit import serving_rows

    hw = catalog.load_card(card)
    return serving_rows.serving_errors(points, hardware=hw, coefficients=coefficients, calibrated=False)


def median_abs(values: list[float]) -> float:
    return statistics.median(abs(v) for v in values) if values else float("nan")


def lomo(group: Group, card: str) -> dict[str, list[float]]:
    """model -> its rows' errors under a fit on the group's other models (what `kvplan calibrate
    --from-bench` records as the profile's range: planner/fit/holdout.py)."""
    from planner import catalog
    from planner.cli.calibrate import held_out_errors
    from planner.fit import holdout

    return holdout.leave_one_model_out(
        [p for _, _, p in group], hardware=catalog.load_card(card), errors=held_out_errors
    )


def held_out_family(group: Group, card: str) -> list[tuple[dict[str, str], float]]:
    """Each Qwen3.5 row's error under a fit on the group's other families ([] when either side is empty)."""
    train = [p for r, _, p in group if not r["model"].startswith(HELD_OUT_FAMILY)]
    test = [(r, p) for r, _, p in group if r["model"].startswith(HELD_OUT_FAMILY)]
    if not train or not test:
        return []
    errs = errors_or_none([p for _, p in test], train, card)
    return [] if errs is None else [(r, e) for (r, _), e in zip(test, errs, strict=True)]


def committed_columns(rows_path: Path, *, fresh: list[str]) -> list[str]:
    """The column order of the committed fit-rows file when it holds the same columns as `fresh` (so a
    rewrite changes values only), else `fresh`."""
    if not rows_path.is_file():
        return fresh
    with rows_path.open(encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle), [])
    return header if sorted(header) == sorted(fresh) else fresh


def write_group(card: str, engine: str, group: Group) -> Path:
    """fit-rows/<card>.<engine>.csv, then the fitted profile through `kvplan calibrate --from-bench` (which
    records the group's leave-one-model-out range when its rows span enough models: holdout.py)."""
    rows_path = HERE / "fit-rows" / f"{card}.{engine}.csv"
    rows_path.parent.mkdir(exist_ok=True)
    columns = committed_columns(rows_path, fresh=list(group[0][1]))
    with rows_path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(bench for _, bench, _ in group)
    out = shipped_profile(card, engine)
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "planner.cli",
        "calibrate",
        "--from-bench",
        str(rows_path.relative_to(ROOT)),
    ]
    command += ["--card", card, "--engine", engine, "--out", str(out), "--force"]
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True, text=True)
    for backup in out.parent.glob(f"{out.name}.bak*"):
        backup.unlink()
    _describe(out, group, rows_path)
    return out


def _describe(out: Path, group: Group, rows_path: Path) -> None:
    """Name the data the profile stands on in its measured block (device_name and notes)."""
    profile = yaml.safe_load(out.read_text(encoding="utf-8"))
    models = sorted({row["model"] for row, _, _ in group})
    lines = ", ".join(sorted({row["corpus_row"] for _, row, _ in group}, key=int))
    measured = profile["measured"]
    measured["device_name"] = (
        f"calibrated: fit from {len(group)} published points ({', '.join(models)}), "
        f"lab/published/{rows_path.relative_to(HERE)}"
    )
    fit_notes, *warnings = str(measured.get("notes", "")).split("; warning: ")
    card, engine = out.name.split(".")[:2]
    reasons = BOUND_REASONS.get((card, engine), {})
    warnings = [
        w + "".join(f" (why it ships: {why})" for name, why in reasons.items() if w.startswith(f"{name} ="))
        for w in warnings
    ]
    measured["notes"] = "; warning: ".join(  # the points before the warnings, which plans quote to their end
        [
            f"{fit_notes}. Points: lab/published/ascend-serving.csv lines {lines} "
            "(vllm-ascend nightly CI baselines are floors; see lab/published/README.md)"
            + (floor_reading() if any(p.floor_fraction is not None for _, _, p in group) else ""),
            *warnings,
        ]
    )
    out.write_text(yaml.safe_dump(profile, sort_keys=False, width=110), encoding="utf-8")


def floor_reading() -> str:
    """How the fit read the group's CI floors, for the profile's notes."""
    if not FLOORS["one_sided"]:
        return ""  # floors read as exact throughputs, the notes as before
    margin = FLOORS["margin"]
    above = f"above it as a measurement {margin:g} wide" if margin else "above it nothing"
    return (
        "; each floor fitted as a lower bound: a prediction below 0.97 x floor counts in full, "
        f"{above} (planner/fit/censored.py)"
    )


def terms(result: Any) -> str:
    """Each fitted term as 'name value (x/÷ factor)', flagged when on a bound."""
    import math

    from planner.perf.fitted_params import PARAM_NAMES

    parts = []
    for name, log_value, sigma, bound in zip(
        PARAM_NAMES, result.log_values, result.sigma_log, result.bounds, strict=True
    ):
        flag = f", at {bound} bound" if bound else ""
        parts.append(f"{name} {math.exp(log_value):.3g} (x/÷{math.exp(sigma):.2f}{flag})")
    return "; ".join(parts)


def unexplained_bounds(card: str, engine: str, result: Any) -> list[str]:
    """Lines naming each fitted term on its box that has no written reason, with the observations pulling it
    there (empty: the profile may ship)."""
    from planner.perf.fitted_params import PARAM_NAMES

    reasons = BOUND_REASONS.get((card, engine), {})
    lines = []
    for name, side in zip(PARAM_NAMES, result.bounds, strict=True):
        if side and name not in reasons:
            pullers = ", ".join(result.bound_pullers.get(name, [])) or "(none named)"
            lines.append(f"{name} on its {side} bound, pulled there by {pullers}")
    return lines


# A shipped term is reproduced when the refit is within 0.1 % of it: the profile keeps 5 significant digits
# (<= 5e-5 relative) and the solver stops on a tolerance of its own; a moved prior or a changed row moves a
# term by far more (the 2026-12-05 per-request prior moved request_overhead_us 10x).  [assumed]
REPRODUCE_REL_TOL = 1e-3


def shipped_profile(card: str, engine: str) -> Path:
    return ROOT / "hwprofiles" / "fitted" / f"{card}.{engine}.yaml"


def reproduction_gaps(card: str, engine: str, result: Any) -> list[str]:
    """'name shipped -> refit' for each coefficient of the shipped profile that `result` (the group's fit on
    all its rows) does not reproduce within REPRODUCE_REL_TOL, relative; [] when it reproduces them all."""
    shipped = yaml.safe_load(shipped_profile(card, engine).read_text(encoding="utf-8"))["measured"]
    gaps: list[str] = []
    _compare(shipped["coefficients"], result.coefficients.model_dump(), "", gaps)
    return gaps


def _compare(shipped: Any, refit: Any, name: str, gaps: list[str]) -> None:
    """Append 'name shipped -> refit' for every number (nested dicts walked) beyond the tolerance."""
    if isinstance(shipped, dict):
        for key, value in shipped.items():
            _compare(value, (refit or {}).get(key), f"{name}.{key}" if name else key, gaps)
    elif isinstance(shipped, (int, float)) and isinstance(refit, (int, float)):
        if abs(refit - shipped) > REPRODUCE_REL_TOL * abs(shipped):
            gaps.append(f"{name} {shipped:.5g} -> {refit:.5g}")
    elif shipped != refit:
        gaps.append(f"{name} {shipped} -> {refit}")


def check(groups: dict[tuple[str, str], Group]) -> int:
    """Print, per group with a shipped profile, whether its fit reproduces the profile; 1 if any does not."""
    import time

    failed = 0
    for (card, engine), group in sorted(groups.items()):
        if not shipped_profile(card, engine).exists():
            continue
        started = time.process_time()
        result = fitted([p for _, _, p in group], card)
        gaps = ["the fit refused its rows"] if result is None else reproduction_gaps(card, engine, result)
        spent = time.process_time() - started
        verdict = "reproduces" if not gaps else "does NOT reproduce: " + "; ".join(gaps)
        print(f"{card}.{engine}: {len(group)} rows, fit {spent:.1f} s of CPU; {verdict}", flush=True)
        failed += bool(gaps)
    return int(failed > 0)


RESULTS: dict[tuple[str, str], Any] = {}  # (card, engine) -> the group's fit on all its rows (report())


def report(card: str, engine: str, group: Group, residuals: list[dict[str, str]]) -> list[str]:
    """Markdown lines for one group; appends its per-row residuals."""
    points = [p for _, _, p in group]
    models = sorted({r["model"] for r, _, _ in group})
    shipped = errors(points, card)
    result = fitted(points, card)
    RESULTS[(card, engine)] = result
    lines = [f"\n### {card} / {engine}: {len(group)} rows, {len(models)} models\n"]
    lines.append(
        f"- datasheet profile, assumed efficiencies (no fit): median |error| {median_abs(shipped):.1%}"
    )
    if result is None:
        return [*lines, f"- the fit refuses these rows: {REFUSALS[-1]}"]
    lines.append(
        f"- fitted on all rows, in sample: median |error| {median_abs(result.residual_fractions):.1%}"
    )
    lines.append("- fitted terms (value x/÷ one-sigma factor, bound): " + terms(result))
    lines += [f"- fit warning: {w}" for w in result.warnings]
    lines += censored_lines(points, result.residual_fractions, "in sample")
    held = lomo(group, card)  # {} below holdout.MIN_MODELS models
    if held:
        lines.append("\n| held-out model | rows | median abs error |\n|---|---|---|")
        lines += [f"| {m} | {len(e)} | {median_abs(e):.1%} |" for m, e in held.items()]
        all_errors = [e for errs in held.values() for e in errs]
        lines.append(f"| **all rows (LOMO)** | {len(all_errors)} | **{median_abs(all_errors):.1%}** |")
        held_points = [p for m in held for p in points if p.model == m]
        lines += censored_lines(held_points, all_errors, "leave-one-model-out")
    family = held_out_family(group, card)
    if family:
        lines.append("\nQwen3.5 rows, fit without any Qwen3.5 row:\n")
        lines.append("| model | concurrency | mtp | published | error |\n|---|---|---|---|---|")
        for r, e in family:
            published = r["output_tokens_per_s"]
            lines.append(f"| {r['model']} | {r['concurrency']} | {r['mtp'] or 0} | {published} | {e:+.1%} |")
    lines += older_rows(card, engine, result, residuals)
    for (row, bench, _), s, f in zip(group, shipped, result.residual_fractions, strict=True):
        model_lomo = held.get(row["model"])
        index = [b["corpus_row"] for r, b, _ in group if r["model"] == row["model"]].index(
            bench["corpus_row"]
        )
        residuals.append({
            "corpus_row": bench["corpus_row"], "card": card, "engine": engine, "model": row["model"],
            "concurrency": row["concurrency"], "mtp": row["mtp"], "published": row["output_tokens_per_s"],
            "error_shipped": f"{s:+.3f}", "error_fitted_in_sample": f"{f:+.3f}",
            "error_lomo": "" if model_lomo is None else f"{model_lomo[index]:+.3f}", "fitted": "yes",
        })  # fmt: skip
    return lines


def censored_lines(points: list[Any], errs: list[float], label: str) -> list[str]:
    """With floors read as lower bounds (the default): the floor rows' median shortfall below 0.97 x their
    floor (outside the ceiling too, with --floor-headroom), their median signed error (how far above its
    floors the fit sits), and the measured rows' median |error|; nothing when floors are read as exact (no
    --floor-margin)."""
    import statistics

    from planner.fit import censored

    floored = [(p, e) for p, e in zip(points, errs, strict=True) if p.floor_fraction is not None]
    if not FLOORS["one_sided"] or not floored:
        return []
    seen = censored.floor_shortfalls(
        [e for _, e in floored], [p.floor_fraction for p, _ in floored],
        [p.floor_headroom_fraction for p, _ in floored],
    )  # fmt: skip
    signed = statistics.median(e for _, e in floored) if floored else float("nan")
    measured = [e for p, e in zip(points, errs, strict=True) if p.floor_fraction is None]
    return [
        f"- {label}, floors as lower bounds (margin {FLOORS['margin'] or 0}): {len(floored)} floor rows, "
        f"median shortfall {median_abs(seen):.1%} (only outside [0.97, 1 + {FLOORS['headroom'] or 'inf'}] x "
        f"floor), median error {signed:+.1%}; measured rows: "
        + (f"{median_abs(measured):.1%} ({len(measured)} rows)" if measured else "none")
    ]


def older_rows(card: str, engine: str, result: Any, residuals: list[dict[str, str]]) -> list[str]:
    """Markdown lines: the group's rows that are not fitted (predict.not_fitted) under the profile fitted on
    the rest; appends their residuals (fitted = no)."""
    older = OLDER.get((card, engine), [])
    if not older:
        return []
    points = [p for _, _, p in older]
    shipped, now = errors(points, card), errors(points, card, result.coefficients)
    lines = [
        f"\nRows not fitted (older engines, {predict.FIT_ERA_START} cut; corrections after the fit: "
        "predict.not_fitted), "
        f"predicted by the fit above: median |error| {median_abs(now):.1%}\n",
        "| model | engine version | date | concurrency | published | error |\n|---|---|---|---|---|---|",
    ]
    for (row, bench, _), s, e in zip(older, shipped, now, strict=True):
        lines.append(
            f"| {row['model']} | {row['engine_version'] or '-'} | {row['source_date']} | "
            f"{row['concurrency']} | {row['output_tokens_per_s']} | {e:+.1%} |"
        )
        residuals.append({
            "corpus_row": bench["corpus_row"], "card": card, "engine": engine, "model": row["model"],
            "concurrency": row["concurrency"], "mtp": row["mtp"], "published": row["output_tokens_per_s"],
            "error_shipped": f"{s:+.3f}", "error_fitted_in_sample": f"{e:+.3f}", "error_lomo": "",
            "fitted": "no",
        })  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write",
        action="store_true",
        help="write fit-rows/*.csv, hwprofiles/fitted/*.yaml and fit-residuals.csv",
    )
    parser.add_argument(
        "--only",
        metavar="CARD.ENGINE",
        help="fit one group only (e.g. ascend-910b3.vllm); --write then "
        "replaces that group's rows of fit-residuals.csv and keeps the others'",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="only refit the groups that ship a profile and say whether each reproduces it (exit 1 if not)",
    )
    parser.add_argument(
        "--floor-margin",
        type=float,
        metavar="M",
        help="read CI baseline floors as lower bounds, a run taken to be M above 0.97 x its floor "
        "(0: one-sided); default: floors read as exact throughputs, as the shipped profiles are fitted",
    )
    parser.add_argument(
        "--floor-headroom",
        type=float,
        metavar="H",
        help="with --floor-margin: a floor row's run reached at most (1 + H) x its floor (assumed)",
    )
    args = parser.parse_args(argv)
    FLOORS.update(
        one_sided=args.floor_margin is not None,
        headroom=args.floor_headroom,
        margin=args.floor_margin or None,
    )
    residuals: list[dict[str, str]] = []
    groups = selected(corpus_groups(), args.only)
    if args.check:
        return check(groups)
    for (card, engine), group in sorted(groups.items()):
        print("\n".join(report(card, engine, group, residuals)), flush=True)
        if args.write and (card, engine) not in NOT_WRITTEN:
            result = RESULTS.get((card, engine))
            refused = (
                ["the fit refused its rows"] if result is None else unexplained_bounds(card, engine, result)
            )
            if refused:
                print(f"\nnot written (a term on its bound without a written reason): {'; '.join(refused)}")
                continue
            print(f"\nwrote {write_group(card, engine, group).relative_to(ROOT)}", flush=True)
    if args.write:  # without --write the script only reports (it rewrote the residuals before)
        write_residuals(HERE / "fit-residuals.csv", residuals, replaced=set(groups))
    return 0


def selected(groups: dict[tuple[str, str], Group], only: str | None) -> dict[tuple[str, str], Group]:
    """All groups, or the one `only` names ("card.engine"); an unknown name exits with one line."""
    if only is None:
        return groups
    key = tuple(only.rsplit(".", 1))
    if key not in groups:
        names = ", ".join(f"{c}.{e}" for c, e in sorted(groups))
        sys.exit(f"--only {only}: no such group (groups: {names})")
    return {key: groups[key]}  # type: ignore[index]


def write_residuals(path: Path, residuals: list[dict[str, str]], *, replaced: set[tuple[str, str]]) -> None:
    """Write per-row residuals, keeping the rows of groups not in `replaced` from the file already there."""
    kept: list[dict[str, str]] = []
    if path.exists():
        with path.open(encoding="utf-8") as handle:
            kept = [r for r in csv.DictReader(handle) if (r["card"], r["engine"]) not in replaced]
    rows = sorted(kept + residuals, key=lambda r: (r["card"], r["engine"]))  # stable: group order kept
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(residuals[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
