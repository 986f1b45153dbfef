"""The simulator against published serving measurements (ACCURACY.md, section "Serving simulation").

The seed's client (sections 1-3) sends each user's next request when its own ends, max_tokens 128 without
ignore_eos, so request ends drift apart: its closed loops run with staggered output lengths (uniform
64..192 tokens, mean 128: planner/sim/bench.py's "staggered", the reading the analytic knee and the seed fit,
closed_loop.py's "random" arrivals, share); fixed 128-token outputs would keep every request in step.
1. The seed's concurrency table (Qwen3-27B = qwen3.5-27b fp8 on one 950PR with 64 GB, as the seed's card,
   under MindIE, prompt 256, output 128): per-user decode tok/s at 1 / 8 / 32 / 128 users and aggregate
   output tok/s. The default 950PR + MindIE profile (hwprofiles/fitted/ascend-950pr.mindie.yaml) was fitted
   on the 1 / 8 / 32 rows (in-sample); 128 is held out.
2. The knee: the concurrency of largest output tok/s per P99 end-to-end second, simulated over a geometric
   sweep and analytic (planner/serving/knee.py), against the seed's "batch 64 as the production threshold".
3. P95 TTFT before / after prefill-decode separation (seed: 1.05-1.18 s -> 0.63 s at batch 16): a closed loop
   of 16 users on one instance vs P:D 1:1 (planner/sim/pdloop.py), fixed 256-token prompts and a mix with
   occasional long prompts (the seed: "someone occasionally uploads a few thousand characters").
4. vllm-ascend nightly baselines (lab/published/ascend-serving.csv, kind ci-baseline-floor: the CI
   asserts >= 0.97 x this output tok/s): single-instance rows whose model and card kvplan catalogues, run as
   a closed loop of C users with the row's lengths, max_num_seqs and max_num_batched_tokens. Rows whose corpus
   line a shipped fitted profile was fitted on (lab/published/fit-rows/) are marked in-sample. Fixed
   lengths here: the nightly client runs with ignore_eos, and the profiles were fitted on these rows so.
Every simulation is seeded. Prints markdown tables.

Run: python3 lab/accuracy/sim_accuracy.py
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from planner import catalog, inputs  # noqa: E402
from planner.errors import KvplanError  # noqa: E402
from planner.serving import knee  # noqa: E402
from planner.serving.closed_loop import BenchRun  # noqa: E402
from planner.sim import (  # noqa: E402
    bench,
    instance,
    metrics,
    pdloop,
    pdspec,
    run,
    search,
)
from planner.sim import workload as wl  # noqa: E402

SEED_ROWS = ((1, 15.8, 15.0), (8, 11.0, 90.0), (32, 7.0, 220.0), (128, 3.0, None))  # users, per-user, total
SEED_FITTED_USERS = (1, 8, 32)  # hwprofiles/fitted/ascend-950pr.mindie.yaml: corpus lines 123-125
VLLM_DTYPES = {"int8": "int8", "bf16": "bf16", "w4a8": "w4a8"}  # kvplan weight schemes
SEED_CARD_GIB = 64.0
# The seed's 128-token outputs, staggered as planner/sim/bench.py's "staggered" draws them (O +- O/2, mean O)
SEED_OUTPUT = wl.LengthDist("uniform", 128 - 128 // 2, 128 + 128 // 2)


def closed_loop(prompt: int, output: int, *, users: int, count: int) -> wl.Workload:
    """Fixed lengths (a client with ignore_eos: requests stay in step)."""
    lengths = (wl.LengthDist("fixed", prompt, prompt), wl.LengthDist("fixed", output, output))
    work = wl.synthetic(lengths=lengths, count=count, rate_per_s=None, seed=0)
    return wl.Workload(work.input_tokens, work.output_tokens, arrival_s=None, concurrency=users)


def seed_loop(prompt: int, output: int, *, users: int, count: int) -> wl.Workload:
    """The seed's client: staggered output lengths (bench.py's, mean `output`), so requests drift apart."""
    return bench.bench_workload(tokens=(prompt, output), concurrency=users, count=count, arrivals="staggered")


def simulate(request: inputs.PlanRequest, work: wl.Workload, **knobs: object) -> instance.SimResult:
    dep = inputs.to_deployment(request)
    return run.simulate(dep, work, cfg=run.default_config(dep, workload=work, **knobs))


def seed_request(ctx: int = 384) -> inputs.PlanRequest:
    return inputs.PlanRequest(
        model="qwen3-27b", card="ascend-950pr", dtype="fp8", ctx=str(ctx), memory_gib=SEED_CARD_GIB
    )


def seed_table() -> None:
    print("| users | measured per-user tok/s | simulated | measured total tok/s | simulated | P95 TTFT sim "
          "| P99 TPOT sim | batch reached | fit |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for users, per_user, total in SEED_ROWS:
        s = simulate(seed_request(), seed_loop(256, 128, users=users, count=max(20 * users, 200))).summary
        shown = "-" if total is None else f"{total:g}"
        fit = "in-sample" if users in SEED_FITTED_USERS else "held out"
        print(
            f"| {users} | {per_user:g} | {1 / s.tpot_s.mean:.1f} | {shown} | "
            f"{s.throughput.output_tokens_per_s:.0f} | {s.ttft_s.p95:.2f} s | {s.tpot_s.p99 * 1e3:.0f} ms | "
            f"{s.max_batch_reached} | {fit} |"
        )


def knee_lines() -> None:
    dep = inputs.to_deployment(seed_request())
    analytic = knee.load_knee(dep)

    def run_at(users: float) -> metrics.SimSummary:
        k = int(users)
        return bench.simulate_bench(
            dep, tokens=(256, 128), concurrency=k, bench=BenchRun(num_requests=8 * k, arrivals="staggered")
        ).summary

    found = search.search(
        run_at, kind="knee", slo=(None, None), quantile="p99", span=("concurrency", 1.0, 256.0)
    )
    points = ", ".join(f"{p.x:g}: {p.output_tokens_per_s / p.e2e_s:.1f}" for p in found.points)
    alone_ms, there_ms = analytic.single_user_tpot_s * 1e3, analytic.tpot_p99_s * 1e3
    print(f"knee (64 GiB card): simulated {found.best:g} users (power = tok/s per P99 E2E s at {points}); "
          f"analytic {analytic.users} users (memory holds {analytic.max_users}), P99 TPOT there "
          f"{there_ms:.0f} ms vs {alone_ms:.0f} ms alone")  # fmt: skip


def pd_lines() -> None:
    dep = inputs.to_deployment(seed_request(ctx=4096 + int(SEED_OUTPUT.high)))
    spec = pdspec.spec_for(dep, counts=(1, 1), link_gbps=None)
    prompts = (
        ("fixed 256", wl.LengthDist("fixed", 256, 256)),
        ("lognormal 256 x e^(0.9 N), <= 4k", wl.LengthDist("lognormal", 256, 0.9)),
    )
    for label, prompt in prompts:
        lengths = (prompt, SEED_OUTPUT)
        work = wl.synthetic(lengths=lengths, count=800, rate_per_s=None, seed=1)
        work = wl.Workload(
            work.input_tokens.clip(1, 4096), work.output_tokens, arrival_s=None, concurrency=16
        )
        together = run.simulate(dep, work).summary
        apart = pdloop.simulate_fleet(spec, work, slo=(None, None), knobs={}).summary
        print(f"| {label} | {together.ttft_s.p95:.2f} s | {apart.ttft_s.p95:.2f} s | "
              f"{together.tpot_s.p99 * 1e3:.0f} ms | {apart.tpot_s.p99 * 1e3:.0f} ms | "
              f"{together.throughput.output_tokens_per_s:.0f} | "
              f"{apart.throughput.output_tokens_per_s:.0f} |")  # fmt: skip


KEY = ("model", "card", "dtype", "tp", "concurrency", "input_tokens", "output_tokens", "mtp", "max_num_seqs")


def published_rules() -> Any:
    """lab/published/predict.py: its skip and engine-era rules."""
    from lab.published import predict

    return predict


def nightly_rows() -> list[dict[str, str]]:
    """Single-instance baselines (dp 1, ep <= tp) that predict.py predicts and the fits may use (no skip
    reason, not an older engine), the newest row per configuration; `line`: its corpus line."""
    path = ROOT / "lab" / "published" / "ascend-serving.csv"
    rules = published_rules()
    rows = [{**r, "line": str(i + 2)} for i, r in enumerate(csv.DictReader(path.open()))]
    rows = [r for r in rows if r["kind"] == "ci-baseline-floor"]
    rows = [r for r in rows if rules._skip_reason(r) is None and rules.not_fitted(int(r["line"]), r) is None]
    known = [r for r in rows if r["dp"] in ("1", "") and r["input_tokens"] and r["concurrency"]]
    single = [r for r in known if r["ep"] in ("", "1") or int(r["tp"] or 1) >= int(r["ep"] or 1)]
    newest: dict[tuple[str, ...], dict[str, str]] = {}
    for row in sorted(single, key=lambda r: r["source_date"]):
        newest[tuple(row[k] for k in KEY)] = row
    return sorted(newest.values(), key=lambda r: (r["model"], r["card"], int(r["concurrency"])))


def fitted_lines() -> set[str]:
    """Corpus lines the shipped fitted profiles were fitted on."""
    lines: set[str] = set()
    for path in (ROOT / "lab" / "published" / "fit-rows").glob("*.csv"):
        lines |= {r["corpus_row"] for r in csv.DictReader(path.open())}
    return lines


def nightly_table() -> None:
    print(
        "| model | card | dtype | tp | C | in/out | MTP | published out tok/s | simulated | sim/pub | fit |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    skipped: list[str] = []
    fitted = fitted_lines()
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
            f"{row['mtp'] or 0} | {published:g} | {sim:.0f} | {sim / published:.2f} | "
            f"{'in-sample' if row['line'] in fitted else 'held out'} |"
        )
    print(f"\nskipped {len(skipped)} rows:")
    for line in skipped:
        print(f"- {line}")


if __name__ == "__main__":
    seed_table()
    print()
    knee_lines()
    print()
    print("| prompts (closed loop of 16, 128 out) | P95 TTFT one instance | P95 TTFT P:D 1:1 | P99 TPOT one "
          "| P99 TPOT P:D | out tok/s one | out tok/s P:D |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    pd_lines()
    print()
    nightly_table()
