"""What a benchmark client at fixed concurrency sees: closed-loop serving throughput, TTFT and TPOT.

Closed-loop serving API (`serving_estimate`, used by `kvplan serve` and by serving-level bench rows in
`kvplan validate` / `kvplan calibrate --from-bench`):

    est = serving_estimate(dep, input_tokens=I, output_tokens=O, concurrency=K,
                           run=BenchRun(max_batch=None, num_requests=None, arrivals="waves"))
    est.output_tokens_per_s   what a load tool reports as output token throughput (all requests)
    est.ttft_s, est.tpot_s    means over requests, as vllm bench serve, AISBench and the seed script define
    est.per_user_tokens_per_s 1 / tpot_s (the seed's "decode_tps" per request)

The model: K clients each send a request of I prompt tokens, wait for its O output tokens, and send the next.
The engine runs b = min(K, max_batch) sequences (the rest queue) and gives new prompts priority (MindIE and
vLLM both prefill waiting requests before the next decode step), batching up to max_prefill_tokens prompt
tokens per prefill pass. One cycle, in which every running request completes once, costs the prefill
passes of b prompts plus (O - 1) / a decode steps at batch b (a = tokens per step with MTP; the first
token comes from the prefill), every step and pass timed by the roofline (planner/perf/roofline.py, the
one speed model).
`arrivals` says how the prefills fall into the decode stream:
    "waves"      the benchmark starts all K requests together and every request has the same I and O (fixed
                 lengths, ignore_eos), so requests stay in step: each cycle is a wave of batched prefills then
                 the decode steps; a request's TPOT window holds only the prefills of its own wave after it.
    "staggered"  request ends are spread out (variable output lengths, EOS): each new prompt is prefilled
                 alone and pauses everyone else's decode, so a request's TPOT window holds the other b - 1
                 prefills.
    "random"     ends spread out as in "staggered", but the engine prefills every prompt that arrived during
                 one decode step in one pass (MindIE and vLLM batch waiting prompts): arrivals per step are
                 Poisson, so at high concurrency several prompts share a pass and its fixed part (weight
                 read, launches) is paid once. Below one arrival per step it is "staggered".
A finite run (num_requests) ends with a partial wave: tokens / makespan, not the steady-state rate.
The arithmetic over a Timer is planner/serving/estimate.py (re-exported here: the closed loop's API); this
module times it with the roofline and the memory plan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.capacity import Admission as Admission
from planner.capacity import admission as admission
from planner.deployment import Deployment
from planner.kinds import ARRIVALS as ARRIVALS  # re-exported: the CLI's --arrivals check reads it here
from planner.perf import roofline
from planner.serving.estimate import STEADY_WAVES as STEADY_WAVES
from planner.serving.estimate import BenchRun as BenchRun
from planner.serving.estimate import DeploymentTimer as DeploymentTimer
from planner.serving.estimate import ServingEstimate as ServingEstimate
from planner.serving.estimate import Timer as Timer
from planner.serving.estimate import cycle as cycle
from planner.serving.estimate import estimate_with as estimate_with
from planner.serving.estimate import merged_prefill_s as merged_prefill_s
from planner.serving.estimate import prompts_per_merged_pass as prompts_per_merged_pass


@dataclass(frozen=True)
class RooflineTimer(roofline.PromptAccounting, DeploymentTimer):
    """Step and pass times straight from the roofline of one deployment."""

    dep: Deployment

    def decode_step_s(self, *, batch: int, ctx_tokens: int) -> float:
        return roofline.decode_step_s(self.dep, batch=batch, ctx_tokens=ctx_tokens)

    def prefill_s(self, *, prompts: int, prompt_tokens: int) -> float:
        return batched_prefill_s(self.dep, prompts=prompts, prompt_tokens=prompt_tokens)


def batched_prefill_s(dep: Deployment, *, prompts: int, prompt_tokens: int) -> float:
    """Seconds of one prefill pass over `prompts` prompts of `prompt_tokens` each (one prompt: its TTFT).

    Formula: roofline.batched_prefill_s_grid at n = prompts; a single prompt longer than max_prefill_tokens
    is chunked (roofline.ttft_s).
    """
    if prompts == 1:
        return roofline.ttft_s(dep, prompt_tokens=prompt_tokens)
    many = np.asarray([float(prompts)])
    return float(roofline.batched_prefill_s_grid(dep, prompts=many, prompt_tokens=prompt_tokens)[0])


def serving_estimate(
    dep: Deployment,
    *,
    input_tokens: int,
    output_tokens: int,
    concurrency: int,
    run: BenchRun = STEADY_WAVES,
) -> ServingEstimate:
    """Closed-loop throughput and latency of K = concurrency clients (module docstring), roofline-timed."""
    return estimate_with(
        RooflineTimer(dep),
        workload=(input_tokens, output_tokens, concurrency),
        run=run,
        calibrated=roofline.is_calibrated(dep),
    )
