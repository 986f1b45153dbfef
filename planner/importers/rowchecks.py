"""Serving bench rows whose own figures disagree: a row's mean TPOT against its throughput and concurrency.

A closed loop of C clients keeps at most C requests in flight; a request of `out` output tokens holds its
client at least (out - 1) x its TPOT (every token after the first), so over the run

    output tok/s <= C x out / ((out - 1) x tpot_s),   i.e.   tpot_s <= C x out / ((out - 1) x output tok/s)

(dp replicas share C and add their tok/s: the bound holds for the row's totals; an open-loop row's C is its
mean requests in flight, Little's law, which the bound also caps; a CI floor understates the tok/s, which only
loosens it). The bound is one-sided: TTFT, queueing and ramp make a run slower than it, never faster.
TPOT_SLACK is how far a real row goes past it: the mean TPOT is a mean over requests, which under-weights
the long requests that decode in emptier batches (published rows reach 2.4x: GPUStack's MindIE runs of 1000
ShareGPT prompts, lab/published/ascend-serving.csv lines 198-201, 208; every other row <= 1.02x). A tpot_s
past 5x is another unit or quantity: milliseconds typed into the seconds column are 1000x.
"""

from __future__ import annotations

from planner.importers.benchpoints import ServingPoint

TPOT_SLACK = 5.0  # [assumed: 2x above the 2.4x the published corpus reaches, 200x below a ms/s slip]


def tpot_ceiling_s(point: ServingPoint) -> float | None:
    """The longest mean TPOT the row's throughput and concurrency allow (module docstring; s), None for
    one-token outputs (no TPOT).

    Formula: tpot_max_s = concurrency x out / ((out - 1) x output_tokens_per_s)
    """
    if point.output_tokens < 2:
        return None
    return point.concurrency * point.output_tokens / ((point.output_tokens - 1) * point.output_tokens_per_s)


def tpot_warning(point: ServingPoint) -> str | None:
    """One line naming the row when its tpot_s exceeds TPOT_SLACK x tpot_ceiling_s; None when it does not
    (or states no TPOT)."""
    ceiling = tpot_ceiling_s(point)
    if point.tpot_s is None or ceiling is None or point.tpot_s <= TPOT_SLACK * ceiling:
        return None
    return (
        f"{point.where}: tpot_s {point.tpot_s:g} s contradicts the row's own throughput "
        f"({point.output_tokens_per_s:g} tok/s from {point.concurrency} client(s) of {point.output_tokens} "
        f"tokens allow at most {ceiling:.3g} s; {point.tpot_s / ceiling:.0f}x that, past the {TPOT_SLACK:g}x "
        "a real run reaches): tpot_s is in seconds (milliseconds typed?)"
    )
