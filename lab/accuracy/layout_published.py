"""Published vllm-ascend / SGLang serving rows with DP or EP layouts vs kvplan's closed-loop estimate.

    python3 lab/accuracy/layout_published.py            # table on stdout (ACCURACY.md, "Parallel layouts")

Rows: lab/published/ascend-serving.csv, card ascend-910c, dp > 1 or ep > 1, a catalogued model,
not prefill/decode-disaggregated. Each row is planned as a vLLM deployment of its tp/dp/ep with
max_num_batched_tokens as --max-prefill-tokens, MTP as published, memory fraction 0.9; the closed-loop
estimate (planner/serving/closed_loop.py, steady waves) runs on one DP group at ceil(concurrency / dp) clients
with max_num_seqs as its batch limit, times dp. CI rows are floors (CI asserts >= 0.97 x baseline).
Speeds: the 910C's shipped vllm-ascend fit (hwprofiles/fitted/ascend-910c.vllm.yaml), as the plan reads it.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from planner import capacity  # noqa: E402
from planner.errors import KvplanError  # noqa: E402
from planner.inputs import PlanRequest, to_deployment  # noqa: E402
from planner.serving.closed_loop import BenchRun, serving_estimate  # noqa: E402

CSV = ROOT / "lab" / "published" / "ascend-serving.csv"


def selected(row: dict[str, str]) -> bool:
    """Layout rows of the 910C that are not prefill/decode-disaggregated."""
    layout = int(row["dp"] or 1) > 1 or int(row["ep"] or 1) > 1
    disagg = "disaggregated" in row["notes"] or "-PD" in row["source_path"] or "disagg" in row["source_path"]
    return (
        row["card"] == "ascend-910c"
        and bool(row["tp"])
        and layout
        and not disagg
        and bool(row["concurrency"])
    )


def predicted_tokens_per_s(row: dict[str, str]) -> float:
    """dp x one DP group's closed-loop output tokens/s at ceil(concurrency / dp) clients."""
    dp, conc = int(row["dp"] or 1), int(row["concurrency"])
    inp, out = int(row["input_tokens"]), int(row["output_tokens"])
    request = PlanRequest(
        model=row["model"],
        card=row["card"],
        dtype=row["dtype"],
        tp=int(row["tp"]),
        dp=dp,
        ep=int(row["ep"] or 1),
        ctx=str(inp + out),
        mtp=int(row["mtp"] or 0),
        engine="vllm",
        max_prefill_tokens=int(row["max_num_batched_tokens"] or 8192),
        memory_fraction=0.9,
    )
    dep = capacity.per_dp_rank(to_deployment(request))
    capacity.memory_plan(dep)
    seqs = int(row["max_num_seqs"]) if row["max_num_seqs"] else None
    est = serving_estimate(
        dep,
        input_tokens=inp,
        output_tokens=out,
        concurrency=math.ceil(conc / dp),
        run=BenchRun(max_batch=seqs),
    )
    return dp * est.output_tokens_per_s


def main() -> None:
    """Print one line per distinct published row: layout, lengths, published, predicted, ratio."""
    seen = set()
    print("model | tp/dp/ep | conc | in/out | mtp | published tok/s | kvplan tok/s | kvplan/published")
    for row in csv.DictReader(CSV.open()):
        key = tuple(
            row[k]
            for k in (
                "model",
                "tp",
                "dp",
                "ep",
                "concurrency",
                "input_tokens",
                "output_tokens",
                "output_tokens_per_s",
                "mtp",
            )
        )
        if not selected(row) or key in seen:
            continue
        seen.add(key)
        try:
            got = predicted_tokens_per_s(row)
        except KvplanError as exc:
            print(
                f"{row['model']} | {row['tp']}/{row['dp']}/{row['ep']} | {row['concurrency']} | - | - | "
                f"{row['output_tokens_per_s']} | not planned: {str(exc)[:90]} | -"
            )
            continue
        published = float(row["output_tokens_per_s"])
        print(
            f"{row['model']} | {row['tp']}/{row['dp']}/{row['ep']} | {row['concurrency']} | "
            f"{row['input_tokens']}/{row['output_tokens']} | {row['mtp'] or 0} | {published:.0f} | "
            f"{got:.0f} | {got / published:.2f}"
        )


if __name__ == "__main__":
    main()
