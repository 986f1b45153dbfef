"""`kvplan serve`: closed-loop serving, simulated and analytic, and its SLO search; its output is
planner/cli/serve_view.py, `kvplan sweep` is planner/cli/sweep.py, the `--explain` table
planner/cli/explain.py.

Parse -> call planner.serving / planner.sim.bench -> format. Imports of numpy-backed modules are deferred
into the command so `kvplan --help` stays instant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from planner import kinds
from planner.cli.flags import (
    LOAD_FLAGS,
    SLO_FLAGS,
    DtypeOpt,
    EngineCtxOpt,
    ModelOpt,
    PrefillTokensOpt,
    flag_command,
)
from planner.cli.options import (
    BATCH_FLAGS,
    PROMPT_FLAGS,
    REQUESTS_FLAGS,
    fail,
    plan_request,
    print_json,
    service_levels,
    wants_json,
)
from planner.errors import KvplanError, PlanInputError
from planner.inputs import DEFAULT_DTYPE

if TYPE_CHECKING:
    from planner.deployment import Deployment
    from planner.serving.closed_loop import Admission, BenchRun, ServingEstimate
    from planner.sim.search import SearchResult


def serve_command(
    context: typer.Context,
    model: ModelOpt,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    input_tokens: Annotated[str, typer.Option(*PROMPT_FLAGS, help="Prompt tokens per request.")] = str(
        kinds.DEFAULT_INPUT_TOKENS
    ),
    output_tokens: Annotated[str, typer.Option(help="Generated tokens per request.")] = str(
        kinds.DEFAULT_OUTPUT_TOKENS
    ),
    ctx_len: EngineCtxOpt = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Concurrent requests (default: SLO best or memory max).")
    ] = None,
    max_prefill_tokens: PrefillTokensOpt = None,
    max_batch: Annotated[
        int | None,
        typer.Option(
            *BATCH_FLAGS, help="Engine's running-sequence limit per DP group (max_num_seqs); the rest queue."
        ),
    ] = None,
    num_requests: Annotated[
        int | None,
        typer.Option(
            *REQUESTS_FLAGS,
            min=1,
            help="Requests in the benchmark run (default: analytic steady state; simulated: whole waves, "
            ">= 1000).",
        ),
    ] = None,
    arrivals: Annotated[
        str,
        typer.Option(
            help="waves (fixed lengths, all start together), staggered or random (variable lengths, "
            "requests drift apart; random: the load knee's and the seed fit's mode)."
        ),
    ] = kinds.DEFAULT_ARRIVALS,
) -> None:
    """Closed-loop serving, simulated (tails) and analytic, and SLO search: `kvplan serve -m qwen3-27b
    --concurrency 32`. With an SLO and no --concurrency: the most users whose simulated P99 TTFT / TPOT meet
    it (planner/sim/slo.py; none: exit 3)."""
    from planner import inputs, layout
    from planner.cli import serve_view
    from planner.perf import ranges, roofline
    from planner.serving.closed_loop import BenchRun
    from planner.sim import bench as sim_bench

    try:
        prompt, output, ctx_tokens = serve_tokens(input_tokens, output_tokens, ctx_len)
        check_serve_load(arrivals=arrivals, concurrency=concurrency)
        dep = inputs.to_deployment(plan_request(context, ctx=str(ctx_tokens)), prompt_tokens=prompt)
        check_running_cap(dep, max_batch=max_batch)
        run = BenchRun(max_batch=max_batch, num_requests=num_requests, arrivals=arrivals)
        levels = service_levels(context)  # the shared --tpot-ms, --ttft-ms, --min-user-tps
        slo = (levels.ttft_s, tpot_ceiling(levels.tpot_s, levels.min_user_tokens_per_s))
        found, users = serve_users(dep, tokens=(prompt, output), concurrency=concurrency, slo=slo, run=run)
        estimate, admitted = serve_estimate(dep, tokens=(prompt, output), users=users, run=run)
        band = ranges.speed_band(
            dep, batch=estimate.running_batch, ctx_tokens=estimate.input_tokens + estimate.output_tokens
        )
        sim = sim_bench.simulate_users(dep, tokens=(prompt, output), users=users, bench=run, slo=slo)
    except KvplanError as exc:
        fail(exc)
    view = serve_view.ServeView(
        found=found, estimate=estimate, admitted=admitted, sim=sim, band=band, engine=dep.engine,
        memory_fraction=dep.memory_fraction, dp=dep.dp, busy_groups=layout.busy_dp_groups(users, dp=dep.dp),
        cached_prompt_tokens=roofline.cached_prompt_tokens(dep, prompt_tokens=prompt),
        notes=serve_notes(dep, given=(max_prefill_tokens, max_batch), users=concurrency),
    )  # fmt: skip
    if wants_json(context):
        print_json(serve_view.serve_payload(view))
    else:
        for line in serve_view.serve_lines(view):
            typer.echo(line)
    if found is not None:
        require_users_met(context, found)


def require_users_met(context: typer.Context, found: SearchResult) -> None:
    """Exit 3 (sim.slo.require_met) when no number of users meets the targets, naming --min-user-tps when
    its 1 / rate is the TPOT target."""
    from planner.sim import slo as sim_slo

    levels = service_levels(context)
    found = sim_slo.naming_user_rate(
        found, tpot_s=levels.tpot_s, min_user_tokens_per_s=levels.min_user_tokens_per_s
    )
    try:
        sim_slo.require_met(found, what="number of users")
    except KvplanError as exc:
        fail(exc)


def check_running_cap(dep: Deployment, *, max_batch: int | None) -> None:
    """--max-batch in the plan's --batch range (inputs.check_batch) and within what the engine's config takes
    beside its prefill budget (registry.check_batch_cap: vLLM's max_num_seqs <= max_num_batched_tokens)."""
    from planner import inputs
    from planner.engines import registry

    inputs.check_batch(max_batch, "--max-batch")
    registry.check_batch_cap(dep, batch=max_batch, flag="--max-batch")


def serve_notes(
    dep: Deployment, *, given: tuple[int | None, int | None], users: int | None
) -> tuple[str, ...]:
    """The notes under the figures: --max-prefill-tokens raised by the engine (common.raised_prefill_notes),
    and, --max-batch (given[1]) not given, the prefill budget holding the engine's default running limit, or
    the --concurrency users of one DP group, down (registry.batch_cap_notes: vLLM's max_num_seqs); a --dtype
    other than the card's checkpoint_dtype (the plan's and the config commands' line)."""
    from planner.engines import registry
    from planner.engines.common import raised_prefill_notes
    from planner.plan.compose import dtype_warnings

    notes = raised_prefill_notes(given[0], used=dep.max_prefill_tokens) + dtype_warnings(dep)
    if given[1] is None:
        wanted = registry.default_max_batch(dep, planned_batch=1)
        if users is not None:
            wanted = min(wanted, -(-users // dep.dp))
        what = "the engine's default is" if users is None or wanted < users else "--concurrency runs"
        notes += registry.batch_cap_notes(dep, wanted=wanted, what=what)
    return tuple(notes)


MAX_SERVE_CONCURRENCY = 100_000  # as `kvplan simulate --concurrency`


def serve_tokens(input_tokens: str, output_tokens: str, ctx_len: str | None) -> tuple[int, int, int]:
    """(prompt, output, ctx) tokens per request from --input-tokens, --output-tokens and --ctx ("1k" ->
    1024); their sum must be a valid context too, and --ctx (default: the sum) at least the sum."""
    from planner import inputs

    prompt = inputs.parse_ctx(input_tokens, flag="--input-tokens")
    output = inputs.parse_ctx(output_tokens, flag="--output-tokens")
    inputs.parse_ctx(str(prompt + output), flag="--input-tokens + --output-tokens")
    if ctx_len is None:
        return prompt, output, prompt + output
    ctx_tokens = inputs.parse_context(ctx_len, flag="--ctx")
    if ctx_tokens < prompt + output:
        raise PlanInputError(
            f"--ctx: shorter than one request (got {ctx_tokens}, expected >= --input-tokens + "
            f"--output-tokens = {prompt + output})"
        )
    return prompt, output, ctx_tokens


def check_serve_load(*, arrivals: str, concurrency: int | None) -> None:
    """PlanInputError for an unknown --arrivals mode or more --concurrency users than the simulator takes."""
    from planner.serving.closed_loop import ARRIVALS

    if arrivals not in ARRIVALS:
        raise PlanInputError(
            f"--arrivals: unknown mode (got {arrivals!r}, expected one of {', '.join(ARRIVALS)})"
        )
    if concurrency is not None and concurrency > MAX_SERVE_CONCURRENCY:
        raise PlanInputError(
            f"--concurrency: too many users to simulate (got {concurrency}, expected <= "
            f"{MAX_SERVE_CONCURRENCY})"
        )


def tpot_ceiling(tpot_s: float | None, min_user_tokens_per_s: float | None) -> float | None:
    """planner.sim.slo.tpot_ceiling_s (deferred import)."""
    from planner.sim import slo as sim_slo

    return sim_slo.tpot_ceiling_s(tpot_s, min_user_tokens_per_s)


def serve_users(
    dep: Deployment,
    *,
    tokens: tuple[int, int],
    concurrency: int | None,
    slo: tuple[float | None, float | None],
    run: BenchRun,
) -> tuple[SearchResult | None, int]:
    """(the SLO search or None, the users to report): --concurrency when given; else with an SLO the most
    users meeting it, searched up to the engine's running cap (1 when none does: the search says so and
    the command exits 3); else the smaller of that cap and what memory holds at full length, at most
    MAX_SERVE_CONCURRENCY. Users beyond the cap only queue: a TPOT-only target would count them for ever
    (342 742 users of qwen3-8b at TPOT <= 300 ms)."""
    from planner import capacity
    from planner.sim import bench

    if concurrency is not None:
        return None, concurrency
    full = capacity.memory_plan(dep)[1].max_batch_size  # the instance's: dp x one group's
    cap = max(1, min(bench.engine_cap(dep, max_batch=run.max_batch) * dep.dp, MAX_SERVE_CONCURRENCY))
    if all(limit is None for limit in slo):
        return None, min(full, cap)
    # the engine's own running limit (MindIE maxBatchSize = the plan's batch at ctx; vLLM's max_num_seqs,
    # whose blocks come as tokens arrive, so more than the full-length batch run at once)
    found = bench.search_users(dep, tokens=tokens, slo=slo, bench=run, ceiling=cap)
    return found, int(found.best) if found.best is not None else 1


def serve_estimate(
    dep: Deployment, *, tokens: tuple[int, int], users: int, run: BenchRun
) -> tuple[ServingEstimate, Admission]:
    """The analytic closed loop of one DP group's ceil(users / dp) users with the running batch the serving
    fit uses (closed_loop.admission: min(K, the engine's cap, what the group's pool holds at full length); the
    rest queue; full length = one request's input + output, as the engines' on-demand blocks hold it).
    The cap is the simulation's (capacity.running_cap: --max-batch, else the engine's default,
    e.g. vLLM max_num_seqs 256), so the headline and the simulated run below it agree. The instance serves dp
    times its throughput (planner/fit/serving_rows.py)."""
    from planner import layout
    from planner.serving import closed_loop
    from planner.sim import bench

    group = layout.per_dp_rank_batch(users, dp=dep.dp)
    admitted = closed_loop.admission(
        dep, clients=group, engine_cap=run.max_batch, request_tokens=tokens[0] + tokens[1]
    )
    capped = bench.group_run(run, dp=dep.dp).model_copy(update={"max_batch": admitted.running})
    estimate = closed_loop.serving_estimate(
        dep, input_tokens=tokens[0], output_tokens=tokens[1], concurrency=group, run=capped
    )
    return estimate, admitted


def serve_results(
    dep: Deployment,
    *,
    prompt_tokens: int,
    output_tokens: int,
    concurrency: int | None,
    slos: tuple[float | None, float | None, float | None],
    run: BenchRun,
) -> tuple[SearchResult | None, ServingEstimate]:
    """The SLO search (slos = tpot_s, ttft_s, min per-user tok/s; None when none is set) and the analytic
    closed-loop estimate at its answer (or --concurrency, or the engine's cap): what `kvplan serve` prints,
    for scripts (lab/accuracy/ttft_megagdn.py)."""
    tpot_s, ttft_s, min_user = slos
    slo = (ttft_s, tpot_ceiling(tpot_s, min_user))
    tokens = (prompt_tokens, output_tokens)
    found, users = serve_users(dep, tokens=tokens, concurrency=concurrency, slo=slo, run=run)
    return found, serve_estimate(dep, tokens=tokens, users=users, run=run)[0]


def register(app: typer.Typer) -> None:
    """Add `serve` to the `kvplan` app."""
    placements = (
        ("concurrency", SLO_FLAGS),
        ("num_requests", ("prefix_cached_fraction",)),
        (None, LOAD_FLAGS),
    )
    summary = "Serving N users in a closed loop, simulated and analytic; with an SLO alone, the most users."
    app.command("serve", cls=flag_command(*placements), short_help=summary)(serve_command)
