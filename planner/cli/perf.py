"""Performance sub-commands of `kvplan` (sweep, serve); the `--explain` table is planner/cli/explain.py,
sweep's output planner/cli/sweep_view.py, serve's output planner/cli/serve_view.py.

Parse -> call planner.serving.sweep / planner.serving.performance -> format. Imports of numpy-backed modules
are deferred into the commands so `kvplan --help` stays instant.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from planner import kinds
from planner.cli.options import (
    BATCH_FLAGS,
    DEFAULT_CARD,
    DEFAULT_DTYPE,
    DEFAULT_ENGINE,
    DEFAULT_MTP_ACCEPTANCE_FRACTION,
    PREFILL_FLAGS,
    PROMPT_FLAGS,
    REQUESTS_FLAGS,
    AcceptanceOpt,
    CardOpt,
    DpOpt,
    EngineFractionOpt,
    EngineOpt,
    EpOpt,
    FlagCommand,
    JsonOpt,
    KvDtypeOpt,
    MemoryOpt,
    ModelOpt,
    MtpOpt,
    NodeSizeOpt,
    NodesOpt,
    PpOpt,
    RedundantOpt,
    TpOpt,
    UncalibratedOpt,
    fail,
    ms_to_s,
    plan_request,
    positive,
    print_json,
)
from planner.errors import KvplanError, PlanInputError

if TYPE_CHECKING:
    from planner.deployment import Deployment
    from planner.serving.closed_loop import Admission, BenchRun, ServingEstimate
    from planner.sim.search import SearchResult

FORMATS = ("table", "csv", "json")

MAX_GRID_BATCHES = 4096  # a sweep grid axis longer than this is a typo, not a plan
MAX_BATCH = 10**6  # [assumed: no engine runs a million sequences in one decode step]
# [measured: 65 536 points take ~2 s of CPU as CSV on the 2-core dev box, 2026-12-04]; the grid is
# capped by its work (dtypes x batches x contexts), like simulate's request cap, not axis by axis alone
MAX_GRID_POINTS = 65_536


def check_grid(*, dtypes: int, batches: int, contexts: int) -> None:
    """PlanInputError when the sweep grid has more than MAX_GRID_POINTS points."""
    points = dtypes * batches * contexts
    if points > MAX_GRID_POINTS:
        raise PlanInputError(
            f"--batch/--ctx/--dtype: grid too large (got {dtypes} x {batches} x {contexts} = {points} "
            f"points, expected at most {MAX_GRID_POINTS}); sweep fewer batch sizes or contexts"
        )


def parse_batches(text: str) -> list[int]:
    """`1,2,4,8`, `1-64` (inclusive) or a mix -> sorted distinct batch sizes >= 1."""
    values: set[int] = set()
    try:
        for item in (part.strip() for part in text.split(",") if part.strip()):
            low, _, high = item.partition("-")
            first, last = int(low), int(high or low)
            if first > last:
                raise PlanInputError(
                    f"--batch: range runs backwards (got {item[:40]!r}, "
                    f"expected low-high such as {last}-{first})"
                )
            if max(first, last) > MAX_BATCH:
                raise PlanInputError(
                    f"--batch: batch size out of range (got {item[:40]!r}, expected 1..{MAX_BATCH})"
                )
            if last - first >= MAX_GRID_BATCHES or len(values) >= MAX_GRID_BATCHES:
                raise PlanInputError(
                    f"--batch: too many batch sizes (got {text!r}, expected at most {MAX_GRID_BATCHES})"
                )
            values.update(range(first, last + 1))
    except ValueError:
        raise PlanInputError(
            f"--batch: not a batch list (got {text!r}, expected e.g. 1,2,4,8 or 1-64)"
        ) from None
    if not values or min(values) < 1:
        raise PlanInputError(f"--batch: batch sizes must be >= 1 (got {text!r})")
    return sorted(values)


def parse_contexts(text: str) -> list[int]:
    """`256,1k,8k,32k` -> sorted distinct token counts."""
    from planner import inputs

    contexts = sorted(
        {inputs.parse_ctx(item.strip(), flag="--ctx") for item in text.split(",") if item.strip()}
    )
    if not contexts or len(contexts) > MAX_GRID_BATCHES:
        raise PlanInputError(f"--ctx: expected 1..{MAX_GRID_BATCHES} context lengths (got {text[:80]!r})")
    return contexts


def sweep_command(
    context: typer.Context,
    model: ModelOpt,
    dtype: Annotated[
        str, typer.Option(help="Weight dtype(s), comma-separated: the dtype axis.")
    ] = DEFAULT_DTYPE,
    batch: Annotated[str, typer.Option(help="Batch sizes: 1,2,4,8 or 1-64.")] = "1,2,4,8,16,32,64,128",
    ctx: Annotated[str, typer.Option(help="Context lengths: 256,1k,4k,8k,32k.")] = "256,1k,4k,8k,32k",
    output_format: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
    card: CardOpt = DEFAULT_CARD,
    kv_dtype: KvDtypeOpt = None,
    tp: TpOpt = 1,
    mtp: MtpOpt = 0,
    mtp_acceptance: AcceptanceOpt = DEFAULT_MTP_ACCEPTANCE_FRACTION,
    memory_gib: MemoryOpt = None,
    uncalibrated: UncalibratedOpt = False,
) -> None:
    """Decode speed over a batch x context (x weight dtype) grid.

    Example: `kvplan sweep -m qwen3-27b --dtype fp8,bf16 --batch 1-128 --ctx 256,8k --format csv`.
    """
    from planner import inputs
    from planner.cli import sweep_view
    from planner.serving import sweep

    try:
        if output_format not in FORMATS:
            raise PlanInputError(
                f"--format: unknown format (got {output_format!r}, expected table, csv or json)"
            )
        dtypes = [inputs.parse_weight_scheme(d.strip()) for d in dtype.split(",") if d.strip()]
        batches, contexts = parse_batches(batch), parse_contexts(ctx)
        if not dtypes:
            raise PlanInputError(
                f"--dtype: no weight dtype given (got {dtype!r}, expected e.g. bf16 or fp8,bf16)"
            )
        check_grid(dtypes=len(dtypes), batches=len(batches), contexts=len(contexts))
        # --dtype, --batch and --ctx are lists here: the request takes the first dtype and the longest ctx
        request = plan_request(context, dtype=dtypes[0], ctx=str(max(contexts)), batch=None)
        result = sweep.sweep(
            inputs.to_deployment(request), batch=batches, ctx_tokens=contexts, weight_dtypes=dtypes
        )
    except KvplanError as exc:
        fail(exc)
    if output_format == "csv":
        sys.stdout.write(sweep_view.sweep_csv(result))
    elif output_format == "json":
        sys.stdout.write(sweep_view.sweep_json(result) + "\n")
    else:
        from rich.console import Console

        Console(highlight=False).print(sweep_view.sweep_table(result))


def serve_command(
    context: typer.Context,
    model: ModelOpt,
    dtype: Annotated[str, typer.Option(help="Weight dtype.")] = DEFAULT_DTYPE,
    input_tokens: Annotated[str, typer.Option(*PROMPT_FLAGS, help="Prompt tokens per request.")] = str(
        kinds.DEFAULT_INPUT_TOKENS
    ),
    output_tokens: Annotated[str, typer.Option(help="Generated tokens per request.")] = str(
        kinds.DEFAULT_OUTPUT_TOKENS
    ),
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Concurrent requests (default: SLO best or memory max).")
    ] = None,
    tpot_ms: Annotated[float | None, typer.Option(min=0, help="SLO: time per output token (ms).")] = None,
    ttft_ms: Annotated[
        float | None, typer.Option(min=0, help="SLO: time to first token under load (ms).")
    ] = None,
    min_user_tps: Annotated[float | None, typer.Option(min=0, help="SLO: per-user tokens/s.")] = None,
    max_prefill_tokens: Annotated[
        int | None,
        typer.Option(
            *PREFILL_FLAGS,
            min=1,
            help="Prompt tokens one prefill pass batches (vLLM max_num_batched_tokens; default: as the plan: "
            "vLLM's own for the card, 2048 on Ascend; MindIE max(8192, ctx - ctx/4)).",
        ),
    ] = None,
    max_batch: Annotated[
        int | None,
        typer.Option(
            *BATCH_FLAGS, min=1, help="Engine's running-sequence limit (max_num_seqs); the rest queue."
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
    card: CardOpt = DEFAULT_CARD,
    kv_dtype: KvDtypeOpt = None,
    tp: TpOpt = 1,
    mtp: MtpOpt = 0,
    mtp_acceptance: AcceptanceOpt = DEFAULT_MTP_ACCEPTANCE_FRACTION,
    memory_gib: MemoryOpt = None,
    uncalibrated: UncalibratedOpt = False,
    engine: EngineOpt = DEFAULT_ENGINE,
    as_json: JsonOpt = False,
    memory_fraction: EngineFractionOpt = None,
    dp: DpOpt = 1,
    ep: EpOpt = 1,
    pp: PpOpt = 1,
    nodes: NodesOpt = None,
    devices_per_node: NodeSizeOpt = None,
    redundant_experts: RedundantOpt = 0,
) -> None:
    """Closed-loop serving, simulated (tails) and analytic, and SLO search: `kvplan serve -m qwen3-27b
    --concurrency 32`. With an SLO and no --concurrency: the most users whose simulated P99 TTFT / TPOT meet
    it (planner/sim/slo.py; none: exit 3)."""
    from planner import inputs
    from planner.cli import serve_view
    from planner.perf import ranges
    from planner.serving.closed_loop import BenchRun
    from planner.sim import bench as sim_bench

    try:
        prompt, output = serve_tokens(input_tokens, output_tokens)
        check_serve_load(arrivals=arrivals, concurrency=concurrency)
        dep = inputs.to_deployment(plan_request(context, ctx=str(prompt + output)))
        run = BenchRun(max_batch=max_batch, num_requests=num_requests, arrivals=arrivals)
        tpot_s = tpot_ceiling(ms_to_s(tpot_ms, "--tpot-ms"), positive(min_user_tps, "--min-user-tps"))
        slo = (ms_to_s(ttft_ms, "--ttft-ms"), tpot_s)
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
        memory_fraction=dep.memory_fraction, dp=dep.dp,
    )  # fmt: skip
    if as_json:
        print_json(serve_view.serve_payload(view))
    else:
        for line in serve_view.serve_lines(view):
            typer.echo(line)
    if found is not None:
        from planner.sim import slo as sim_slo

        try:
            sim_slo.require_met(found, what="number of users")
        except KvplanError as exc:
            fail(exc)


MAX_SERVE_CONCURRENCY = 100_000  # as `kvplan simulate --concurrency`


def serve_tokens(input_tokens: str, output_tokens: str) -> tuple[int, int]:
    """(prompt, output) tokens per request from --input-tokens and --output-tokens ("1k" -> 1024); their sum
    must be a valid context too."""
    from planner import inputs

    prompt = inputs.parse_ctx(input_tokens, flag="--input-tokens")
    output = inputs.parse_ctx(output_tokens, flag="--output-tokens")
    inputs.parse_ctx(str(prompt + output), flag="--input-tokens + --output-tokens")
    return prompt, output


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
    users meeting it (1 when none does: the search says so and the command exits 3); else the engine's cap
    (what memory holds at full length for MindIE, max_num_seqs for vLLM), at most MAX_SERVE_CONCURRENCY."""
    from planner import capacity
    from planner.sim import bench

    if concurrency is not None:
        return None, concurrency
    full = capacity.memory_plan(dep)[1].max_batch_size  # the instance's: dp x one group's
    if all(limit is None for limit in slo):
        cap = bench.engine_cap(dep, max_batch=run.max_batch)
        return None, max(1, min(full, cap * dep.dp, MAX_SERVE_CONCURRENCY))
    found = bench.search_users(dep, tokens=tokens, slo=slo, bench=run)
    return found, int(found.best) if found.best is not None else 1


def serve_estimate(
    dep: Deployment, *, tokens: tuple[int, int], users: int, run: BenchRun
) -> tuple[ServingEstimate, Admission]:
    """The analytic closed loop of one DP group's ceil(users / dp) users with the running batch the serving
    fit uses (closed_loop.admission: min(K, --max-batch, what the group's pool holds at full length); the rest
    queue). The instance serves dp times its throughput (planner/fit/serving_rows.py)."""
    from planner import layout
    from planner.serving import closed_loop
    from planner.sim import bench

    group = layout.per_dp_rank_batch(users, dp=dep.dp)
    admitted = closed_loop.admission(dep, clients=group, engine_cap=run.max_batch)
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
    """Add the performance sub-commands (`sweep`, `serve`) to the `kvplan` app."""
    app.command("sweep", cls=FlagCommand)(sweep_command)
    app.command("serve", cls=FlagCommand)(serve_command)
