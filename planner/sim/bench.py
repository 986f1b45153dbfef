"""A benchmark client's closed loop, simulated: the load numbers and tails `kvplan serve` reports.

K users each send a request of I prompt tokens, wait for its O output tokens and send the next (fixed
lengths, as `vllm bench serve --ignore-eos`, AISBench and the seed's script run). The simulator
(planner/sim/run.py) runs them request by request on the planner's step model; the analytic closed
loop (planner/serving/closed_loop.py) stays the calibration fits' fast path, and the two agree
(tests/test_sim_bench.py).
BenchRun maps onto the simulated engine as:
    max_batch     the engine's running-sequence cap (default: K, all users run)
    num_requests  requests in the run (default: whole waves of K, at least MIN_BENCH_REQUESTS)
    arrivals      "waves": all K start together with fixed lengths, so they stay in step;
                  "staggered" and "random": output lengths uniform around O (mean O, seeded), so request
                  ends spread out and new prompts arrive apart, as closed_loop.py's staggered and random
                  modes assume (the engine's scheduler decides how many share a prefill pass).
Either way the engine's own scheduler (prefill batching, chunking) runs; waves are deterministic.
"""

from __future__ import annotations

import math

from planner import capacity, kinds, layout
from planner.deployment import Deployment
from planner.errors import PlanInputError
from planner.inputs import ServiceLevels
from planner.results import SloAnswer
from planner.serving.estimate import BenchRun
from planner.sim import instance, run
from planner.sim import slo as sim_slo
from planner.sim import workload as wl
from planner.sim.metrics import SimSummary
from planner.sim.search import SearchResult
from planner.sim.workload import MAX_REQUESTS, Workload

BENCH_WAVES = 16  # whole waves of K requests a default run holds (the first starts from an idle engine)
MIN_BENCH_REQUESTS = 1000  # so a P99 rests on >= 10 requests
MAX_BENCH_REQUESTS = 20_000  # default runs stop here (~0.1 s of simulation); --num-requests may go higher
BENCH_SEED = 0  # staggered output lengths (the only random draw)


def bench_requests(*, concurrency: int, running_batch: int, num_requests: int | None) -> int:
    """Requests of the simulated run: num_requests, else whole waves of b running requests.

    Formula: N = b * clamp(max(BENCH_WAVES, ceil(MIN / b)), 1, floor(MAX / b)), at least K (every user
    sends once); --num-requests above MAX_REQUESTS is refused.
    """
    if num_requests is not None:
        if num_requests > MAX_REQUESTS:
            raise PlanInputError(
                f"--num-requests: too many to simulate (got {num_requests}, expected <= {MAX_REQUESTS})"
            )
        return num_requests
    waves = max(BENCH_WAVES, math.ceil(MIN_BENCH_REQUESTS / running_batch))
    waves = max(1, min(waves, MAX_BENCH_REQUESTS // running_batch))
    return min(max(running_batch * waves, concurrency), MAX_REQUESTS)


def engine_cap(dep: Deployment, *, max_batch: int | None) -> int:
    """The engine's running-sequence cap per DP group (capacity.running_cap: --max-batch, else its default,
    vLLM max_num_seqs for the device, MindIE maxBatchSize as `kvplan mindie` writes it, the plan's batch at
    ctx). `kvplan serve`'s simulation, its analytic estimate and the serving fit all read it."""
    return capacity.running_cap(dep, max_batch=max_batch)


def bench_knobs(dep: Deployment, *, running_batch: int) -> dict[str, object]:
    """Scheduler knobs for the run: the running cap b; vLLM's max_num_batched_tokens is the deployment's
    max_prefill_tokens (what serve's --max-prefill-tokens sets), at least b (vLLM's own start-up check)."""
    knobs: dict[str, object] = {"max_batch": running_batch}
    scheduler = run.scheduler_for(dep)
    if scheduler == "vllm":
        knobs["max_batched_tokens"] = max(dep.max_prefill_tokens, running_batch)
    elif scheduler == "sglang":  # --chunked-prefill-size: prefill passes only, no decode tokens in it
        knobs["max_batched_tokens"] = dep.max_prefill_tokens
    return knobs


def bench_workload(*, tokens: tuple[int, int], concurrency: int, count: int, arrivals: str) -> Workload:
    """K users' requests: I prompt tokens each; O output tokens each ("waves"), or uniform in
    [O - floor(O/2), O + floor(O/2)] (mean O) drawn with seed 0 ("staggered", "random": request ends spread
    out, as the seed's client loop without ignore_eos)."""
    prompt, output = tokens
    spread = output // 2 if arrivals in ("staggered", "random") else 0
    lengths = (
        wl.LengthDist("fixed", prompt, prompt),
        wl.LengthDist("uniform", output - spread, output + spread),
    )
    work = wl.synthetic(lengths=lengths, count=count, rate_per_s=None, seed=BENCH_SEED)
    return Workload(work.input_tokens, work.output_tokens, arrival_s=None, concurrency=concurrency)


def simulate_bench(
    dep: Deployment,
    *,
    tokens: tuple[int, int],
    concurrency: int,
    bench: BenchRun,
    slo: tuple[float | None, float | None] = (None, None),
) -> instance.SimResult:
    """Simulate the closed-loop benchmark: tokens = (I, O) per request, K = concurrency users, the engine
    running at most bench.max_batch of them (None: all K; `kvplan serve` passes engine_cap), the rest queue,
    KV blocks on demand."""
    batch = min(concurrency, bench.max_batch or concurrency)
    count = bench_requests(concurrency=concurrency, running_batch=batch, num_requests=bench.num_requests)
    work = bench_workload(tokens=tokens, concurrency=concurrency, count=count, arrivals=bench.arrivals)
    cfg = run.default_config(dep, workload=work, **bench_knobs(dep, running_batch=batch))
    return run.simulate(dep, work, cfg=cfg, slo=slo)


def group_run(bench: BenchRun, *, dp: int) -> BenchRun:
    """One DP group's share of the run: ceil(--num-requests / dp) requests (as the serving fit)."""
    if bench.num_requests is None or dp == 1:
        return bench
    return bench.model_copy(update={"num_requests": layout.per_dp_rank_batch(bench.num_requests, dp=dp)})


def simulate_users(
    dep: Deployment,
    *,
    tokens: tuple[int, int],
    users: int,
    bench: BenchRun,
    slo: tuple[float | None, float | None],
) -> SimSummary:
    """The simulated closed loop of one DP group's ceil(users / dp) users under the engine's own cap
    (engine_cap: --max-batch, else vLLM's max_num_seqs default or MindIE's planned maxBatchSize): with the
    benchmark's identical users the dp groups run identical loops, so one group stands for all."""
    group = layout.per_dp_rank_batch(users, dp=dep.dp)
    share = group_run(bench, dp=dep.dp).model_copy(
        update={"max_batch": engine_cap(dep, max_batch=bench.max_batch)}
    )
    return simulate_bench(dep, tokens=tokens, concurrency=group, bench=share, slo=slo).summary


def search_users(
    dep: Deployment,
    *,
    tokens: tuple[int, int],
    slo: tuple[float | None, float | None],
    bench: BenchRun,
    ceiling: int | None = None,
) -> SearchResult:
    """The one SLO search of plan, serve, simulate --search max-concurrency's closed loop, layout and the
    dashboard: the most users of tokens = (I, O) whose simulated p99 TTFT and TPOT meet slo =
    (ttft_s, tpot_s), each K one simulation of the benchmark loop (simulate_users); the search
    starts its doubling at what memory holds at dep's ctx (the instance's plan batch) and stops at `ceiling`
    (the plan, layout and dashboard pass their memory batch: a batch above it is not theirs to take, and a
    TPOT-only target met by queueing users forever would otherwise double the search 8 times)."""
    sim_slo.check_tpot_defined(slo[1], longest_output_tokens=tokens[1], workload=f"{tokens[0]} in / 1 out")
    full = capacity.memory_plan(dep)[1].max_batch_size
    return sim_slo.max_users(
        lambda k: simulate_users(dep, tokens=tokens, users=k, bench=bench, slo=slo),
        slo=slo,
        top_guess=full,
        ceiling=ceiling,
    )


def slo_answer(dep: Deployment, *, memory_batch: int, slo: ServiceLevels) -> SloAnswer:
    """The one SLO search (planner/sim/bench.search_users, as `kvplan serve`) on the default workload that
    fits dep's ctx (kinds.default_request_tokens: 256 in / 128 out from ctx 384 up), closed loop in waves, p99
    tails simulated, searched up to memory_batch (the most the plan may take): batch = users found.
    SloNotMetError (exit 3) when one user misses.
    The plan builder (planner/plan/compose.py) takes it as a value: a plan without targets never imports
    the simulator."""
    tokens = kinds.default_request_tokens(dep.ctx_tokens)
    tpot_s = sim_slo.tpot_ceiling_s(slo.tpot_s, slo.min_user_tokens_per_s)
    bench = BenchRun(arrivals=kinds.DEFAULT_ARRIVALS)
    found = search_users(dep, tokens=tokens, slo=(slo.ttft_s, tpot_s), bench=bench, ceiling=memory_batch)
    found = sim_slo.naming_user_rate(
        found, tpot_s=slo.tpot_s, min_user_tokens_per_s=slo.min_user_tokens_per_s
    )
    sim_slo.require_met(found, what=f"number of users of {tokens[0]} in / {tokens[1]} out")
    users = int(found.best or 1)
    at_best = next(p for p in found.points if p.x == found.best)
    return SloAnswer(
        input_tokens=tokens[0], output_tokens=tokens[1], arrivals=bench.arrivals, quantile=found.quantile,
        targets_s=found.slo or {}, users=users, batch=min(users, memory_batch),
        binding="memory" if memory_batch <= users else (sim_slo.binding_target(found) or "ceiling"),
        ttft_s=at_best.ttft_s, tpot_s=at_best.tpot_s,
    )  # fmt: skip
