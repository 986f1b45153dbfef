"""Speed of the vectorised decode grid (goal: a 10^5-point grid well under 0.2 s beyond start-up).

Prints numbers; asserts nothing. Start-up (imports, catalogue load) is timed separately from evaluation.

Run: python3 benchmarks/bench_sweep.py [--runs N] [--batches B] [--contexts C]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

MS_PER_S = 1000  # display only (this script is not part of planner/)


def timed(function: Callable[[], object], runs: int) -> list[float]:
    """Wall-clock seconds of each call."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return samples


def report(name: str, samples: list[float], points: int) -> None:
    median = statistics.median(samples)
    print(
        f"{name:48s} {points:>9,d} {median * MS_PER_S:9.2f} {min(samples) * MS_PER_S:9.2f} "
        f"{max(samples) * MS_PER_S:9.2f} {points / median / 1e6:9.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--batches", type=int, default=500)
    parser.add_argument("--contexts", type=int, default=200)
    args = parser.parse_args()

    start = time.perf_counter()
    import numpy as np

    from planner import catalog
    from planner.deployment import Deployment
    from planner.dtypes import StorageDType
    from planner.perf import roofline
    from planner.serving import sweep

    dep = Deployment(
        model=catalog.resolve_model("qwen3-27b")[0],
        hardware=catalog.load_card("ascend-950pr"),
        weight_scheme_name="fp8",
        kv_dtype=StorageDType.bf16,
        tp=1,
        ctx_tokens=32768,
        mtp_tokens=1,
        mtp_acceptance_fraction=0.8,
    )
    startup_s = time.perf_counter() - start
    batch = np.arange(1, args.batches + 1)
    ctx = np.linspace(128, 131072, args.contexts).astype(np.int64)
    points = batch.size * ctx.size
    print(f"start-up (imports + catalogue + deployment): {startup_s * MS_PER_S:.1f} ms")
    print(f"{'case':48s} {'points':>9s} {'median ms':>9s} {'min ms':>9s} {'max ms':>9s} {'Mpt/s':>9s}")
    cases: dict[str, tuple[Callable[[], object], int]] = {
        "decode_step_s_grid (qwen3.5-27b fp8, MTP 1)": (
            lambda: roofline.decode_step_s_grid(dep, batch=batch[:, None], ctx_tokens=ctx[None, :]),
            points,
        ),
        "sweep.sweep, 1 dtype (+ tok/s, memory fit)": (
            lambda: sweep.sweep(dep, batch=batch.tolist(), ctx_tokens=ctx.tolist()),
            points,
        ),
        "sweep.sweep, 4 dtypes": (
            lambda: sweep.sweep(
                dep,
                batch=batch.tolist(),
                ctx_tokens=ctx.tolist(),
                weight_dtypes=["fp8", "bf16", "int8", "w4a16"],
            ),
            4 * points,
        ),
        "decode_step_s (scalar, one point, for scale)": (
            lambda: roofline.decode_step_s(dep, batch=64, ctx_tokens=8192),
            1,
        ),
    }
    for name, (function, n) in cases.items():
        function()  # warm-up
        report(name, timed(function, args.runs), n)


if __name__ == "__main__":
    main()
