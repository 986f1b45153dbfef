"""The load knee: the concurrency past which a closed loop's tail latency grows faster than its throughput.

The seed article raised concurrency 1 -> 128 and chose "batch 64 as the production threshold" by watching
tails. Here K users send I-token prompts for O tokens each (closed loop, "waves": the benchmark starts them
together at fixed lengths; planner/perf/closed_loop.py), evaluated at every K = 1..K_max at once (one decode
grid, one prefill-pass grid: a few milliseconds, so the main command can afford it):
    cycle T(K) = prefill passes of K prompts + (O - 1) / a decode steps at batch K
    throughput X(K) = K O / T(K);  every request of a wave ends together, so P99 end-to-end = T(K)
    power(K) = X(K) / T(K)  (Kleinrock: past its maximum latency grows faster than throughput)
The knee is the K of largest power: the definition `kvplan simulate --search knee` applies to full
simulations (tests/test_load_knee.py checks the two agree). P99 TTFT = the wave's last prefill pass end,
P99 TPOT = the window of the first pass's requests, (T - first pass) / (O - 1).
K_max: the sequences of I + O tokens memory holds (capped at MAX_KNEE_USERS).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from planner import capacity
from planner.deployment import Deployment
from planner.perf import opcost, prefill, roofline
from planner.perf.opcost import FloatArray, Step
from planner.perf.serving import tokens_per_step
from planner.results import LoadKnee

SEED_BENCH_TOKENS = (256, 128)  # the seed article's benchmark: 256-token prompts, max_tokens 128
MAX_KNEE_USERS = 1024  # users searched at most (a larger closed loop is not one instance's load)


def prefill_pass_s_grid(dep: Deployment, *, prompts: FloatArray, prompt_tokens: int) -> FloatArray:
    """Seconds of one prefill pass of n prompts of I tokens, for an array of n (closed_loop's pass, n >= 2).

    Formula (roofline.assemble_ledger per element): sum of term_time_s over the measured prefill terms +
    step_overhead + n * sequence_overhead + max(host floor - (step_overhead + terms), 0).
    """
    tokens = prompts * float(prompt_tokens)
    step = Step(
        tokens=tokens,
        sequences=prompts,
        cached_tokens=np.zeros_like(prompts),
        attended_tokens=np.full_like(prompts, (prompt_tokens + 1.0) / 2.0),
        logits_tokens=prompts,
        draft_runs=1 if dep.include_mtp else 0,
        draft_tokens=tokens,
        draft_logits=prompts,
    )
    rate, geo = roofline.rates(dep), opcost.geometry(dep)
    terms = prefill.measured_prefill_terms(dep, geo, opcost.step_terms(geo, step), tokens=tokens)
    device = rate.step_overhead_s + sum(roofline.term_time_s(t, rate=rate, tokens=tokens) for t in terms)
    floor = prefill.host_floor_s(dep, geo, tokens=tokens)
    wait = np.zeros_like(tokens) if floor is None else np.maximum(floor - device, 0.0)
    return np.asarray(device + prompts * rate.sequence_overhead_s + wait, dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class Wave:
    """Per-K arrays of one closed-loop wave: prefill seconds, first pass end, decode seconds."""

    users: FloatArray
    prefill_s: FloatArray
    first_pass_s: FloatArray
    decode_s: FloatArray
    single_step_s: float


def waves(dep: Deployment, *, tokens: tuple[int, int], max_users: int) -> Wave:
    """The wave of K = 1..max_users users (closed_loop.wave_prefill_s and cycle, vectorised over K).

    Formula: n = clamp(P // I, 1, K) prompts per pass, m = ceil(K / n) passes, r = K - (m - 1) n in the
    last; prefill = (m - 1) F(n) + F(r); decode = (O - 1) / a * t(K, I + O // 2).
    """
    prompt, output = tokens
    users = np.arange(1, max_users + 1, dtype=np.float64)
    per_pass_max = max(1, min(max_users, dep.max_prefill_tokens // prompt))
    sizes = np.arange(1, per_pass_max + 1, dtype=np.float64)
    batched = prefill_pass_s_grid(dep, prompts=sizes[1:], prompt_tokens=prompt)
    pass_s = np.concatenate([[roofline.ttft_s(dep, prompt_tokens=prompt)], batched])
    per_pass = np.minimum(users, per_pass_max)
    passes = np.ceil(users / per_pass)
    last = (users - (passes - 1) * per_pass).astype(np.int64)
    full_s = pass_s[per_pass.astype(np.int64) - 1]
    step_s = roofline.decode_step_s_grid(dep, batch=users, ctx_tokens=prompt + output // 2)
    return Wave(
        users=users,
        prefill_s=(passes - 1) * full_s + pass_s[last - 1],
        first_pass_s=np.where(passes > 1, full_s, pass_s[last - 1]),
        decode_s=(output - 1) / tokens_per_step(dep) * step_s,
        single_step_s=float(step_s[0]),
    )


def users_memory_holds(dep: Deployment, *, sequence_tokens: int) -> int:
    """Sequences of `sequence_tokens` tokens the deployment's memory holds (the plan's own limit), capped."""
    sized = dep.model_copy(update={"ctx_tokens": sequence_tokens, "batch": None})
    _, rec = capacity.memory_plan(sized)
    return max(1, min(rec.max_batch_size, MAX_KNEE_USERS))


def load_knee(dep: Deployment, *, tokens: tuple[int, int] = SEED_BENCH_TOKENS) -> LoadKnee:
    """The knee (module docstring) of K users sending tokens = (I, O) requests to one instance of `dep`."""
    prompt, output = tokens
    max_users = users_memory_holds(dep, sequence_tokens=prompt + output)
    wave = waves(dep, tokens=tokens, max_users=max_users)
    cycle_s = wave.prefill_s + wave.decode_s
    power = wave.users * output / cycle_s**2
    k = int(np.argmax(power))
    per_step = tokens_per_step(dep)
    window_s = cycle_s[k] - wave.first_pass_s[k]
    return LoadKnee(
        users=k + 1,
        input_tokens=prompt,
        output_tokens=output,
        max_users=max_users,
        output_tokens_per_s=float(wave.users[k] * output / cycle_s[k]),
        ttft_p99_s=float(wave.prefill_s[k]),
        tpot_p99_s=float(window_s / (output - 1)) if output > 1 else wave.single_step_s / per_step,
        e2e_p99_s=float(cycle_s[k]),
        single_user_tpot_s=wave.single_step_s / per_step,
        calibrated=roofline.is_calibrated(dep),
    )
