"""The load knee: the concurrency past which a closed loop's tail latency grows faster than its throughput.

The seed article raised concurrency 1 -> 128 and chose "batch 64 as the production threshold" by watching
tails. Its client: K users, each sending its next I-token prompt when its own request ends, max_tokens O
without ignore_eos, so request ends drift apart and new prompts reach the engine spread over the decode
stream, where the engine batches those that arrived during one decode step into one prefill pass: the
"random" arrivals of planner/serving/closed_loop.py (lab/published/predict.py reads the seed rows so; a
fixed-length "waves" loop, all requests in step, is 1.4-3.2x optimistic against the seed from 8 users up:
ACCURACY.md, "Serving simulation"). Evaluated at every K = 1..K_max at once (one decode grid, one
prefill-pass grid: a few milliseconds, so the main command can afford it), a = tokens per step:
    s = (O - 1) / a decode steps per request;  lam = K / s prompts arriving per step (Poisson)
    prompts per pass n(K) = min(lam / (1 - e^-lam), clamp(P // I, 1, K))
    prefill(K) = K / n(K) * F(n(K))   (F: one pass, linear between whole prompt counts; F(1) = TTFT)
    cycle T(K) = prefill(K) + s * t(K)   (t: a decode step at batch K, ctx I + O / 2)
    throughput X(K) = K O / T(K);  power(K) = X(K) / T(K)  (Kleinrock: past its maximum latency grows
        faster than throughput)
Every request emits O tokens and sees each other user's prefill once per cycle, so in this model all
requests take T(K) (P99 end-to-end = T) and every TPOT window holds the others' prefills: P99 TPOT =
(s t(K) + prefill(K - 1)) / (O - 1). P99 TTFT: a prompt arriving as a step starts waits it out, then its
pass: t(K) + F(n(K)).
The knee is the K of largest power: the definition `kvplan simulate --search knee` applies to full
simulations, where output lengths must vary for requests to drift apart (tests/test_load_knee.py runs them
staggered, uniform O +- O/2, and checks the two peak at the same load).
K_max: the sequences of I + O tokens one DP group's memory holds (capped at MAX_KNEE_USERS).
"""

from __future__ import annotations

import numpy as np

from planner import capacity, kinds
from planner.arrays import FloatArray
from planner.deployment import Deployment
from planner.engines import registry
from planner.perf import mtp, roofline
from planner.perf.mtp import tokens_per_step
from planner.records import record
from planner.results import LoadKnee, MemoryBreakdown
from planner.serving.estimate import merged_prefill_s_grid, pass_prompt_cap

SEED_BENCH_TOKENS = (kinds.DEFAULT_INPUT_TOKENS, kinds.DEFAULT_OUTPUT_TOKENS)  # the one default workload
MAX_KNEE_USERS = 1024  # users searched at most (a larger closed loop is not one instance's load)


@record
class Cycles:
    """Per-K arrays of one closed-loop cycle (random arrivals): prefill seconds (all K users'; the other
    K - 1 users'), the mean prefill pass, one decode step, the decode seconds of one request."""

    users: FloatArray
    prefill_s: FloatArray
    others_prefill_s: FloatArray
    pass_s: FloatArray
    step_s: FloatArray
    decode_s: FloatArray


def cycles(dep: Deployment, *, tokens: tuple[int, int], max_users: int) -> Cycles:
    """The cycle of K = 1..max_users users (closed_loop.cycle's "random" arrivals, vectorised over K).

    Formula: s = (O - 1) / a; prefill = estimate.merged_prefill_s_grid(K), others = the same at K - 1;
    decode = s * t(K, I + O // 2).
    """
    prompt, output = tokens
    users = np.arange(1, max_users + 1, dtype=np.float64)
    computed = roofline.uncached_prompt_tokens(dep, prompt_tokens=prompt)
    per_pass_cap = pass_prompt_cap(
        max_prefill_tokens=dep.max_prefill_tokens,
        computed_tokens=computed,
        max_prompts=registry.max_prompts_per_pass(dep.engine),
    )
    per_pass_max = max(1, min(max_users, per_pass_cap))
    # passes of 2..cap + 1 prompts: one past the cap is the interpolation's upper end at n = cap
    sizes = np.arange(2, per_pass_max + 2, dtype=np.float64)
    batched = roofline.batched_prefill_s_grid(dep, prompts=sizes, prompt_tokens=prompt)
    pass_s = np.concatenate([[roofline.ttft_s(dep, prompt_tokens=prompt)], batched])
    steps = (output - 1) / tokens_per_step(dep)
    prefill_s, mean_pass_s = merged_prefill_s_grid(
        pass_s, batch=users, steps=steps, per_pass_max=per_pass_max
    )
    others_s, _ = merged_prefill_s_grid(pass_s, batch=users - 1.0, steps=steps, per_pass_max=per_pass_max)
    step_s = roofline.decode_step_s_grid(dep, batch=users, ctx_tokens=prompt + output // 2)
    return Cycles(
        users=users,
        prefill_s=prefill_s,
        others_prefill_s=others_s,
        pass_s=mean_pass_s,
        step_s=step_s,
        decode_s=steps * step_s,
    )


def users_memory_holds(dep: Deployment, mem: MemoryBreakdown, *, sequence_tokens: int) -> int:
    """Sequences of `sequence_tokens` tokens one DP group holds on the memory plan `mem` (the plan's own
    batch cap, capacity.max_batch_grid at that length), capped at MAX_KNEE_USERS."""
    held = capacity.max_batch_grid(dep, mem, ctx_tokens=np.asarray([sequence_tokens], dtype=np.int64))
    return max(1, min(int(held[0]), MAX_KNEE_USERS))


def load_knee(
    dep: Deployment, *, memory: MemoryBreakdown | None = None, tokens: tuple[int, int] | None = None
) -> LoadKnee:
    """The knee (module docstring) of K users sending tokens = (I, O) requests to one instance of `dep`
    (one DP group; tokens None: the default workload that fits dep's ctx, kinds.default_request_tokens, as
    the plan's TTFT); `memory`: the deployment's memory plan when the caller has it (the plan's), else it is
    planned here."""
    tokens = tokens or kinds.default_request_tokens(dep.ctx_tokens)
    prompt, output = tokens
    mem = memory if memory is not None else capacity.memory_breakdown(dep)
    max_users = users_memory_holds(dep, mem, sequence_tokens=prompt + output)
    cyc = cycles(dep, tokens=tokens, max_users=max_users)
    # every user's request also pays the per-request cost outside the forward pass (API server, tokens,
    # scheduling: roofline.request_overhead_s) before the engine sees it, as closed_loop.serving_estimate
    # counts it (all K users run: requests/s = K / (cycle + r))
    request_s = roofline.request_overhead_s(dep)
    cycle_s = cyc.prefill_s + cyc.decode_s + request_s
    power = cyc.users * output / cycle_s**2
    k = int(np.argmax(power))
    per_step = tokens_per_step(dep)
    alone_tpot_s = mtp.tpot_s(float(cyc.step_s[0]), tokens_per_step=per_step)
    window_s = cyc.decode_s[k] + cyc.others_prefill_s[k]
    waited_step_s = cyc.step_s[k] if k > 0 else 0.0  # alone, a prompt never waits for a decode step
    ttft_s = float(request_s + cyc.pass_s[k] + waited_step_s)
    return LoadKnee(
        users=k + 1,
        input_tokens=prompt,
        output_tokens=output,
        max_users=max_users,
        output_tokens_per_s=float(cyc.users[k] * output / cycle_s[k]),
        ttft_p99_s=ttft_s,
        tpot_p99_s=float(window_s / (output - 1)) if output > 1 else None,  # one token: no TPOT
        e2e_p99_s=max(float(cycle_s[k]), ttft_s),  # a request ends no sooner than its first token
        single_user_tpot_s=alone_tpot_s,
        calibrated=roofline.is_calibrated(dep),
    )
