"""`kvplan`: the command-line interface. Parse -> call the planner -> format. No formulas here.

Expected errors (KvplanError) print one line on stderr and exit 2 (bad input / data) or 3 (does not fit);
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, MutableMapping
from typing import Annotated, Any

import typer
import typer.main
from typer._click import Command

from planner.cli import bench, calibrate, configs, dashboard, layouts, models, perf, simulate
from planner.cli.options import (
    DEFAULT_CTX,
    DEFAULT_ENGINE,
    DEFAULT_MTP_ACCEPTANCE_FRACTION,
    AcceptanceOpt,
    BandwidthOpt,
    CtxOpt,
    EngineOpt,
    MaybeModelOpt,
    MtpOpt,
    OneLineErrors,
    PrefillTokensOpt,
    TpOpt,
    UncalibratedOpt,
    fail,
    layout_options,
    plan_options,
    plan_request,
    print_json,
    service_levels,
    slo_options,
    with_options,
)
from planner.errors import KvplanError, PlanInputError


class _SubCommands(MutableMapping[str, Command]):
    """The root command's sub-commands, built from the full app the first time anything looks at them
    (a sub-command name in the arguments, --help, a typo to suggest a name for)."""

    def __init__(self, app: typer.Typer) -> None:
        self._app = app
        self._commands: dict[str, Command] | None = None

    def _built(self) -> dict[str, Command]:
        if self._commands is None:
            self._commands = dict(typer.main.get_group(self._app).commands)
        return self._commands

    def __getitem__(self, name: str) -> Command:
        return self._built()[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._built()[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())


class _KvplanApp(typer.Typer):
    """The `kvplan` app. Run as a program it builds the root command (the plan) alone and its sub-commands
    only when asked for, so the mission command skips building ~30 commands' options from their
    signatures. Tests that build the command themselves (typer's CliRunner) get every command at once."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        root = copy.copy(self)
        root.registered_commands, root.registered_groups = [], []
        command = typer.main.get_group(root)
        command.commands = _SubCommands(self)
        return command(*args, **kwargs)


app = _KvplanApp(
    name="kvplan",
    cls=OneLineErrors,
    help="Capacity planner for LLM inference on Ascend NPUs: memory, KV cache, speed, MindIE configs.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="List catalogued model cards, or import one from a Hugging Face config.json.")
app.add_typer(models_app, name="models")


@app.callback(invoke_without_command=True)
@with_options(plan_options, layout_options, slo_options)
def plan(
    ctx: typer.Context,
    model: MaybeModelOpt = None,  # required, with a usage hint when missing (below)
    tp: TpOpt = 1,
    ctx_len: CtxOpt = DEFAULT_CTX,
    bandwidth_gbps: BandwidthOpt = None,
    max_prefill_tokens: PrefillTokensOpt = None,
    prompt_tokens: Annotated[
        str | None, typer.Option(help="Prompt length for TTFT (default: --ctx).")
    ] = None,
    mtp: MtpOpt = 0,
    mtp_acceptance: AcceptanceOpt = DEFAULT_MTP_ACCEPTANCE_FRACTION,
    uncalibrated: UncalibratedOpt = False,
    engine: EngineOpt = DEFAULT_ENGINE,
    explain: Annotated[
        bool, typer.Option("--explain", help="Print every term of the decode ledger.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as one JSON object.")] = False,
    **flags: object,
) -> None:
    """Plan memory and speed for one model on one card: `kvplan --model qwen3-27b --ctx 32k --dtype fp8`."""
    if ctx.invoked_subcommand is not None:
        return
    if model is None:
        typer.echo(
            "kvplan: error: --model: required (e.g. kvplan --model qwen3-27b --ctx 32k --dtype fp8; "
            "`kvplan models` lists ids)",
            err=True,
        )
        raise typer.Exit(code=2)
    from planner import inputs  # deferred so `kvplan --help` stays instant
    from planner.plan import compose as perf_plan

    request = plan_request({**locals(), **flags})
    try:
        dep = inputs.to_deployment(request)
        prompt = None if prompt_tokens is None else inputs.parse_ctx(prompt_tokens, flag="--prompt-tokens")
        if prompt is not None and prompt > dep.ctx_tokens:
            raise PlanInputError(
                f"--prompt-tokens: longer than the context (got {prompt}, expected <= --ctx {dep.ctx_tokens})"
            )
        slo = service_levels(flags)
        result = perf_plan.with_load_knee(perf_plan.build_plan(dep, prompt_tokens=prompt, slo=slo), dep)
    except KvplanError as exc:
        fail(exc)
    if as_json:
        print_json(result.json_payload())
        return
    from planner.cli import render as cli_render

    cli_render.print_plan(result, dep)
    if explain:
        cli_render.print_explain(dep, result)


@models_app.callback(invoke_without_command=True)
def models_list(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """List catalogued model cards (id, aliases, layers, attention, parameters)."""
    if ctx.invoked_subcommand is not None:
        return
    from planner.cli import render as cli_render

    try:
        cli_render.print_models(as_json=as_json)
    except KvplanError as exc:
        fail(exc)


@app.command("cards")
def cards_list(as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False) -> None:
    """List catalogued hardware profiles (capacity, bandwidth, peaks, dtypes, calibration)."""
    from planner.cli import render as cli_render

    try:
        cli_render.print_cards(as_json=as_json)
    except KvplanError as exc:
        fail(exc)


models.register(models_app)
for _module in (perf, calibrate, configs, simulate, bench, layouts, dashboard):
    _module.register(app)


def main() -> None:
    """Entry point for `python -m planner.cli`."""
    app()


if __name__ == "__main__":
    main()
