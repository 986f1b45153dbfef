"""What a load tool sending requests at a fixed rate sees (open loop): TTFT, TPOT and throughput.

    est = open_loop_estimate_with(timer, workload=(I, O), rate_per_s=lam, max_batch=B, calibrated=False)

Used for published runs at a constant or Poisson request rate (guidellm --rate-type constant, vllm bench serve
--request-rate): requests arrive at `lam` per second whatever the engine does, so the number decoding together
is not the client's cap but what the rate and the latency make of it (Little's law). The engine is timed by
the
same Timer as the closed loop (planner/serving/closed_loop.py: the roofline, or the fit's cached features).

The model, at steady state (the engine keeps up: lam * prefill per prompt < 1 and the decode batch fits):
    t(b)  decode step at the mean decode batch b (interpolated between whole batches), ctx I + O / 2;
    n     prompts per prefill pass: those arriving during one step share it
    (closed_loop.prompts_per_merged_pass
          at lam * t arrivals per step, capped by the pass budget);  P(n) that pass;  p = P(n) / n per prompt;
    u     = lam * p, the share of engine time spent prefilling (decodes pause for it);
    TPOT  = t(b) / a / (1 - u)   (a tokens per step with MTP);
    b     = lam * (O - 1) * TPOT (requests decoding: Little's law), solved by the secant method;
    TTFT  = r + P(n) + min(b, 1) * t(b) / 2   (r: the per-request cost outside the forward pass; the new
          prompt waits for the step in flight when a batch is decoding);
    output tok/s = lam * O.
A rate the engine cannot keep up with (u >= 1, or b reaching max_batch) has no steady state: the estimate is
then the closed loop's at max_batch clients ("random" arrivals), and `saturated` says so.
"""

from __future__ import annotations

import bisect
import math

from planner.serving.estimate import BenchRun, ServingEstimate, Timer, estimate_with, merged_prefill_s

ITERATIONS = 40  # secant iterations for the decode batch at most (TOLERANCE usually ends it in < 6)
DAMPING = 0.5  # where the secant slope is not negative: b moves (1 - DAMPING) of the way to Little's law
TOLERANCE = 1e-4  # stop when Little's law and b differ by less than this share of (1 + b)


# Batches the decode step is timed at; between them it is linear. A fixed grid keeps the fit's cached passes
# (planner.fit.features.FeatureTimer) few while the solved batch moves.  [assumed: the step is smooth in
# batch;
# between grid points 1.5x apart the chord's error is below 1 % on the Ascend cards' roofline]
BATCH_GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048)


def step_at(timer: Timer, *, batch: float, ctx_tokens: int) -> float:
    """Decode step at a fractional batch: linear between the BATCH_GRID batches around it (at least 1).

    Formula: t(b) = t(k) + (b - k) / (k' - k) (t(k') - t(k)),  k <= max(b, 1) < k' neighbours on the grid.
    """
    b = min(max(batch, 1.0), float(BATCH_GRID[-1]))
    at = bisect.bisect_left(BATCH_GRID, b)
    upper = BATCH_GRID[at]
    low = timer.decode_step_s(batch=upper if upper == b else BATCH_GRID[at - 1], ctx_tokens=ctx_tokens)
    if upper == b:
        return low
    low_k = BATCH_GRID[at - 1]
    high = timer.decode_step_s(batch=upper, ctx_tokens=ctx_tokens)
    return low + (b - low_k) / (upper - low_k) * (high - low)


def prefill_per_prompt(timer: Timer, *, prompt_tokens: int, arrivals_per_step: float) -> tuple[float, float]:
    """(engine seconds of prefill per prompt, one pass) when prompts arriving in one step share a pass.

    Formula: n = prompts_per_merged_pass(lam t) capped at the pass budget; P(n) interpolated between whole
    prompt counts (closed_loop.merged_prefill_s, asked for N prompts over N / (lam t) steps); p = P(n) / n.
    """
    many = 1000
    steps = many / max(arrivals_per_step, 1e-9)
    total_s, pass_s = merged_prefill_s(timer, prompt_tokens=prompt_tokens, batch=many, steps=steps)
    return total_s / many, pass_s


def loaded_step(
    timer: Timer, *, workload: tuple[int, int], rate_per_s: float, batch: float
) -> tuple[float, float, float]:
    """(decode step s, prefill engine s per prompt, one prefill pass s) while `batch` sequences of (I, O)
    tokens decode and `rate_per_s` prompts arrive: the step at the mean context I + O / 2, the prompts that
    arrive during one step sharing a pass (prefill_per_prompt)."""
    input_tokens, output_tokens = workload
    step_s = step_at(timer, batch=batch, ctx_tokens=input_tokens + output_tokens // 2)
    per_prompt_s, pass_s = prefill_per_prompt(
        timer, prompt_tokens=input_tokens, arrivals_per_step=rate_per_s * step_s
    )
    return step_s, per_prompt_s, pass_s


def little_batch(timer: Timer, *, workload: tuple[int, int], rate_per_s: float, batch: float) -> float | None:
    """The decode batch Little's law gives when `batch` sequences decode: lam (O - 1) TPOT(batch); None when
    the prefills alone fill the engine (u >= 1). Formulas in the module docstring."""
    step_s, per_prompt_s, _ = loaded_step(timer, workload=workload, rate_per_s=rate_per_s, batch=batch)
    busy = rate_per_s * per_prompt_s
    if busy >= 1.0:
        return None
    return rate_per_s * max(workload[1] - 1, 0) * step_s / timer.tokens_per_step / (1.0 - busy)


def solve_batch(
    timer: Timer, *, workload: tuple[int, int], rate_per_s: float, max_batch: int
) -> float | None:
    """The steady decode batch b = little_batch(b) by the secant method from b = 0 (None: no steady state,
    the prefills fill the engine or b reaches max_batch).

    Formula: h(b) = little(b) - b; b1 = little(0); b_{k+1} = b_k - h_k (b_k - b_{k-1}) / (h_k - h_{k-1}),
    kept in [0, max_batch]; stops when |h| < TOLERANCE (1 + b).
    """

    def h(b: float) -> float | None:
        value = little_batch(timer, workload=workload, rate_per_s=rate_per_s, batch=b)
        return None if value is None else value - b

    prev_b, prev_h = 0.0, h(0.0)
    if prev_h is None:
        return None
    b = prev_b + prev_h
    for _ in range(ITERATIONS):
        if b >= max_batch:
            return None
        now = h(b)
        if now is None:
            return None
        if abs(now) < TOLERANCE * (1.0 + b):
            return b
        slope = (now - prev_h) / (b - prev_b) if b != prev_b else -1.0
        step = -now / slope if slope < -1e-12 else now * (1.0 - DAMPING)
        prev_b, prev_h, b = b, now, max(0.0, b + step)
    return b


def open_loop_estimate_with(
    timer: Timer, *, workload: tuple[int, int], rate_per_s: float, max_batch: int, calibrated: bool
) -> ServingEstimate:
    """Steady-state TTFT, TPOT and throughput of `rate_per_s` requests/s of (I, O) tokens (module
    docstring)."""
    batch = solve_batch(timer, workload=workload, rate_per_s=rate_per_s, max_batch=max_batch)
    if batch is None:
        run = BenchRun(max_batch=max_batch, arrivals="random")
        return estimate_with(timer, workload=(*workload, max_batch), run=run, calibrated=calibrated)
    return _steady(timer, workload=workload, rate_per_s=rate_per_s, batch=batch, calibrated=calibrated)


def _steady(
    timer: Timer, *, workload: tuple[int, int], rate_per_s: float, batch: float, calibrated: bool
) -> ServingEstimate:
    """The ServingEstimate of a converged decode batch (formulas in the module docstring)."""
    input_tokens, output_tokens = workload
    step_s, per_prompt_s, pass_s = loaded_step(timer, workload=workload, rate_per_s=rate_per_s, batch=batch)
    busy = rate_per_s * per_prompt_s
    tpot_s = step_s / timer.tokens_per_step / (1.0 - busy)
    ttft_s = timer.request_overhead_s + pass_s + min(batch, 1.0) * step_s / 2.0
    latency_s = ttft_s + max(output_tokens - 1, 0) * tpot_s
    return ServingEstimate(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        concurrency=max(1, math.ceil(rate_per_s * latency_s)),
        running_batch=max(1, round(batch)),
        prefill_batch=max(1, round(pass_s / max(per_prompt_s, 1e-12))),
        run=BenchRun(arrivals="random"),
        tokens_per_step=timer.tokens_per_step,
        decode_step_s=step_s,
        prefill_s=timer.prefill_s(prompts=1, prompt_tokens=input_tokens),
        prefill_pass_s=pass_s,
        cycle_s=latency_s,
        ttft_s=ttft_s,
        tpot_s=tpot_s,
        request_latency_s=latency_s,
        requests_per_s=rate_per_s,
        output_tokens_per_s=rate_per_s * output_tokens,
        prefill_time_fraction=busy,
        calibrated=calibrated,
    )
