"""What every `kvplan` command shares: the typed request built from its flags (PlanRequest, ServiceLevels),
the command classes (one-line errors, flags shown without a type, the shared flags of planner/cli/flags.py
placed among the command's own) and the one `fail`.

Importing this module must stay cheap (typer and planner.inputs' light imports only): `kvplan --help`
loads it.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, NoReturn, Protocol, TypeVar

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

from planner import records
from planner.cli.repeats import Occurrence, first_conflict, occurrences
from planner.cli.usage import LAST_TYPED_ARGS, UsageError, one_line, printable, usage_line
from planner.errors import KvplanError, PlanInputError
from planner.inputs import PlanRequest, ServiceLevels, ms_to_s, positive

if TYPE_CHECKING:
    from planner.results import Plan

# The command parameters PlanRequest reads: its fields, under their own names but for --ctx (`ctx_len`: the
# root command's `ctx` is its typer.Context); --uncalibrated is read as calibrated=False.
REQUEST_FIELDS = frozenset(records.field_names(PlanRequest))
REQUEST_NAMES = {"ctx_len": "ctx"}


def _acceptance_without_drafts(flags: dict[str, Any]) -> bool:
    """--mtp-acceptance typed in [0, 1] (out of range: inputs' range check speaks first) with no drafts."""
    value = flags.get("mtp_acceptance")
    drafts = flags.get("mtp") or flags.get("speculative_config")
    return isinstance(value, float) and 0.0 <= value <= 1.0 and not drafts


def plan_request(context: typer.Context, /, **fixed: Any) -> PlanRequest:
    """The command's typed PlanRequest from its deployment flags (the parameters named as its fields,
    --uncalibrated as calibrated=False; --memory-fraction left out defaults to the engine's own for the
    deployment, inputs.to_deployment): one builder for every
    command. `fixed`: what the command decides itself over its flags (engine="vllm", the ctx a workload
    needs, None for a same-named flag that means something else, as sweep's --batch list)."""
    flags = {REQUEST_NAMES.get(name, name): value for name, value in context.params.items()}
    if "uncalibrated" in flags:
        flags["calibrated"] = not flags["uncalibrated"]
    source = context.get_parameter_source("mtp_acceptance")
    if "mtp_acceptance" in flags and (source is None or source.name != "COMMANDLINE"):
        flags["mtp_acceptance"] = None  # not typed: the default, and --acceptance-rate may replace it
    elif _acceptance_without_drafts(flags):
        # typed with nothing to accept (the dashboard's slider always sends one: the check is the CLI's)
        raise PlanInputError(
            f"--mtp-acceptance: no speculative decoding to apply it to (got {flags['mtp_acceptance']:g}, "
            "expected with --mtp N or --speculative-config)"
        )
    values = {name: value for name, value in flags.items() if name in REQUEST_FIELDS} | fixed
    return PlanRequest(**values)


def print_version(given: bool) -> None:
    """--version (every command's: every_command_flags): `kvplan X.Y.Z` on stdout, exit 0."""
    if given:
        from planner import __version__

        typer.echo(f"kvplan {__version__}")
        raise typer.Exit()


def fail(exc: KvplanError) -> NoReturn:
    """Print an expected error as one line on stderr and exit with its code."""
    typer.echo(f"kvplan: error: {printable(as_typed(str(exc)))}", err=True)
    raise typer.Exit(code=exc.exit_code)


KV_DTYPE_FLAGS = ("--kv-dtype", "--kv-cache-dtype")
TP_FLAGS = ("--tp", "--tensor-parallel-size")
CTX_FLAGS = ("--ctx", "--max-model-len")
BATCH_FLAGS = ("--batch", "--max-batch", "--max-num-seqs")  # MindIE maxBatchSize, vLLM max_num_seqs
FRACTION_FLAGS = ("--memory-fraction", "--gpu-memory-utilization")
# the engine's prefill budget: MindIE maxPrefillTokens, vLLM max_num_batched_tokens, SGLang
# --chunked-prefill-size; `simulate` also takes its older spelling --max-batched-tokens (SIM_PREFILL_FLAGS)
PREFILL_FLAGS = ("--max-prefill-tokens", "--max-num-batched-tokens")
SIM_PREFILL_FLAGS = (*PREFILL_FLAGS, "--max-batched-tokens")
PROMPT_FLAGS = ("--input-tokens", "--prompt-tokens")  # prompt tokens per request
REQUESTS_FLAGS = ("--requests", "--num-requests")  # requests in a benchmark or simulated run
# one flag's spellings: an error names the one typed (options.as_typed)
ALIAS_GROUPS = (KV_DTYPE_FLAGS, TP_FLAGS, CTX_FLAGS, BATCH_FLAGS, FRACTION_FLAGS, SIM_PREFILL_FLAGS,
                PROMPT_FLAGS, REQUESTS_FLAGS)  # fmt: skip

LEADING_FLAG = re.compile(r"--[a-z0-9-]+(?=[:/ ])")


def as_typed(message: str) -> str:
    """`message` with its leading flag spelled as the user typed it (flags.ALIAS_GROUPS: an error about
    --memory-fraction names --gpu-memory-utilization when that is what the command line says)."""
    found = LEADING_FLAG.match(message)
    if found is None:
        return message
    group = next((g for g in ALIAS_GROUPS if found.group() in g), ())
    typed = [a.split("=", 1)[0] for a in LAST_TYPED_ARGS if a.split("=", 1)[0] in group]
    if not typed or found.group() in typed:
        return message
    return typed[-1] + message[found.end() :]


# (the flag the group follows in the command's help, None: after all of the command's own; the group)
Placement = tuple[str | None, tuple[str, ...]]
FlagTable = Callable[..., None]  # a flag table: a function whose signature typer reads, never run


@functools.cache
def table_params(table: FlagTable, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The click parameters of a flag table (`shared_flags`, or a command family's own, as configs.py's), by
    name, as typer builds them from its signature (built once a process; a parameter holds no parse state,
    so the commands share them). `names`: only those flags, not the whole table: typer 0.29 builds a
    pydantic TypeAdapter for each parameter, and the plan places 27 of shared_flags' 33 entries (building
    all of them cost the mission command ~0.03e9 instructions more, 2 % of its start-up;
    benchmarks/bench_startup.py)."""
    app = typer.Typer(add_completion=False)
    app.command()(table if names is None else table_subset(table, names))
    return {param.name: param for param in typer.main.get_command(app).params}


def table_subset(table: FlagTable, names: tuple[str, ...]) -> FlagTable:
    """A stand-in for a flag table whose signature holds only the flags `names` (typer reads the signature
    and its annotations, nothing else), each as the table declares it."""
    signature = inspect.signature(table, eval_str=True)
    kept = [param for param in signature.parameters.values() if param.name in names]

    def subset(**values: Any) -> None:
        """Never run: typer reads its signature."""

    subset.__signature__ = signature.replace(parameters=kept)  # type: ignore[attr-defined]
    subset.__annotations__ = {param.name: param.annotation for param in kept}
    return subset


def with_shared(
    params: list[Any], placements: tuple[Placement, ...], tables: tuple[FlagTable, ...]
) -> list[Any]:
    """A command's parameters with each placement's flags right after the one it names (None: after the
    command's own), in the order the placements come; each flag from the first of `tables` that has it."""
    wanted = [name for _, names in placements for name in names]
    found: list[dict[str, Any]] = []
    for table in tables:
        declared = inspect.signature(table).parameters
        taken = {name for earlier in found for name in earlier}
        found.append(table_params(table, tuple(n for n in wanted if n in declared and n not in taken)))
    own = {param.name for param in params}
    placed = list(params)
    for after, names in placements:
        names_now = [param.name for param in placed]
        if after is None:
            at = max(i for i, name in enumerate(names_now) if name in own) + 1
        else:
            at = names_now.index(after) + 1
        placed[at:at] = [next(table[name] for table in found if name in table) for name in names]
    return placed


def without_flag_types(params: list[Any]) -> None:
    """Show no type for flags (`--json`, `--help`) in the help, which take no value; typer 0.29 prints
    `<bool>` there, as if the flag wanted one. An empty metavar is typer's own way to say so."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


VersionOpt = Annotated[
    bool,
    typer.Option("--version", is_eager=True, callback=print_version, help="Print kvplan's version and exit."),
]


# --json of every command that prints a result (the plan, its subcommands' shared flags, the listings)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")]


def every_command_flags(version: VersionOpt = False) -> None:
    """The flag table of what every command takes, last before --help (FlagCommand; the root declares
    VersionOpt in its own signature: building this table's typer app would cost the mission command's
    start-up); here, not in planner/cli/flags.py, so a command that takes no other shared flag (bench
    import, models import, calibrate) imports no flag table."""


class TypelessFlags:
    """What FlagCommand and FlagGroup add to typer's command classes: the shared flags the command takes
    (`placements`, planner/cli/flags.py) among its own, --version on every command, and flags shown
    without a type."""

    params: list[Any]
    callback: Any
    placements: ClassVar[tuple[Placement, ...]] = ()
    # where the placed flags are defined (planner/cli/flags.py's tables), looked up in order
    flag_tables: ClassVar[tuple[FlagTable, ...]] = ()
    every_command: ClassVar[tuple[Placement, ...]] = ()  # FlagCommand: every_command_flags, after the rest

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        placements = (*self.placements, *self.every_command)
        if placements:
            own = {param.name for param in self.params}
            tables = (*self.flag_tables, *((every_command_flags,) if self.every_command else ()))
            self.params = with_shared(self.params, placements, tables)
            self.callback = own_values_only(self.callback, own)
        without_flag_types(self.params)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """click's parse_args, keeping the arguments as typed (as_typed names a flag as the user spelled it,
        also for an error reported after the command's context has closed); an output flag typed as a folder
        is refused before the library drops its slash, and an option given twice with different values after
        (repeats.conflict: the library would keep the last), exit 2."""
        LAST_TYPED_ARGS[:] = args
        params = self.get_params(ctx)  # type: ignore[attr-defined]
        found = occurrences(params, list(args), interspersed=ctx.allow_interspersed_args)  # as typed
        refuse_folder_outputs(found)
        rest: list[str] = super().parse_args(ctx, args)  # type: ignore[misc]
        repeated = None if ctx.resilient_parsing else first_conflict(found)
        if repeated is not None:
            fail(PlanInputError(repeated))
        return rest

    def get_help_option(self, ctx: Any) -> Any:
        """click's --help option, without a type."""
        option = super().get_help_option(ctx)  # type: ignore[misc]
        without_flag_types([] if option is None else [option])
        return option


WRITTEN_PARAMS = frozenset({"out", "raw", "timeline_out"})  # the parameters naming a file a command writes


def refuse_folder_outputs(found: dict[str, list[Occurrence]]) -> None:
    """PlanInputError for an output flag typed with a folder's name (`--out dir/`, `--out=dir/.`): the path
    the command receives has lost the slash, and would be written as a file named like the folder."""
    for use in (use for name in WRITTEN_PARAMS for use in found.get(name, ())):
        if use.value.endswith(("/", "/.")):
            raise PlanInputError(
                f"{use.spelling}: a folder, not a file name (got {use.value!r}, expected a file to write, "
                f"e.g. {use.value.removesuffix('.')}NAME)"
            )


def own_values_only(callback: Any, own: set[str | None]) -> Any:
    """`callback` called with the values of the command's own flags alone (its signature's): the shared
    ones stay in the context's params, where plan_request and the other builders read them."""
    if callback is None:
        return None

    @functools.wraps(callback)
    def with_own_values(**values: Any) -> Any:
        return callback(**{name: value for name, value in values.items() if name in own})

    return with_own_values


class FlagCommand(TypelessFlags, TyperCommand):
    """Every `kvplan` sub-command (cls= of app.command): flags shown without a type, --version."""

    every_command = ((None, ("version",)),)


class FlagGroup(TypelessFlags, TyperGroup):
    """A `kvplan` sub-app (models, bench): flags shown without a type, as FlagCommand."""


def error_line(exc: UsageError | typer.Abort | KvplanError) -> tuple[str, int]:
    """(one-line message, exit code) of an error that ends a command: a click usage error (its code, 2),
    Ctrl-C (1) or a KvplanError (2 bad input or data, 3 does not fit)."""
    if isinstance(exc, typer.Abort):
        return "aborted", 1
    if isinstance(exc, KvplanError):
        return one_line(str(exc)), exc.exit_code
    return usage_line(exc), exc.exit_code


class OneLineErrors(FlagGroup):
    """The root command: click usage errors (bad type, unknown option, missing value) and any KvplanError
    that escaped a command end as the one `kvplan: error:` line, exit 2 (3 for does-not-fit), not a box."""

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """click's main, run non-standalone so its errors reach the one-line handler here."""
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except Exception as exc:
            if not standalone_mode or not isinstance(exc, (UsageError, typer.Abort, KvplanError)):
                raise
            message, code = error_line(exc)
            typer.echo(f"kvplan: error: {message}", err=True)
            sys.exit(code)
        if standalone_mode:
            sys.exit(result if isinstance(result, int) else 0)
        return result


def print_json(payload: object) -> None:
    """Write a JSON document to stdout: strict JSON (a NaN or infinity is a bug, never `NaN` output)."""
    import json  # here: the text plan (the mission command) never loads json

    try:
        text = json.dumps(payload, indent=2, allow_nan=False)
    except ValueError as exc:
        raise KvplanError(f"--json: a result is not a finite number ({exc}); please report this") from exc
    sys.stdout.write(text + "\n")


def service_levels(context: typer.Context) -> ServiceLevels:
    """The SLOs of the shared --tpot-ms, --ttft-ms and --min-user-tps (each None or > 0), in seconds and
    tokens/s."""
    return ServiceLevels(
        tpot_s=ms_to_s(context.params["tpot_ms"], "--tpot-ms"),
        ttft_s=ms_to_s(context.params["ttft_ms"], "--ttft-ms"),
        min_user_tokens_per_s=positive(context.params["min_user_tps"], "--min-user-tps"),
    )


def wants_json(context: typer.Context) -> bool:
    """The shared --json flag: one JSON object on stdout instead of tables."""
    return bool(context.params["as_json"])


class LaunchResult(Protocol):
    """What `kvplan vllm` and `kvplan sglang` print: an engine's launch arguments with notes."""

    @property
    def notes(self) -> list[str]: ...
    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


Launch = TypeVar("Launch", bound=LaunchResult)


def emit_launch(
    context: typer.Context,
    plan: Plan,
    result: LaunchResult,
    *,
    key: str,
    command: str,
    comments: Sequence[str] = (),
    notes: Sequence[str] = (),
) -> None:
    """The launch command alone on stdout (then `comments` as # lines) and `notes`, then its own, on
    stderr, or with --json {plan, <key>: the arguments (its own notes inside), command, notes}."""
    if wants_json(context):
        payload = {"plan": plan.json_payload(), key: result.model_dump(mode="json"), "command": command}
        print_json({**payload, "notes": list(notes)})
        return
    sys.stdout.write(command + "\n")
    sys.stdout.write("".join(f"# {line}\n" for line in comments))
    for note in [*notes, *result.notes]:
        typer.echo(f"note: {note}", err=True)


def parse_devices(text: str | None) -> list[int] | None:
    """ "0,1" -> [0, 1]; PlanInputError naming --devices otherwise."""
    if text is None:
        return None
    try:
        ids = [int(part) for part in text.split(",")]
    except ValueError:
        raise PlanInputError(
            f"--devices: not a comma-separated list of NPU ids (got {text!r}, expected e.g. 0,1)"
        ) from None
    if any(not 0 <= i <= MAX_NPU_ID for i in ids):
        raise PlanInputError(f"--devices: NPU id out of range (got {text[:60]!r}, expected 0..{MAX_NPU_ID})")
    return ids


MAX_NPU_ID = 4095  # [assumed: far above the 16 NPUs of one Atlas node; a 20-digit id is a typo]
