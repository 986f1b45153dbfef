"""`kvplan`: the command-line interface. Parse -> call the planner -> format. No formulas here.

Expected errors (KvplanError) print one line on stderr and exit 2 (bad input / data) or 3 (does not fit);
anything else is a bug and keeps its traceback.
"""

# isort: off
from planner.cli import startup  # first of all imports: pauses the garbage collector for them (typer's too)

# isort: on
import functools
import shlex
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.main

from planner.cli.flags import DRAFT_FLAGS, LAYOUT_FLAGS, MEMORY_FLAGS, SLO_FLAGS, MaybeModelOpt, shared_flags
from planner.cli.groups import default_command
from planner.cli.options import (
    PROMPT_FLAGS,
    FlagCommand,
    FlagGroup,
    JsonOpt,
    OneLineErrors,
    VersionOpt,
    fail,
    plan_request,
    print_json,
    service_levels,
)
from planner.errors import KvplanError

if TYPE_CHECKING:
    from planner.deployment import Deployment
    from planner.inputs import PlanRequest
    from planner.results import Plan

# Every sub-command, imported and built into click commands only when the arguments name one (KvplanGroup
# below), so the mission command skips importing the sub-commands' modules (urllib for the dashboard, the
# simulator's requests, ...) and building ~30 commands' options from their signatures.
commands = typer.Typer(cls=FlagGroup)


@functools.cache
def register_commands() -> None:
    """Import the sub-command modules and add their commands to `commands` (once)."""
    from planner.cli import bench, calibrate, configs, dashboard, layouts, models, perf, simulate, sweep

    models.register(models_app)
    for module in (sweep, perf, calibrate, configs, simulate, bench, layouts, dashboard):
        module.register(commands)


class KvplanGroup(OneLineErrors):
    """The root command (the plan). Its sub-commands come from `commands`, loaded the first time anything
    looks them up (a sub-command name in the arguments, --help, a typo to suggest a name for): click's lazy
    sub-command pattern (list_commands / get_command / resolve_command)."""

    placements = (
        ("model", ("tp", "ctx_len", "bandwidth_gbps", "max_prefill_tokens")),
        ("prompt_tokens", ("prefix_cached_fraction", *DRAFT_FLAGS, "uncalibrated", "engine")),
        ("as_json", (*MEMORY_FLAGS, *LAYOUT_FLAGS, *SLO_FLAGS)),
    )
    flag_tables = (shared_flags,)

    def _load(self) -> None:
        if not self.commands:
            register_commands()
            for name, command in typer.main.get_group(commands).commands.items():
                fold_short_help(command)
                self.add_command(command, name)

    def list_commands(self, ctx: Any) -> list[str]:
        self._load()
        return super().list_commands(ctx)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        self._load()
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        self._load()
        return super().resolve_command(ctx, args)


def fold_short_help(command: Any) -> None:
    """Give a command (and a group's sub-commands) a one-paragraph short_help from its docstring, its line
    breaks folded: the command list prints a short help's line breaks as they stand in the source, so a
    docstring wrapped at 110 columns came out ragged in `kvplan --help`."""
    if command.short_help is None and command.help:
        command.short_help = " ".join(command.help.split("\n\n", 1)[0].split())
    for sub in getattr(command, "commands", {}).values():
        fold_short_help(sub)


app = typer.Typer(
    name="kvplan",
    cls=KvplanGroup,
    help="Capacity planner for LLM inference on Ascend NPUs: memory, KV cache, speed, MindIE configs.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(
    cls=FlagGroup, help="List catalogued model cards, or import one from a Hugging Face config.json."
)
commands.add_typer(models_app, name="models")


# The plan's options that `kvplan mindie` and `kvplan vllm` take too (the next command repeats them).
CONFIG_OPTIONS = (
    "model", "card", "dtype", "kv_dtype", "tp", "ctx_len", "batch", "block_size", "memory_fraction",
    "memory_gib", "bandwidth_gbps", "max_prefill_tokens", "prefix_cached_fraction", "mtp", "mtp_acceptance",
    "speculative_config", "acceptance_rate", "uncalibrated", "dp", "ep", "pp", "nodes", "devices_per_node",
    "redundant_experts",
)  # fmt: skip


def config_flags(ctx: typer.Context, *, slo_batch: int | None) -> str:
    """The plan's flags the user typed that the config commands take too, in their first spelling; the
    config commands have no SLO flags, so a batch the SLOs chose (`slo_batch`) goes along as --batch."""
    given = []
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name or "")
        if param.name in CONFIG_OPTIONS and source is not None and source.name == "COMMANDLINE":
            value = ctx.params[param.name]
            text = f"{value:g}" if isinstance(value, float) else str(value)
            given.append(param.opts[0] if value is True else f"{param.opts[0]} {shlex.quote(text)}")
    if slo_batch is not None and ctx.params["batch"] is None:
        given.append(f"--batch {slo_batch}")
    return " ".join(given)


@default_command(app)
def plan(
    ctx: typer.Context,
    model: MaybeModelOpt = None,  # required, with a usage hint when missing (below)
    prompt_tokens: Annotated[
        str | None,
        typer.Option(
            *PROMPT_FLAGS,
            help="Prompt length for TTFT (default: the default workload's 256, shorter where --ctx is).",
        ),
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Print every term of the decode ledger.")
    ] = False,
    as_json: JsonOpt = False,
    version: VersionOpt = False,
) -> None:
    """Plan memory and speed for one model on one card: `kvplan --model qwen3-27b --ctx 32k --dtype fp8`."""
    if model is None:
        typer.echo(
            "kvplan: error: --model: required (e.g. kvplan --model qwen3-27b --ctx 32k --dtype fp8; "
            "`kvplan models` lists ids)",
            err=True,
        )
        raise typer.Exit(code=2)
    from planner import inputs  # deferred so `kvplan --help` stays instant
    from planner.plan import compose as perf_plan

    request = plan_request(ctx)
    try:
        dep = inputs.to_deployment(request)
        # the error names --input-tokens; fail() respells it as typed (options.as_typed)
        prompt = None if prompt_tokens is None else inputs.parse_ctx(prompt_tokens, flag=PROMPT_FLAGS[0])
        slo = service_levels(ctx)
        search = None
        if slo.any:  # the simulator only when there are targets (the mission command's start-up)
            from planner.sim import bench as sim_bench

            search = sim_bench.slo_answer
        plan = perf_plan.build_plan(dep, prompt_tokens=prompt, slo=slo, slo_search=search)
        result = with_raised_prefill_note(perf_plan.with_load_knee(plan, dep), request, dep)
    except KvplanError as exc:
        fail(exc)
    rec = result.recommendation
    not_slo = ("memory", "engine limit", "batch")
    slo_batch = rec.max_batch_size if rec.binding_constraint not in not_slo else None
    flags = config_flags(ctx, slo_batch=slo_batch)
    if as_json:
        print_plan_json(result, dep, flags=flags, explain=explain)
        return
    from planner.cli import render as cli_render

    cli_render.print_plan(result, dep, next_lines=cli_render.engine_lines(result, dep, flags=flags))
    if explain:
        cli_render.print_explain(dep, result)


def print_plan_json(result: "Plan", dep: "Deployment", *, flags: str, explain: bool) -> None:
    """The plan as JSON, with the engine's words and the next command as the text prints them, and with
    --explain the decode ledger as data."""
    from planner.plan.payload import plan_payload

    payload = plan_payload(result, dep, flags=flags)
    if explain:
        from planner.cli.render import plan_ledger

        payload["decode_ledger"] = plan_ledger(dep, result).model_dump(mode="json")
    print_json(payload)


def with_raised_prefill_note(result: "Plan", request: "PlanRequest", dep: "Deployment") -> "Plan":
    """The plan with a note when the engine raised the request's --max-prefill-tokens to dep's
    (common.raised_prefill_notes: MindIE's maxPrefillTokens >= maxInputTokenLen, inputs.prefill_budget)."""
    from planner.engines.common import raised_prefill_notes

    notes = raised_prefill_notes(request.max_prefill_tokens, used=dep.max_prefill_tokens)
    return result.model_copy(update={"warnings": [*result.warnings, *notes]}) if notes else result


@default_command(models_app)
def models_list(ctx: typer.Context, as_json: JsonOpt = False, version: VersionOpt = False) -> None:
    """List catalogued model cards (id, aliases, layers, attention, parameters)."""
    from planner.cli import listings

    try:
        listings.print_models(as_json=as_json)
    except KvplanError as exc:
        fail(exc)


@commands.command("cards", cls=FlagCommand)
def cards_list(as_json: JsonOpt = False) -> None:
    """List catalogued hardware profiles (capacity, bandwidth, peaks, dtypes, calibration)."""
    from planner.cli import listings

    try:
        listings.print_cards(as_json=as_json)
    except KvplanError as exc:
        fail(exc)


startup.imports_done()  # the collector, paused for the imports above, runs again (planner/cli/startup.py)


def main() -> None:
    """Entry point for `python -m planner.cli`."""
    app()


if __name__ == "__main__":
    main()
