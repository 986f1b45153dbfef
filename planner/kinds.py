"""Closed sets of names shared by several layers, as Literal types so a typo is a type error.

Engines: the serving stacks whose kernel structure the speed model knows (planner/perf/kernels.py holds the
per-engine tables) and whose configs planner/engines/ writes. Engine-neutral: no engine module owns it.
"""

from __future__ import annotations

from typing import Literal, get_args

from planner.errors import PlanInputError

EngineName = Literal["mindie", "vllm", "transformers", "sglang"]
ENGINES: tuple[EngineName, ...] = get_args(EngineName)
DEFAULT_ENGINE: EngineName = "mindie"
# the simulator's scheduler policies (planner/sim/schedulers.py)
SchedulerKind = Literal["mindie", "vllm", "sglang"]

# How a closed-loop benchmark's requests fall into the decode stream (planner/serving/closed_loop.py).
Arrivals = Literal["waves", "staggered", "random"]
ARRIVALS: tuple[Arrivals, ...] = get_args(Arrivals)

# The one default workload (issue 23): every TTFT, SLO search and load figure a command prints without the
# user's own lengths is for requests of DEFAULT_INPUT_TOKENS prompt / DEFAULT_OUTPUT_TOKENS output tokens, the
# seed article's benchmark (256-token prompts, max_tokens 128; the only serving runs the 950PR fit has), which
# every config kvplan writes admits from --ctx 384 up (MindIE maxInputTokenLen = ctx - ctx/4 >= 256 from
# ctx 342).
# The plan (its TTFT and SLO search), the load knee, `kvplan serve` and `kvplan simulate` all default to it.
DEFAULT_INPUT_TOKENS = 256
DEFAULT_OUTPUT_TOKENS = 128
# Every command's smallest --ctx: a request holds at least 1 input and 1 output token (MindIE maxInputTokenLen
# >= 1 and maxIterTimes >= 1; inputs.parse_context refuses less).
MIN_CTX_TOKENS = 2
# Closed-loop arrivals of serve, simulate and the plan's SLO search: all users start together with fixed
# lengths ("waves", as `vllm bench serve --ignore-eos`); the load knee is the drifting loop ("random") whose
# analytic form it evaluates at every load at once (planner/serving/knee.py says why).
DEFAULT_ARRIVALS: Arrivals = "waves"


def default_request_tokens(ctx_tokens: int) -> tuple[int, int]:
    """(prompt, output) of the default workload that fits a context of ctx_tokens.

    Formula: I = min(DEFAULT_INPUT_TOKENS, ctx - max(1, min(DEFAULT_OUTPUT_TOKENS, ctx // 4))), at least 1;
    O = min(DEFAULT_OUTPUT_TOKENS, ctx - I), at least 1; so I + O <= ctx for every ctx >= MIN_CTX_TOKENS
    (ctx 2: one token each way, as short as it goes).
    """
    reserved = max(1, min(DEFAULT_OUTPUT_TOKENS, ctx_tokens // 4))
    prompt = max(1, min(DEFAULT_INPUT_TOKENS, ctx_tokens - reserved))
    return prompt, max(1, min(DEFAULT_OUTPUT_TOKENS, ctx_tokens - prompt))


def parse_engine(text: str, *, flag: str = "--engine") -> EngineName:
    """Canonical engine name, or PlanInputError naming the flag and the accepted engines."""
    name = text.strip().lower()
    for engine in ENGINES:
        if engine == name:
            return engine
    raise PlanInputError(f"{flag}: unknown engine (got {text!r}, expected one of {', '.join(ENGINES)})")
