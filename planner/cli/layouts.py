"""`kvplan layout`: the best tp x dp x ep x pp layouts for a device budget under SLOs (planner/plan/
layout_search.py). Parse -> search -> format; numpy-backed imports are deferred so `kvplan --help` stays
instant."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated

import typer

from planner import units
from planner.cli import options
from planner.cli.flags import DRAFT_FLAGS, MEMORY_FLAGS, SLO_FLAGS, ModelOpt, flag_command
from planner.errors import DoesNotFitError, KvplanError, PlanInputError

if TYPE_CHECKING:
    from planner.inputs import ServiceLevels
    from planner.perf.ranges import SpeedBand
    from planner.plan.layout_search import LayoutCandidate, LayoutSearch, PlanBuilder

BudgetOpt = Annotated[int, typer.Option(help="Devices available (the budget the layouts fill).")]
TopOpt = Annotated[int, typer.Option(help="Layouts to show, best first.")]


def layout_command(
    context: typer.Context,
    model: ModelOpt,
    budget_devices: BudgetOpt,
    top: TopOpt = 10,
) -> None:
    """Rank parallel layouts (tp, dp, ep, pp) by tokens/s per device within --budget-devices under SLOs."""
    from planner import inputs
    from planner.deployment import MAX_DEGREE
    from planner.perf import ranges
    from planner.plan import layout_search

    request = options.plan_request(context)
    try:
        if not 1 <= budget_devices <= MAX_DEGREE or not 1 <= top <= MAX_DEGREE:
            budget_ok = 1 <= budget_devices <= MAX_DEGREE
            flag, value = ("--top", top) if budget_ok else ("--budget-devices", budget_devices)
            raise PlanInputError(f"{flag}: out of range (got {value}, expected 1..{MAX_DEGREE})")
        dep = inputs.to_deployment(request)
        slo = options.service_levels(context)
        result = layout_search.search_layouts(
            dep, budget=budget_devices, slo=slo, plan_of=plan_builder(slo), keep=top
        )
        if not result.candidates:
            raise DoesNotFitError(
                f"--budget-devices: no layout of {dep.model.id} on up to {budget_devices} {dep.hardware.id} "
                f"devices fits and meets the SLOs (got {result.tried} layouts tried, expected at least one); "
                f"try more devices, a smaller --dtype, a shorter --ctx or looser SLOs"
            )
    except KvplanError as exc:
        options.fail(exc)
    shown = result.model_copy(update={"candidates": result.candidates[:top]})
    best = shown.candidates[0]
    band = ranges.speed_band(dep, batch=max(1, best.max_batch_size // best.dp), ctx_tokens=dep.ctx_tokens)
    if options.wants_json(context):
        options.print_json({**shown.model_dump(mode="json"), "speed_range": band.model_dump(mode="json")})
        return
    print_search(shown)
    typer.echo(band_line(band))


def band_line(band: SpeedBand) -> str:
    """Where the table's speeds come from and by what factors they may be off (perf.ranges, at the best
    layout's batch per DP group)."""
    from planner.cli.serve_view import factor_text

    return f"speed: {band.label} ({band.source}); {factor_text(band)}" + "".join(
        f"\nnote: {note}" for note in band.notes
    )


def plan_builder(slo: ServiceLevels) -> PlanBuilder:
    """compose.build_plan with the simulator's SLO search when there are targets (planner/sim/bench.py)."""
    from planner.plan import compose

    if not slo.any:
        return compose.build_plan
    from planner.sim import bench as sim_bench

    return functools.partial(compose.build_plan, slo_search=sim_bench.slo_answer)


# The layout table's columns; with SLOs, the simulated tails at the SLO search's batch follow them.
LAYOUT_COLUMNS = (
    "tp", "dp", "ep", "pp", "devices", "replicas", "batch", "TPOT at ctx", "TTFT", "tok/s", "tok/s/dev",
)  # fmt: skip
SLO_COLUMNS = ("P99 TPOT (SLO load)", "P99 TTFT (SLO load)")


def print_search(result: LayoutSearch) -> None:
    """The ranked layouts as a table."""
    from rich.table import Table

    from planner.cli.render import console

    with_slo = any(c.slo_ttft_p99_s is not None for c in result.candidates)
    table = Table(
        title=f"Layouts within {result.budget_devices} devices, best tokens/s per device first "
        f"({len(result.candidates)} shown of those that fit; {result.tried} tried)",
        header_style="bold",
    )
    for column in (*LAYOUT_COLUMNS, *(SLO_COLUMNS if with_slo else ())):
        table.add_column(column, justify="right")
    table.add_column("bound by")
    for candidate in result.candidates:
        table.add_row(*layout_cells(candidate, with_slo=with_slo))
    console.print(table)
    console.print(
        "batch = the instance's sequences (all DP groups); replicas = instances the budget holds; "
        "TPOT at ctx = every sequence of the batch at the full --ctx, TTFT = one "
        f"{result.prompt_tokens}-token prompt alone; with SLOs the batch is `kvplan serve`'s SLO search and "
        "P99 (SLO load) its simulated tails there (closed loop of the default workload, 256 in / 128 out "
        "from ctx 384 up, waves: the targets bind these, not TPOT at ctx)"
    )


def layout_cells(c: LayoutCandidate, *, with_slo: bool) -> tuple[str, ...]:
    """One layout's row: its degrees and devices, batch, speeds (ms, tok/s), the SLO tails, what binds it."""
    return (
        *map(str, (c.tp, c.dp, c.ep, c.pp, c.devices, c.replicas, c.max_batch_size)),
        units.fmt_duration(c.tpot_s),
        units.fmt_duration(c.ttft_s),
        units.fmt_tokens_per_s(c.tokens_per_s),
        units.fmt_tokens_per_s(c.tokens_per_s_per_device),
        *(
            (units.fmt_tpot(c.slo_tpot_p99_s), units.fmt_duration(c.slo_ttft_p99_s or 0.0))
            if with_slo
            else ()
        ),
        c.binding_constraint,
    )


def register(app: typer.Typer) -> None:
    """Add `kvplan layout` to the app."""
    cls = flag_command(
        ("budget_devices", ("ctx_len", "engine", "prefix_cached_fraction", *DRAFT_FLAGS, "uncalibrated")),
        ("top", ("as_json", *MEMORY_FLAGS, *SLO_FLAGS)),
    )
    app.command("layout", cls=cls)(layout_command)
