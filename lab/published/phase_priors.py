"""Leave-one-model-out of one per-phase group under other priors: does any physical prior make it hold?

    PYTHONPATH=. python lab/published/phase_priors.py                      # ascend-910b3.mindie
    PYTHONPATH=. python lab/published/phase_priors.py --only ascend-910b3.vllm
    PYTHONPATH=. python lab/published/phase_priors.py --rest    # what bytes leave of each rate-1 ITL

Each variant refits the group (lab/published/phase_table.py's in-sample fit and its LOMO) with some fitted
terms' priors replaced, or a term added to the fit, and prints the median |error| of TTFT / TPOT / output
tok/s in sample and held out, each held-out model's medians, and each fold's per-step cost. Nothing here
changes a shipped profile: the priors are patched in this process only (planner/perf/fitted_params.py).

Variants (why each is physical: docs/accuracy.md, "MindIE 910B3: what the rows rule out"):
- step prior: MindIE runs each step synchronously, its CPU phases (data preparation, data return) between
  forward passes unless MINDIE_ASYNC_SCHEDULING_ENABLE=1 (MindIE-LLM docs/zh/user_guide/feature/
  asynchronous_scheduling.md; mindie_llm/text_generator/plugins/plugin_manager.py generate_token);
  Huawei's MindStudio case "框架调度耗时导致性能劣化" measured 30 ms (2.0.T3) and 60 ms (2.0.RC1) between
  serving and pure-model decode at 300 concurrent requests;
- kernels held: ATB launches each op from C++, asynchronously, so a launch costs the step nothing while the
  device is busy (assumed ~1 us x/ 1.5);
- grouped fraction free: routed experts' grouped GEMMs stream weights at their own efficiency;
- collectives free: allreduce_latency_us fitted (x/ 10 about 20 us) instead of held for device-launched LCCL.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fit_profiles  # noqa: E402  (this directory's scripts)
import phase_table  # noqa: E402

from planner.fit import solver  # noqa: E402
from planner.perf import fitted as perf_fitted  # noqa: E402
from planner.perf import fitted_params as fp  # noqa: E402

BASE_PARAMS = fp.FIT_PARAMS
BASE_PRIOR = fp.prior
BASE_HOLD = solver.registry.device_launched_collectives
GROUPED = fp.FitParam("grouped_weight_read_bandwidth_fraction", 0.05, 1.0, 0.5, "grouped GEMM efficiency")
# name -> {term: (prior centre or None to keep, one-sigma factor)}, "+grouped", "collectives free"
VARIANTS: dict[str, dict[str, tuple[float | None, float]]] = {
    "shipped priors": {},
    "step 10 ms x/3": {"step_overhead_us": (10_000.0, 3.0)},
    "step 20 ms x/2": {"step_overhead_us": (20_000.0, 2.0)},
    "step 30 ms x/2": {"step_overhead_us": (30_000.0, 2.0)},
    "kernels held 1 us": {"kernel_overhead_us": (1.0, 1.5), "matmul_latency_us": (1.0, 1.5)},
    "kernels held 1 us, step 20 ms x/2": {
        "kernel_overhead_us": (1.0, 1.5),
        "matmul_latency_us": (1.0, 1.5),
        "step_overhead_us": (20_000.0, 2.0),
    },
    "+grouped": {},
    "+grouped, collectives free": {},
}  # fmt: skip


def configure(name: str) -> None:
    """Patch the fit's priors (and its parameter list) for one variant."""
    params = BASE_PARAMS + ((GROUPED,) if name.startswith("+grouped") else ())
    for module in (fp, perf_fitted):
        module.FIT_PARAMS = params
    fp.PARAM_NAMES = tuple(p.name for p in params)
    fp.LOWER = np.log([p.lower for p in params])
    fp.UPPER = np.log([p.upper for p in params])
    overrides = VARIANTS[name]

    def prior(*args, **kwargs):  # type: ignore[no-untyped-def]
        centre, sigma = (a.copy() for a in BASE_PRIOR(*args, **kwargs))
        for term, (value, factor) in overrides.items():
            index = fp.PARAM_NAMES.index(term)
            centre[index] = centre[index] if value is None else math.log(value)
            sigma[index] = math.log(factor)
        return centre, sigma

    solver.fitted_params.prior = prior if overrides else BASE_PRIOR
    free = name.endswith("collectives free")
    solver.registry.device_launched_collectives = (lambda engines: False) if free else BASE_HOLD


def medians(errors: list, quantity: str) -> str:
    values = [abs(e[quantity]) for e in errors if e is not None and e[quantity] is not None]
    return f"{statistics.median(values):.1%}" if values else "-"


def report(name: str, group: fit_profiles.Group, card: str) -> None:
    configure(name)
    points = [p for _, _, p in group]
    result = fit_profiles.fitted(points, card)
    inside = phase_table.row_errors(points, card, result.coefficients)
    held = phase_table.lomo_errors(group, card)
    cells = lambda errs: " / ".join(medians(errs, q) for q in phase_table.QUANTITIES)  # noqa: E731
    step = result.coefficients.step_overhead_us / 1000.0
    print(f"\n{name}: in sample {cells(inside)} (step {step:.1f} ms); LOMO {cells(held)}")
    for model in sorted({p.model for p in points}):
        fold = fit_profiles.fitted([p for p in points if p.model != model], card)
        errs = [e for e, p in zip(held, points, strict=True) if p.model == model]
        fold_step = "refused" if fold is None else f"{fold.coefficients.step_overhead_us / 1000.0:.1f} ms"
        print(f"  held out {model}: {cells(errs)} (fold's step {fold_step})")


def rest_at_rate_one(group: fit_profiles.Group, card: str) -> None:
    """Each rate-1 open-loop row's ITL less its decode step's bytes at datasheet bandwidth (weights and KV at
    fraction 1, no per-step, per-sequence or per-launch cost, the card's 20 us per collective), at the
    running batch the row's own arrival rate x mean E2E latency gives and the mean context.

    Formula: rest = ITL - decode_step_s(batch = rate * E2E, ctx = input + output / 2) under those terms.
    The rest holds what the step pays beyond bytes, plus the decode steps others' prefills stall (~10 %).
    """
    from planner import catalog
    from planner.fit import serving_rows
    from planner.perf import roofline

    hardware = catalog.load_card(card)
    free = {"step_overhead_us": 0.0, "kernel_overhead_us": 0.0, "matmul_latency_us": 0.0}
    coefficients = hardware.default_coefficients.model_copy(
        update=free | {"sequence_overhead_us": 0.0, "weight_read_bandwidth_fraction": 1.0,
                       "kv_read_bandwidth_fraction": 1.0}
    )  # fmt: skip
    for row, bench, point in group:
        if point.request_rate_per_s != 1.0 or point.tpot_s is None:
            continue
        cells = row["notes"].split("row '| ", 1)[1].split("|")
        e2e_s = float(cells[13].replace(",", "")) / 1000.0  # the 'E2E mean ms' column
        prepared = serving_rows.prepare([point], hardware=hardware, calibrated=False)[0]
        dep = serving_rows.with_coefficients(prepared.deployment, coefficients)
        batch = max(1, round(e2e_s * point.request_rate_per_s))
        context = point.input_tokens + point.output_tokens // 2
        step = roofline.decode_ledger(dep, batch=batch, ctx_tokens=context)
        print(
            f"line {bench['corpus_row']} {point.model} tp {point.tp}, {point.input_tokens} in, "
            f"batch ~{batch}: "
            f"ITL {point.tpot_s * 1e3:.1f} ms, bytes {step.time_s * 1e3:.1f} ms, "
            f"rest {(point.tpot_s - step.time_s) * 1e3:.1f} ms"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="ascend-910b3.mindie", metavar="CARD.ENGINE")
    parser.add_argument("--variant", choices=list(VARIANTS), help="one variant only")
    parser.add_argument("--rest", action="store_true", help="only each rate-1 row's ITL beyond its bytes")
    args = parser.parse_args(argv)
    card, engine = args.only.split(".")
    group = fit_profiles.corpus_groups()[(card, engine)]
    if args.rest:
        rest_at_rate_one(group, card)
        return 0
    print("median |error| TTFT / TPOT / output tok/s")
    for name in [args.variant] if args.variant else VARIANTS:
        report(name, group, card)
    return 0


if __name__ == "__main__":
    sys.exit(main())
