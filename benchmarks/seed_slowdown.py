"""Where the seed's per-user slowdown with concurrency comes from, term by term (issue 27, item 4).

    PYTHONPATH=. python benchmarks/seed_slowdown.py

Seed 000 (/work/shared/seeds/000_*.txt; corpus lines 122, 124, 125): Qwen3-27B (Qwen3.5-27B card) FP8 on a
64 GB Ascend 950PR under MindIE, 256-token prompts, 128 output tokens, a client loop without ignore_eos
("random" arrivals), 1 / 8 / 32 clients: TPOT 63 / 90.9 / 142.9 ms. The profile is the shipped fit of those
rows (hwprofiles/fitted/ascend-950pr.mindie.yaml). The closed loop (planner/perf/closed_loop.py, "random")
gives
    TPOT(b) = t(b) / a + others' prefills (b - 1 prompts merged into passes) / (O - 1),
and t(b), the decode step at batch b (ledger: planner/perf/roofline.py), splits into
    - the part every step pays whatever the batch: t(1) less its per-sequence cost;
    - scheduling: sequence_overhead_us per running sequence (host, scheduler, per-request kernels);
    - decode-step growth from reading more: the attention / linear-attention state / activation ops' growth.
Printed: each part in ms per output token at b = 1, 8, 32, and the share of the growth TPOT(b) - TPOT(1).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED_ROWS = ROOT / "lab" / "published" / "fit-rows" / "ascend-950pr.mindie.csv"
MEASURED_TPOT_MS = {1: 63.0, 8: 90.9, 32: 142.9}  # seed 000, corpus lines 122, 124, 125


def parts(batch: int) -> dict[str, float]:
    """Seconds per output token at `batch` clients: fixed step part, scheduling, read growth, others'
    prefills, and the closed loop's TPOT (their sum)."""
    from planner import catalog
    from planner.fit import serving_rows as fit_serving
    from planner.importers.benchpoints import read_bench_rows
    from planner.perf import roofline
    from planner.serving import closed_loop

    _, rows = read_bench_rows(SEED_ROWS)
    point = next(r for r in rows if r.concurrency == batch)
    profile = catalog.fitted_profile("ascend-950pr", "mindie")
    prepared = fit_serving.prepare([point], hardware=profile)[0]
    dep = prepared.deployment
    est = fit_serving.estimate(prepared)
    ctx = point.input_tokens + point.output_tokens // 2
    rate = roofline.rates(dep)
    step_b = roofline.decode_step_s(dep, batch=batch, ctx_tokens=ctx)
    step_1 = roofline.decode_step_s(dep, batch=1, ctx_tokens=ctx)
    per_token = 1.0 / est.tokens_per_step
    scheduling = rate.sequence_overhead_s * batch
    fixed = step_1 - rate.sequence_overhead_s
    steps = (point.output_tokens - 1) / est.tokens_per_step
    timer = closed_loop.RooflineTimer(dep)
    others, _ = closed_loop.merged_prefill_s(
        timer, prompt_tokens=point.input_tokens, batch=batch - 1, steps=steps
    )
    return {
        "fixed": fixed * per_token,
        "scheduling": scheduling * per_token,
        "read growth": (step_b - step_1 - rate.sequence_overhead_s * (batch - 1)) * per_token,
        "others' prefills": others / (point.output_tokens - 1),
        "model TPOT": est.tpot_s,
    }


def main() -> int:
    rows = {b: parts(b) for b in MEASURED_TPOT_MS}
    names = list(rows[1])
    print("| part (ms per output token) | " + " | ".join(f"{b} clients" for b in rows) + " |")
    print("|---|" + "---|" * len(rows))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{rows[b][name] * 1e3:.1f}" for b in rows) + " |")
    print("| measured TPOT | " + " | ".join(f"{MEASURED_TPOT_MS[b]:.1f}" for b in rows) + " |")
    for b in (8, 32):
        growth = rows[b]["model TPOT"] - rows[1]["model TPOT"]
        shares = {
            n: (rows[b][n] - rows[1][n]) / growth for n in ("scheduling", "read growth", "others' prefills")
        }
        text = ", ".join(f"{n} {s:.0%}" for n, s in shares.items())
        print(f"\nTPOT growth 1 -> {b} clients: model {growth * 1e3:.1f} ms "
              f"(measured {MEASURED_TPOT_MS[b] - MEASURED_TPOT_MS[1]:.1f} ms): {text}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
