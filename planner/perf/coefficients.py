"""What a deployment reads straight off its card's coefficients, with no step model: whether they are
measured, and the per-request cost outside the forward pass. Split from planner/perf/roofline.py (which
re-exports both) so the closed loop's timers (planner/serving/estimate.py) read them without the roofline.
"""

from __future__ import annotations

from planner.deployment import Deployment
from planner.units import us_to_s


def is_calibrated(dep: Deployment) -> bool:
    """True when the step times use measured coefficients."""
    return dep.calibrated and dep.hardware.is_calibrated


def request_overhead_s(dep: Deployment) -> float:
    """Seconds one request costs outside the forward pass (API server, tokenization, scheduling, a captured
    graph's first step): PerfCoefficients.request_overhead_us of the deployment's coefficients. It adds to
    the client's TTFT (closed_loop.py, planner/sim) and never to a pass, so it stalls no running decode."""
    return us_to_s(dep.hardware.coefficients(calibrated=dep.calibrated).request_overhead_us)
