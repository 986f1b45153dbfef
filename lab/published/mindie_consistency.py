"""Can any non-negative decode cost model match MindIE's published 910B3 TPOTs? (issue 27, 2026-12-07)

    PYTHONPATH=. python lab/published/mindie_consistency.py

Rows: Alauda's MindIE 2.2.RC1 open-loop Chat 512/256 sweeps at 1-3 req/s (lab/published/ascend-serving.csv
lines 241-243, 271-273, 299-301, 341-343): Qwen3-14B at TP1 and TP2, Qwen3-30B-A3B at TP2 and TP4, every
other setting equal. Each row's per-user TPOT is modelled as one decode step stretched by the prefills of
arriving requests (MindIE runs a prefill as its own step, stalling every running decode):

    TPOT_s * (1 - r * TTFT_s) = S + w * G + c * n + s * N

    r     arrival rate (requests / s); r * TTFT_s the share of wall time spent in others' prefills
          (an upper bound: TTFT also holds the per-request cost outside the forward pass)
    G     bytes one rank streams per step (GB): weights and KV, from planner.perf.roofline.decode_ledger
          at the running batch N (routed experts by expected_experts_touched), interconnect excluded
    n     layers with a TP all-reduce per step (the ledger's tp.allreduce layers; 0 at TP1)
    N     running sequences, by Little's law: r * (TTFT_s + output_tokens * TPOT_s)
    S     a fixed cost per step (s), >= 0
    w     seconds per GB streamed, >= 1 / peak bandwidth (no rank streams faster than its HBM)
    c     seconds per all-reduce layer, >= 0
    s     seconds per running sequence per step (scheduling, sampling), >= 0

The script finds the least-squares fit (relative errors) under those bounds, exactly: the optimum of a
bounded least-squares problem is the unconstrained solution on some set of free terms with the others at
their bounds, so every such set is solved and the best feasible one kept. It prints the terms and each row's
error. Finding (2026-12-07): no admissible cost set matches these rows, even in sample. On all 12
rows the best one streams at the card's peak bandwidth (w on its bound), charges nothing per all-reduce,
21 ms per step and 0.16 ms per sequence, and misses by -27 % (the 14B at TP2, as slow as at TP1) to +24 %
(the 30B-A3B at TP2), median 16 %; on the four 1 req/s rows alone it needs no fixed cost (S on its bound),
w again on its bound and 2.1 ms per running sequence per step (-11 .. +12 %). Without the stall correction
(r x TTFT overstates a 520-token prefill) the errors are -26 .. +19 %, w still on its bound. So the cost
model lacks what these rows need (a TP2 that gives the 14B no speed-up, while the 30B-A3B gains nothing
from TP4), and the 910B3 MindIE group's leave-one-model-out TPOT (phase-table.md: 125.8 %) is not a
fitting problem.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import numpy as np

from planner import catalog
from planner.deployment import Deployment
from planner.perf.roofline import decode_ledger

CORPUS = Path(__file__).resolve().parent / "ascend-serving.csv"
LINES = (241, 242, 243, 271, 272, 273, 299, 300, 301, 341, 342, 343)
CARD = "ascend-910b3"
TERMS = ("S (ms per step)", "w (ms per GB)", "c (ms per all-reduce layer)", "s (ms per sequence per step)")


def corpus_lines() -> dict[int, dict[str, str]]:
    with CORPUS.open(encoding="utf-8", newline="") as handle:
        return {index: row for index, row in enumerate(csv.DictReader(handle), start=2) if index in LINES}


def features(row: dict[str, str]) -> tuple[list[float], float, float]:
    """([1, G GB, n, N], stretched TPOT target s, rate) of one corpus row."""
    rate = float(row["notes"].split("| ")[1].split(" |")[0])  # the sweep row's first cell: req/s
    ttft_s, tpot_s = float(row["ttft_s"]), float(row["tpot_s"])
    running = rate * (ttft_s + int(row["output_tokens"]) * tpot_s)
    model, _ = catalog.resolve_model(row["model"])
    dep = Deployment(
        model=model, hardware=catalog.load_card(CARD), weight_scheme_name="bf16",
        kv_dtype="bf16", tp=int(row["tp"]), ctx_tokens=int(row["input_tokens"]) + int(row["output_tokens"]),
        batch=max(1, round(running)), engine="mindie", calibrated=False,
    )  # fmt: skip
    mean_ctx = int(row["input_tokens"]) + int(row["output_tokens"]) // 2  # a decode step's mean context
    ledger = decode_ledger(dep, batch=max(1, round(running)), ctx_tokens=mean_ctx)
    collectives = sum(op.layers for op in ledger.ops if op.name == "tp.allreduce")
    streamed_gb = ledger.hbm_bytes / 1e9
    return [1.0, streamed_gb, float(collectives), running], tpot_s * (1 - rate * ttft_s), rate


def bounded_fit(x: np.ndarray, y: np.ndarray, lower: np.ndarray) -> tuple[np.ndarray, float]:
    """argmin sum(((x b - y) / y)^2) subject to b >= lower, by enumerating the free sets."""
    xs, ys = x / y[:, None], np.ones_like(y)
    best: tuple[np.ndarray, float] = (lower.copy(), float(np.sum((xs @ lower - ys) ** 2)))
    for size in range(1, x.shape[1] + 1):
        for free in itertools.combinations(range(x.shape[1]), size):
            fixed = [j for j in range(x.shape[1]) if j not in free]
            rhs = ys - xs[:, fixed] @ lower[fixed]
            sol, *_ = np.linalg.lstsq(xs[:, list(free)], rhs, rcond=None)
            if np.any(sol < lower[list(free)] - 1e-12):
                continue
            b = lower.copy()
            b[list(free)] = sol
            sse = float(np.sum((xs @ b - ys) ** 2))
            if sse < best[1]:
                best = (b, sse)
    return best


def fitted(
    *, rates: tuple[float, ...]
) -> tuple[np.ndarray, np.ndarray, list[tuple[int, dict[str, str], list[float], float, float]]]:
    """(terms in ms, each row's fit / stretched TPOT - 1, the rows) over the LINES rows at these rates."""
    rows = corpus_lines()
    peak_gb_per_ms = catalog.load_card(CARD).memory_bandwidth_gb_per_s / 1e3
    table = [(line, rows[line], *features(rows[line])) for line in LINES]
    table = [t for t in table if t[4] in rates]
    x = np.array([f for _, _, f, _, _ in table])
    y = np.array([t for _, _, _, t, _ in table]) * 1e3  # ms
    terms, _ = bounded_fit(x, y, np.array([0.0, 1.0 / peak_gb_per_ms, 0.0, 0.0]))
    return terms, x @ terms / y - 1.0, table


def main() -> None:
    for label, rates in (("rate 1 only", (1.0,)), ("rates 1-3", (1.0, 2.0, 3.0))):
        terms, errors, table = fitted(rates=rates)
        print(f"{label}: " + ", ".join(f"{name} = {v:.3g}" for name, v in zip(TERMS, terms, strict=True)))
        for (line, row, f, target, rate), error in zip(table, errors, strict=True):
            print(
                f"  line {line}: {row['model']} tp{row['tp']} {rate:g} req/s  G {f[1]:.1f} GB  n {f[2]:.0f}"
                f"  N {f[3]:.1f}  stretched TPOT {target * 1e3:.1f} ms"
                f"  fit {target * 1e3 * (1 + error):.1f} ms  ({error:+.0%})"
            )


if __name__ == "__main__":
    main()
