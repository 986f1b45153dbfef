"""Closed sets of names shared by several layers, as Literal types so a typo is a type error.

Engines: the serving stacks whose kernel structure the speed model knows (planner/perf/kernels.py holds the
per-engine tables) and whose configs planner/engines/ writes. Engine-neutral: no engine module owns it.
"""

from __future__ import annotations

from typing import Literal, get_args

from planner.errors import PlanInputError

EngineName = Literal["mindie", "vllm", "transformers"]
ENGINES: tuple[EngineName, ...] = get_args(EngineName)
DEFAULT_ENGINE: EngineName = "mindie"
SchedulerKind = Literal["mindie", "vllm"]  # the simulator's scheduler policies (planner/sim/schedulers.py)

# How a closed-loop benchmark's requests fall into the decode stream (planner/serving/closed_loop.py).
Arrivals = Literal["waves", "staggered", "random"]
ARRIVALS: tuple[Arrivals, ...] = get_args(Arrivals)


def parse_engine(text: str, *, flag: str = "--engine") -> EngineName:
    """Canonical engine name, or PlanInputError naming the flag and the accepted engines."""
    name = text.strip().lower()
    for engine in ENGINES:
        if engine == name:
            return engine
    raise PlanInputError(f"{flag}: unknown engine (got {text!r}, expected one of {', '.join(ENGINES)})")
