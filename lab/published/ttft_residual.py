"""Low-load TTFT residual by engine version (issue 27): measured TTFT minus kvplan's forward-pass time.

    PYTHONPATH=. python lab/published/ttft_residual.py

For each low-load vllm-ascend row on the 910B3 (an open loop at <= 1 req/s that kept up with its arrivals,
or a closed loop of <= 4 clients), the command predictions-after.csv records (the shipped fitted profile) runs
in-process with --json. kvplan's simulated TTFT holds the fitted per-request cost (request_overhead_us of
hwprofiles/fitted/<card>.vllm.yaml) as a delay before the engine sees the request (planner/sim/engine.py), so

    forward_s  = simulated TTFT - request_overhead_s      (prefill pass, queueing behind steps, first token)
    residual_s = measured TTFT - forward_s                (what the row spends outside kvplan's forward pass)

for the mean and, where the row's notes quote one, the median (a low-load median is less moved by the few
requests that arrive during a long step). Groups: the engine era each row ran (its corpus engine_version),
with the CANN of the release image that version shipped in (the runs do not state theirs). Line 421 has no tp
in its source; it is shown at tp 2 and tp 4 (ASSUMED_TP), apart from the groups. Nothing here is fitted.
"""

from __future__ import annotations

import csv
import json
import re
import shlex
import statistics
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PREDICTIONS = HERE / "predictions-after.csv"
CORPUS = HERE / "ascend-serving.csv"
# corpus line -> (version group, CANN of that release's image: the runs state none)
LOW_LOAD_ROWS = {
    419: ("<= 0.9 (2025-04 .. 07)", "8.0.0 (v0.8.4rc2 image)"),
    418: ("<= 0.9 (2025-04 .. 07)", "8.1.RC1 (main Dockerfile, 2025-07)"),
    206: ("<= 0.9 (2025-04 .. 07)", "8.2.RC1 (v0.9.1 image)"),
    213: ("<= 0.9 (2025-04 .. 07)", "8.2.RC1 (v0.9.1 image)"),
    219: ("0.18.0 (2026-06)", "8.5.1 (v0.18.0 image)"),
    256: ("0.18.0 (2026-06)", "8.5.1 (v0.18.0 image)"),
}
# Alauda's vllm-ascend Qwen3-30B-A3B at 1 req/s (eager, expert parallel) fell behind its arrivals: not low
# load, shown apart as the only 0.18 MoE rows at that rate (predicted by their finite-run commands)
PAST_CAPACITY = "0.18.0 MoE, eager + EP, past capacity"
PAST_CAPACITY_ROWS = {286: PAST_CAPACITY, 323: PAST_CAPACITY}
CANN_0_18 = "8.5.1 (v0.18.0 image)"
ASSUMED_TP = {421: ("2", "4")}  # #1605's Qwen3-32B comment states no tp
MEDIAN_TTFT = re.compile(r"Median TTFT \(ms\): ([\d.]+)")


def simulated_ttft_s(command: str) -> tuple[float, float, float]:
    """(mean TTFT, p50 TTFT, mean TPOT) of a recorded `kvplan serve` / `kvplan simulate` command's simulated
    run, in seconds."""
    from typer.testing import CliRunner

    from planner.cli import app

    result = CliRunner().invoke(app, [*shlex.split(command)[1:], "--json"])
    if result.exit_code != 0:
        raise RuntimeError(f"{command}: {result.output.strip()}")
    report = json.loads(result.stdout)
    run = report.get("simulated", report)
    return run["ttft_s"]["mean"], run["ttft_s"]["p50"], run["tpot_s"]["mean"]


def request_overhead_s(card: str) -> float:
    """The fitted per-request cost of the card's shipped vllm-ascend profile, in seconds."""
    path = ROOT / "hwprofiles" / "fitted" / f"{card}.vllm.yaml"
    profile = yaml.safe_load(path.read_text(encoding="utf-8"))
    return profile["measured"]["coefficients"]["request_overhead_us"] * 1e-6


def residual(row: dict[str, str], command: str) -> dict[str, float | None]:
    """The row's measured, forward and residual TTFT (mean; median where quoted), in seconds."""
    mean_s, p50_s, tpot_s = simulated_ttft_s(command)
    overhead_s = request_overhead_s(row["card"])
    quoted = MEDIAN_TTFT.search(row["notes"])
    median_s = float(quoted.group(1)) / 1000 if quoted else None
    return {
        "measured_mean": float(row["ttft_s"]),
        "measured_median": median_s,
        "forward_mean": mean_s - overhead_s,
        "residual_mean": float(row["ttft_s"]) - (mean_s - overhead_s),
        "residual_median": None if median_s is None else median_s - (p50_s - overhead_s),
        "overhead": overhead_s,
        "tpot_ratio": float(row["tpot_s"]) / tpot_s,
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def line_of(line: int, row: dict[str, str], res: dict[str, float | None], group: str, cann: str) -> str:
    load = f"{row['concurrency']} clients" if row["concurrency"] else "1 req/s"
    return (
        f"| {line} | {row['model'].split('/')[1]} | {row['tp'] or '?'} | {row['engine_version']} | {cann} | "
        f"{load}, {row['input_tokens']}/{row['output_tokens']} | {_ms(res['measured_mean'])} / "
        f"{_ms(res['measured_median'])} | {_ms(res['forward_mean'])} | {_ms(res['residual_mean'])} / "
        f"{_ms(res['residual_median'])} | {res['tpot_ratio']:.2f} | {group} |"
    )


def assumed_tp_command(row: dict[str, str], tp: str) -> str:
    """The row's `kvplan simulate --rate 1` command at an assumed tp (the row states none)."""
    return (
        f"kvplan simulate -m {row['model']} --card {row['card']} --dtype {row['dtype']} --kv-dtype "
        f"{row['kv_dtype']} --tp {tp} --engine vllm --input-tokens {row['input_tokens']} --output-tokens "
        f"{row['output_tokens']} --rate 1 --memory-fraction 0.8 --max-prefill-tokens 8192"
    )


def main() -> int:
    with CORPUS.open(encoding="utf-8") as handle:
        corpus = {line: row for line, row in enumerate(csv.DictReader(handle), start=2)}
    with PREDICTIONS.open(encoding="utf-8") as handle:
        commands = {int(r["row"]): r["command"] for r in csv.DictReader(handle) if r["status"] == "predicted"}
    print("| line | model | tp | engine | CANN (image) | load, in/out | measured TTFT mean / median ms | "
          "kvplan forward ms | residual mean / median ms | TPOT measured / kvplan | group |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    groups: dict[str, list[float]] = {}
    for line, (group, cann) in LOW_LOAD_ROWS.items():
        res = residual(corpus[line], commands[line])
        groups.setdefault(group, []).append(res["residual_mean"])  # type: ignore[arg-type]
        print(line_of(line, corpus[line], res, group, cann))
    for line, label in PAST_CAPACITY_ROWS.items():
        res = residual(corpus[line], commands[line])
        print(line_of(line, corpus[line], res, label, CANN_0_18))
    for line, tps in ASSUMED_TP.items():
        for tp in tps:
            res = residual(corpus[line], assumed_tp_command(corpus[line], tp))
            row = {**corpus[line], "tp": f"{tp} (assumed)"}
            print(line_of(line, row, res, "not grouped (tp not stated)", "8.1.RC1"))
    print()
    for group, values in groups.items():
        median_ms, low_ms, high_ms = (1000 * v for v in (statistics.median(values), min(values), max(values)))
        spread = f"median {median_ms:.0f} ms, range {low_ms:.0f} .. {high_ms:.0f} ms"
        print(f"{group}: {len(values)} rows, residual (mean TTFT) {spread}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
