"""The simulator against published serving measurements (ACCURACY.md, section "Serving simulation").

1. The seed's concurrency table (Qwen3-27B = qwen3.5-27b fp8 on one 950PR under MindIE, prompt 256, output
   128): per-user decode tok/s at 1 / 8 / 32 / 128 users and aggregate output tok/s.
2. vllm-ascend nightly baselines (calibration/published/ascend-serving.csv, kind ci-baseline-floor: the CI
   asserts >= 0.97 x this output tok/s): single-instance rows whose model and card kvplan catalogues, run as
   a closed loop of C users with the row's lengths, max_num_seqs and max_num_batched_tokens.
Every simulation is seeded; nothing here was fitted to these rows (held out). Prints markdown tables.

Run: python3 benchmarks/sim_accuracy.py
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner import catalog, inputs  # noqa: E402
from planner.errors import KvplanError  # noqa: E402
from planner.sim import run  # noqa: E402
from planner.sim import workload as wl  # noqa: E402

SEED_ROWS = ((1, 15.8, 15.0), (8, 11.0, 90.0), (32, 7.0, 220.0), (128, 3.0, None))  # users, per-user, total
VLLM_DTYPES = {"int8": "int8", "bf16": "bf16", "w4a8": "w4a16"}


def closed_loop(prompt: int, output: int, *, users: int, count: int) -> wl.Workload:
    lengths = (wl.LengthDist("fixed", prompt, prompt), wl.LengthDist("fixed", output, output))
    work = wl.synthetic(lengths=lengths, count=count, rate_per_s=None, seed=0)
    return wl.Workload(work.input_tokens, work.output_tokens, arrival_s=None, concurrency=users)


def simulate(request: inputs.PlanRequest, work: wl.Workload, **knobs: object) -> run.SimResult:
    dep = inputs.to_deployment(request)
    return run.simulate(dep, work, cfg=run.default_config(dep, workload=work, **knobs))


def seed_table() -> None:
    print("| users | measured per-user tok/s | simulated | measured total tok/s | simulated | P95 TTFT sim |")
    print("|---|---|---|---|---|---|")
    for users, per_user, total in SEED_ROWS:
        request = inputs.PlanRequest(model="qwen3-27b", card="ascend-950pr", dtype="fp8", ctx="384")
        s = simulate(request, closed_loop(256, 128, users=users, count=max(20 * users, 200))).summary
        shown = "-" if total is None else f"{total:g}"
        print(
            f"| {users} | {per_user:g} | {1 / s.tpot_s.mean:.1f} | {shown} | "
            f"{s.throughput.output_tokens_per_s:.0f} | {s.ttft_s.p95:.2f} s |"
        )


KEY = ("model", "card", "dtype", "tp", "concurrency", "input_tokens", "output_tokens", "mtp", "max_num_seqs")


def nightly_rows() -> list[dict[str, str]]:
    """Single-instance baselines (dp 1, ep <= tp), the newest row per configuration."""
    path = ROOT / "calibration" / "published" / "ascend-serving.csv"
    rows = [r for r in csv.DictReader(path.open()) if r["kind"] == "ci-baseline-floor"]
    known = [r for r in rows if r["dp"] in ("1", "") and r["input_tokens"] and r["concurrency"]]
    single = [r for r in known if r["ep"] in ("", "1") or int(r["tp"] or 1) >= int(r["ep"] or 1)]
    newest: dict[tuple[str, ...], dict[str, str]] = {}
    for row in sorted(single, key=lambda r: r["source_date"]):
        newest[tuple(row[k] for k in KEY)] = row
    return sorted(newest.values(), key=lambda r: (r["model"], r["card"], int(r["concurrency"])))


def nightly_table() -> None:
    print("| model | card | dtype | tp | C | in/out | MTP | published out tok/s | simulated | sim/pub |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    skipped: list[str] = []
    for row in nightly_rows():
        try:
            catalog.resolve_model(row["model"])
            users, prompt, output = (
                int(row["concurrency"]),
                int(row["input_tokens"]),
                int(row["output_tokens"]),
            )
            request = inputs.PlanRequest(
                model=row["model"], card=row["card"], dtype=VLLM_DTYPES.get(row["dtype"], row["dtype"]),
                tp=int(row["tp"] or 1), ctx=str(prompt + output), engine="vllm", mtp=int(row["mtp"] or 0),
                max_prefill_tokens=max(int(row["max_num_batched_tokens"] or 8192), prompt),
            )  # fmt: skip
            knobs = {"max_batch": int(row["max_num_seqs"] or 0) or None}
            if row["max_num_batched_tokens"]:
                knobs["max_batched_tokens"] = int(row["max_num_batched_tokens"])
            s = simulate(request, closed_loop(prompt, output, users=users, count=4 * users), **knobs).summary
        except KvplanError as exc:
            skipped.append(f"{row['model']} on {row['card']} (C {row['concurrency']}): {str(exc)[:70]}")
            continue
        published = float(row["output_tokens_per_s"])
        sim = s.throughput.output_tokens_per_s
        print(
            f"| {row['model']} | {row['card']} | {row['dtype']} | {row['tp']} | {users} | "
            f"{prompt}/{output} | "
            f"{row['mtp'] or 0} | {published:g} | {sim:.0f} | {sim / published:.2f} |"
        )
    print(f"\nskipped {len(skipped)} rows:")
    for line in skipped:
        print(f"- {line}")


if __name__ == "__main__":
    seed_table()
    print()
    nightly_table()
