"""The closed loop's arithmetic over a Timer (planner/serving/closed_loop.py's module docstring has the
model): the benchmark run, one cycle of prefills and decode steps, the estimate a load tool would report.
Split from closed_loop.py (which re-exports these and times them with the roofline) so the open loop and the
fit's cached timer (planner/fit/features.py) use it without the roofline or the memory plan.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
from pydantic import Field, computed_field

from planner.arrays import FloatArray
from planner.deployment import Deployment
from planner.kinds import Arrivals
from planner.perf.coefficients import request_overhead_s
from planner.perf.mtp import tokens_per_step
from planner.schema import Frozen


class BenchRun(Frozen):
    """How the benchmark runs, beyond I, O and K.

    max_batch     the engine's running-sequence limit (vLLM max_num_seqs, MindIE maxBatchSize); None: K
    num_requests  requests in the run (finite: its last partial cycle is counted); None: steady state
    arrivals      "waves" (all start together, fixed lengths), "staggered" or "random" (module docstring)
    """

    max_batch: int | None = Field(default=None, ge=1)
    num_requests: int | None = Field(default=None, ge=1)
    arrivals: Arrivals = "waves"


STEADY_WAVES = BenchRun()


class ServingEstimate(Frozen):
    """What a closed-loop benchmark at `concurrency` clients sees (see the module docstring).

    running_batch    sequences decoded together: min(concurrency, max_batch); the rest queue
    prefill_batch    prompts per prefill pass (max_prefill_tokens // uncached input tokens, 1..running_batch)
    decode_step_s    one step at running_batch, ctx = input + output / 2 (the mean context)
    prefill_s        one prompt alone on an idle engine;  prefill_pass_s  one pass of prefill_batch prompts
    cycle_s          prefills + decode steps in which every running request completes once
    ttft_s, tpot_s   means over requests (tpot = (latency - ttft) / (output - 1)), queueing included;
                     tpot_s None for one-token outputs (no token after the first: TPOT is undefined)
    request_latency_s  send to last token (Little's law: concurrency / requests_per_s)
    per_user_tokens_per_s  1 / tpot_s (None with tpot_s);  prefill_time_fraction  share of engine time in
                     prefill
    """

    input_tokens: int
    output_tokens: int
    concurrency: int
    running_batch: int
    prefill_batch: int
    run: BenchRun
    tokens_per_step: float
    decode_step_s: float
    prefill_s: float
    prefill_pass_s: float
    cycle_s: float
    ttft_s: float
    tpot_s: float | None
    request_latency_s: float
    requests_per_s: float
    output_tokens_per_s: float
    prefill_time_fraction: float
    calibrated: bool

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; the JSON keeps the key
    @property
    def per_user_tokens_per_s(self) -> float | None:
        """Tokens/s one request sees while decoding: 1 / tpot_s (None with tpot_s)."""
        return None if self.tpot_s is None else 1.0 / self.tpot_s


class Timer(Protocol):
    """Where the closed loop gets its step and pass times: the roofline (RooflineTimer), or the fit's
    cached linearisation of the same roofline (planner/fit/features.py)."""

    @property
    def max_prefill_tokens(self) -> int: ...
    @property
    def max_prompts_per_pass(self) -> int | None: ...
    @property
    def tokens_per_step(self) -> float: ...
    @property
    def request_overhead_s(self) -> float: ...
    def decode_step_s(self, *, batch: int, ctx_tokens: int) -> float: ...
    def prefill_s(self, *, prompts: int, prompt_tokens: int) -> float: ...
    def uncached_prompt_tokens(self, *, prompt_tokens: int) -> int: ...


class DeploymentTimer:
    """What every Timer reads straight off its deployment (the prefill budget, tokens per step); the
    subclasses say how a step or pass is timed (RooflineTimer here, fit_features.FeatureTimer)."""

    dep: Deployment

    @property
    def max_prefill_tokens(self) -> int:
        return self.dep.max_prefill_tokens

    @property
    def tokens_per_step(self) -> float:
        return tokens_per_step(self.dep)

    @property
    def request_overhead_s(self) -> float:
        return request_overhead_s(self.dep)


def pass_prompt_cap(*, max_prefill_tokens: int, computed_tokens: int, max_prompts: int | None) -> int:
    """Formula: min(floor(max_prefill_tokens / computed_tokens), max_prompts): prompts one prefill pass holds,
    by its token budget and the engine's own count cap (registry.max_prompts_per_pass, MindIE's
    maxPrefillBatchSize; None: no such cap); 0 when one prompt alone exceeds the budget and is chunked."""
    by_tokens = max_prefill_tokens // computed_tokens
    return by_tokens if max_prompts is None else min(by_tokens, max_prompts)


def pass_budget_prompts(timer: Timer, *, prompt_tokens: int) -> int:
    """pass_prompt_cap for the timer's deployment; computed tokens I - h (h: the prompt's prefix-cached
    tokens, timer.uncached_prompt_tokens; the budget counts computed ones)."""
    computed = timer.uncached_prompt_tokens(prompt_tokens=prompt_tokens)
    return pass_prompt_cap(
        max_prefill_tokens=timer.max_prefill_tokens,
        computed_tokens=computed,
        max_prompts=timer.max_prompts_per_pass,
    )


def prompts_per_prefill_pass(timer: Timer, *, prompt_tokens: int, running_batch: int) -> int:
    """Formula: n = clamp(pass_budget_prompts, 1, b): waiting prompts one prefill pass takes."""
    return max(1, min(running_batch, pass_budget_prompts(timer, prompt_tokens=prompt_tokens)))


def wave_prefill_s(timer: Timer, *, prompt_tokens: int, running_batch: int) -> tuple[float, float, float]:
    """(prefill seconds of a wave, mean first-token time of its requests, one full pass) in "waves" mode.

    Formula: b prompts in m = ceil(b / n) passes, m - 1 of n prompts and one of r = b - (m - 1) n;
    pass j ends at e_j = sum_{i<=j} P_i; mean first token = sum_j size_j * e_j / b.
    """
    per_pass = prompts_per_prefill_pass(timer, prompt_tokens=prompt_tokens, running_batch=running_batch)
    passes = math.ceil(running_batch / per_pass)
    last = running_batch - (passes - 1) * per_pass
    full_s = timer.prefill_s(prompts=per_pass, prompt_tokens=prompt_tokens)
    last_s = full_s if last == per_pass else timer.prefill_s(prompts=last, prompt_tokens=prompt_tokens)
    ends = full_s * np.arange(1, passes)  # the full passes (all but the last)
    total_s = full_s * (passes - 1) + last_s
    mean_first_s = (float(np.sum(per_pass * ends)) + last * total_s) / running_batch
    return total_s, mean_first_s, full_s


def prompts_per_merged_pass_grid(arrivals_per_step: FloatArray) -> FloatArray:
    """Mean prompts in a prefill pass when prompts arrive Poisson at `arrivals_per_step` per decode step and
    all that arrived during one step share the next pass (per element).

    Formula: n = lam / (1 - exp(-lam))  (mean of a Poisson count given at least one; 1 as lam -> 0)
    """
    lam = np.maximum(arrivals_per_step, 0.0)
    small = lam < 1e-9  # the merged count's limit as lam -> 0 is one prompt
    return np.where(small, 1.0, lam / -np.expm1(-np.where(small, 1.0, lam)))


def prompts_per_merged_pass(arrivals_per_step: float) -> float:
    """prompts_per_merged_pass_grid at one arrival rate."""
    return float(prompts_per_merged_pass_grid(np.asarray([arrivals_per_step], dtype=np.float64))[0])


def merged_pass_prompts_grid(batch: FloatArray, *, steps: float, per_pass_max: int) -> FloatArray:
    """Mean prompts in one prefill pass while `batch` running requests each emit their tokens in `steps`
    decode steps (per element): the merged Poisson count, capped by the engine's pass.

    Formula: n = min(prompts_per_merged_pass_grid(b / steps), max(min(b, per_pass_max), 1)); the cap is
    prompts_per_prefill_pass: a pass holds at most max_prefill_tokens // (I - h) prompts (MindIE
    maxPrefillTokens, vLLM max_num_batched_tokens) and no more prompts than there are running requests.
    """
    merged = prompts_per_merged_pass_grid(np.maximum(batch, 0.0) / max(steps, 1e-9))
    cap: FloatArray = np.maximum(np.minimum(batch, per_pass_max), 1.0)
    return np.minimum(merged, cap)


def merged_prefill_s_grid(
    pass_s: FloatArray, *, batch: FloatArray, steps: float, per_pass_max: int, first_prompts: int = 1
) -> tuple[FloatArray, FloatArray]:
    """(prefill seconds per cycle, mean pass seconds) of `batch` running requests whose prompts arrive
    Poisson over `steps` decode steps; pass_s[j]: one pass of first_prompts + j prompts, covering every
    floor(n) and floor(n) + 1 the batches need (the last entry stands in past the end: its weight is 0).

    Formula: n = merged_pass_prompts_grid(b); k = floor(n); F(n) = F(k) + (n - k) (F(k + 1) - F(k)) (a pass's
    time is affine in its prompts between whole counts); prefill = b / n * F(n) (0 where b = 0).
    """
    n = merged_pass_prompts_grid(batch, steps=steps, per_pass_max=per_pass_max)
    at = np.floor(n).astype(np.int64) - first_prompts
    low = pass_s[at]
    high = pass_s[np.minimum(at + 1, pass_s.size - 1)]
    mean_pass_s = low + (n - np.floor(n)) * (high - low)
    return np.where(batch >= 1, batch / n * mean_pass_s, 0.0), mean_pass_s


def merged_pass_prompts(timer: Timer, *, prompt_tokens: int, batch: int, steps: float) -> float:
    """merged_pass_prompts_grid at one batch, the pass budget read from `timer`."""
    per_pass_max = pass_budget_prompts(timer, prompt_tokens=prompt_tokens)
    batches = np.asarray([float(batch)])
    return float(merged_pass_prompts_grid(batches, steps=steps, per_pass_max=per_pass_max)[0])


def merged_prefill_s(timer: Timer, *, prompt_tokens: int, batch: int, steps: float) -> tuple[float, float]:
    """(prefill seconds while `batch` requests each emit their tokens in `steps` decode steps, mean pass):
    merged_prefill_s_grid at one batch, with the two passes it reads (k and k + 1 prompts) timed by `timer`.
    """
    if batch < 1:
        return 0.0, 0.0
    batches = np.asarray([float(batch)])
    per_pass_max = pass_budget_prompts(timer, prompt_tokens=prompt_tokens)
    n = merged_pass_prompts(timer, prompt_tokens=prompt_tokens, batch=batch, steps=steps)
    k = int(n)
    counts = (k, k + 1) if n > k else (k,)
    pass_s = np.asarray([timer.prefill_s(prompts=c, prompt_tokens=prompt_tokens) for c in counts])
    total_s, mean_pass_s = merged_prefill_s_grid(
        pass_s, batch=batches, steps=steps, per_pass_max=per_pass_max, first_prompts=k
    )
    return float(total_s[0]), float(mean_pass_s[0])


class _Cycle(Frozen):
    """One closed-loop cycle at one running batch: prefill and decode seconds, first token, TPOT window."""

    batch: int
    prefill_s: float
    decode_s: float
    first_token_s: float
    window_s: float
    step_s: float
    pass_s: float
    per_pass: int


def cycle(timer: Timer, *, input_tokens: int, output_tokens: int, batch: int, arrivals: Arrivals) -> _Cycle:
    """One cycle in which each of `batch` running requests is prefilled once and emits its O tokens.

    Formula (a tokens per step, t step at batch b and ctx I + O/2, P_1 one prompt's prefill):
        decode = (O - 1) / a * t
        waves:     prefill = the wave's passes (wave_prefill_s); first token e = mean pass end;
                   window = prefill + decode - e
        staggered: prefill = b * P_1; first token e = P_1 + t / 2 (the in-flight step);
                   window = decode + (b - 1) * P_1
        random:    prefill = merged_prefill_s(b), passes of merged_pass_prompts(b) prompts (capped by the
                   pass budget); e = its mean pass + t / 2;
                   window = decode + merged_prefill_s(b - 1)   (b = 1: staggered)
    """
    step_s = timer.decode_step_s(batch=batch, ctx_tokens=input_tokens + output_tokens // 2)
    decode_s = (output_tokens - 1) / timer.tokens_per_step * step_s
    if arrivals == "waves":
        prefill_s, first_s, pass_s = wave_prefill_s(timer, prompt_tokens=input_tokens, running_batch=batch)
        per_pass = prompts_per_prefill_pass(timer, prompt_tokens=input_tokens, running_batch=batch)
        window_s = prefill_s + decode_s - first_s
    elif arrivals == "random" and batch > 1:
        steps = (output_tokens - 1) / timer.tokens_per_step
        prefill_s, pass_s = merged_prefill_s(timer, prompt_tokens=input_tokens, batch=batch, steps=steps)
        others_s, _ = merged_prefill_s(timer, prompt_tokens=input_tokens, batch=batch - 1, steps=steps)
        per_pass = max(
            1, round(merged_pass_prompts(timer, prompt_tokens=input_tokens, batch=batch, steps=steps))
        )
        first_s, window_s = pass_s + step_s / 2, decode_s + others_s
    else:
        pass_s = timer.prefill_s(prompts=1, prompt_tokens=input_tokens)
        prefill_s, per_pass = batch * pass_s, 1
        first_s = pass_s + (step_s / 2 if batch > 1 else 0.0)
        window_s = decode_s + (batch - 1) * pass_s
    return _Cycle(
        batch=batch,
        prefill_s=prefill_s,
        decode_s=decode_s,
        first_token_s=first_s,
        window_s=window_s,
        step_s=step_s,
        pass_s=pass_s,
        per_pass=per_pass,
    )


def run_makespan_s(
    timer: Timer, *, steady: _Cycle, tokens: tuple[int, int], num_requests: int, arrivals: Arrivals
) -> float:
    """Seconds a run of N requests takes: full cycles of b, then one partial cycle of the rest (its tail).

    Formula: makespan = floor(N / b) * T(b) + T(N mod b)   (T(0) = 0); tokens = (I, O).
    """
    full, rest = divmod(num_requests, steady.batch)
    makespan_s = full * (steady.prefill_s + steady.decode_s)
    if rest:
        tail = cycle(timer, input_tokens=tokens[0], output_tokens=tokens[1], batch=rest, arrivals=arrivals)
        makespan_s += tail.prefill_s + tail.decode_s
    return makespan_s


def estimate_with(
    timer: Timer, *, workload: tuple[int, int, int], run: BenchRun, calibrated: bool
) -> ServingEstimate:
    """The closed-loop estimate with step and pass times from `timer`; workload = (I, O, K).

    Formula: b = min(K, max_batch); T = prefill + decode of one cycle (`cycle`); r = the per-request cost
        outside the forward pass (roofline.request_overhead_s: API server, tokenization, scheduling);
        X = min(b / T, K / (T + r)) requests/s (the engine's rate, or each client's when r keeps the engine
        short of clients: r runs beside the engine and never stalls a decode);
        output tok/s = X * O (steady state) or N * O / makespan (finite run of N requests, makespan + r
        when the clients do not saturate the engine);
        latency = K / X (Little's law; K - b requests queue); ttft = latency - T + e
        (e: first token within the cycle; r is inside latency);
        tpot = window / (O - 1) (None when O = 1: undefined); prefill fraction = prefill / T
    """
    input_tokens, output_tokens, concurrency = workload
    batch = min(concurrency, run.max_batch or concurrency)
    tokens = (input_tokens, output_tokens)
    one = cycle(
        timer, input_tokens=input_tokens, output_tokens=output_tokens, batch=batch, arrivals=run.arrivals
    )
    cycle_s = one.prefill_s + one.decode_s
    request_s = timer.request_overhead_s
    requests_per_s = min(batch / cycle_s, concurrency / (cycle_s + request_s))
    latency_s = concurrency / requests_per_s
    output_per_s = requests_per_s * output_tokens
    if run.num_requests is not None:
        makespan_s = run_makespan_s(
            timer, steady=one, tokens=tokens, num_requests=run.num_requests, arrivals=run.arrivals
        )
        client_bound = concurrency / (cycle_s + request_s) < batch / cycle_s
        output_per_s = run.num_requests * output_tokens / (makespan_s + (request_s if client_bound else 0.0))
    per_step = timer.tokens_per_step
    tpot_s = one.window_s / (output_tokens - 1) if output_tokens > 1 else None
    return ServingEstimate(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        concurrency=concurrency,
        running_batch=batch,
        prefill_batch=one.per_pass,
        run=run,
        tokens_per_step=per_step,
        decode_step_s=one.step_s,
        prefill_s=timer.prefill_s(prompts=1, prompt_tokens=input_tokens),
        prefill_pass_s=one.pass_s,
        cycle_s=cycle_s,
        ttft_s=latency_s - cycle_s + one.first_token_s,
        tpot_s=tpot_s,
        request_latency_s=latency_s,
        requests_per_s=requests_per_s,
        output_tokens_per_s=output_per_s,
        prefill_time_fraction=one.prefill_s / cycle_s,
        calibrated=calibrated,
    )
