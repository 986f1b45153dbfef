"""Physical bounds on what `kvplan calibrate` measured: a coefficient outside what a working microbenchmark
of the card can give is named with its benchmark, and the profile keeps the datasheet default for it (or
nothing is written when no measured coefficient passed). calibration/calibrate.py applies it before it
writes a profile.
"""

from __future__ import annotations

from planner.errors import KvplanError
from planner.schema import PerfCoefficients

# A working microbenchmark reaches at least this share of the datasheet figure it is divided by; below it
# the run measured something else (a throttled, shared or misconfigured device, a budget too short to warm
# up). [assumed: the lowest fractions measured on the H200 and published for Ascend are 0.3-0.9]
MIN_PLAUSIBLE_FRACTION = 0.05
# A fixed per-kernel or per-step cost beyond 10 ms is a stalled measurement, not a launch cost. [assumed:
# measured launch costs are 5-60 us, decode step host costs < 2 ms]
MAX_PLAUSIBLE_OVERHEAD_US = 10_000.0
# coefficient -> the microbenchmark that measures it (what the user re-runs or investigates)
MEASURED_BY = {
    "weight_read_bandwidth_fraction": "gemv (weight streaming)",
    "kv_read_bandwidth_fraction": "decode attention",
    "grouped_weight_read_bandwidth_fraction": "grouped expert GEMM",
    "allreduce_bandwidth_fraction": "all-reduce",
    "kernel_overhead_us": "small kernels",
    "matmul_latency_us": "gemv (latency fit)",
    "step_overhead_us": "decode step",
    "allreduce_latency_us": "all-reduce",
    "grouped_matmul_latency_us": "grouped expert GEMM",
}


def implausible(coefficients: PerfCoefficients) -> dict[str, str]:
    """Coefficients outside what a working benchmark of the card can give -> why, naming the benchmark."""
    found: dict[str, str] = {}
    values = coefficients.model_dump()
    for name, bench in MEASURED_BY.items():
        value = values.get(name)
        if value is None:
            continue
        if name.endswith("_fraction") and value < MIN_PLAUSIBLE_FRACTION:
            found[name] = (
                f"{bench}: {value:.3g} of the datasheet figure (expected >= {MIN_PLAUSIBLE_FRACTION})"
            )
        elif name.endswith("_us") and value > MAX_PLAUSIBLE_OVERHEAD_US:
            found[name] = f"{bench}: {value:.3g} us (expected <= {MAX_PLAUSIBLE_OVERHEAD_US:g} us)"
    for dtype, value in coefficients.compute_fraction.items():
        if value < MIN_PLAUSIBLE_FRACTION:
            found[f"compute_fraction.{dtype}"] = (
                f"gemm {dtype}: {value:.3g} of the datasheet peak (expected >= {MIN_PLAUSIBLE_FRACTION})"
            )
    return found


def screened(coefficients: PerfCoefficients, base: PerfCoefficients, notes: list[str]) -> PerfCoefficients:
    """`coefficients` with every implausible value replaced by the card's default (base), each failure in
    `notes`; KvplanError (one line, nothing written) when no measured coefficient passed."""
    failed = implausible(coefficients)
    if not failed:
        return coefficients
    measured = [name for name in MEASURED_BY if getattr(coefficients, name) != getattr(base, name)] + [
        f"compute_fraction.{dtype}"
        for dtype, value in coefficients.compute_fraction.items()
        if base.compute_fraction.get(dtype) != value
    ]
    if set(measured) <= set(failed):  # nothing measured passed: write nothing rather than the defaults
        raise KvplanError(
            "calibrate: every measured coefficient is outside physical bounds, no profile written: "
            + "; ".join(failed.values())
        )
    updates: dict[str, object] = {
        name: getattr(base, name) for name in failed if not name.startswith("compute_fraction.")
    }
    compute = {
        dtype: base.compute_fraction.get(dtype, value)
        if f"compute_fraction.{dtype}" in failed else value
        for dtype, value in coefficients.compute_fraction.items()
    }  # fmt: skip
    notes.extend(f"not written, datasheet default kept: {why}" for why in failed.values())
    return coefficients.model_copy(update={**updates, "compute_fraction": compute})
