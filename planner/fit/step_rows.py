"""Decode-step bench rows for the fit (planner/fit/solver.py): points that share a deployment grouped into one
vectorised roofline call, and their predicted step times at given coefficients.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.arrays import FloatArray
from planner.deployment import Deployment
from planner.importers.benchdeployment import deployment_for
from planner.importers.benchpoints import BenchPoint
from planner.perf import roofline
from planner.schema import HardwareProfile, PerfCoefficients


def with_coefficients(hardware: HardwareProfile, coefficients: PerfCoefficients) -> HardwareProfile:
    """The profile with these coefficients as its only (uncalibrated) set."""
    return hardware.model_copy(update={"default_coefficients": coefficients, "measured": None})


@dataclass(frozen=True)
class StepGroup:
    """Points that share one deployment except batch and ctx: one vectorised roofline call."""

    deployment: Deployment
    index: npt.NDArray[np.int64]
    batch: FloatArray
    ctx_tokens: FloatArray


def step_groups(points: Sequence[BenchPoint], hardware: HardwareProfile | None) -> list[StepGroup]:
    """The points grouped by deployment (model, card, dtypes, tp, engine); `hardware` overrides each card."""
    keyed: dict[tuple[str, str, str, str, int, str], list[int]] = {}
    for i, p in enumerate(points):
        keyed.setdefault((p.model, p.card, p.dtype, p.kv_dtype, p.tp, p.engine), []).append(i)
    groups = []
    for members in keyed.values():
        dep = deployment_for(points[members[0]], hardware=hardware, calibrated=False)
        groups.append(
            StepGroup(
                dep,
                np.asarray(members),
                np.asarray([points[i].batch for i in members], float),
                np.asarray([points[i].ctx_tokens for i in members], float),
            )
        )
    return groups


def predicted_step_s(groups: list[StepGroup], coefficients: PerfCoefficients, *, count: int) -> FloatArray:
    """Roofline decode-step seconds of every point under these coefficients."""
    out = np.empty(count)
    for g in groups:
        hw = with_coefficients(g.deployment.hardware, coefficients)
        dep = g.deployment.model_copy(update={"hardware": hw, "calibrated": False})
        out[g.index] = roofline.decode_step_s_grid(dep, batch=g.batch, ctx_tokens=g.ctx_tokens)
    return out


def at_coefficients(dep: Deployment, coefficients: PerfCoefficients) -> Deployment:
    """The deployment with these coefficients as its card's only (uncalibrated) set."""
    hw = with_coefficients(dep.hardware, coefficients)
    return dep.model_copy(update={"hardware": hw, "calibrated": False})
