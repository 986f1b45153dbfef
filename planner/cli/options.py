"""What every `kvplan` command shares: the option definitions (defaults defined once, in planner/inputs.py
and planner/deployment.py; each command lists the ones it takes and builds its typed request, a
PlanRequest, from them), the command classes (one-line errors, flags shown without a type) and the one
`fail`.

Importing this module must stay cheap (typer and planner.inputs' light imports only): `kvplan --help`
loads it.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Annotated, Any, NoReturn, Protocol, runtime_checkable

import typer
from typer.core import TyperCommand, TyperGroup

from planner import records
from planner.deployment import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_MAX_PREFILL_TOKENS,
    DEFAULT_MEMORY_FRACTION,
    DEFAULT_MTP_ACCEPTANCE_FRACTION,
)
from planner.errors import KvplanError
from planner.inputs import (
    DEFAULT_CARD,
    DEFAULT_CTX,
    DEFAULT_DTYPE,
    PlanRequest,
    ServiceLevels,
    ms_to_s,
    positive,
)
from planner.kinds import DEFAULT_ENGINE

__all__ = [
    "DEFAULT_BLOCK_SIZE_TOKENS",
    "DEFAULT_CARD",
    "DEFAULT_CTX",
    "DEFAULT_DTYPE",
    "DEFAULT_ENGINE",
    "DEFAULT_MAX_PREFILL_TOKENS",
    "DEFAULT_MEMORY_FRACTION",
    "DEFAULT_MTP_ACCEPTANCE_FRACTION",
    "ms_to_s",
    "positive",
]

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model id, alias or card YAML path.")]
MaybeModelOpt = Annotated[
    str | None, typer.Option("--model", "-m", help="Model id, alias or card YAML path.")
]
CardOpt = Annotated[str, typer.Option(help="Hardware profile id or path to a profile YAML.")]
DtypeOpt = Annotated[str, typer.Option(help="Weight dtype: bf16, fp16, fp8, int8 (W8A8), w8a16, w4a8, w4a16")]
# Aliases: the spelling vLLM users already type (vllm serve --help) names the same thing here.
KV_DTYPE_FLAGS = ("--kv-dtype", "--kv-cache-dtype")
TP_FLAGS = ("--tp", "--tensor-parallel-size")
CTX_FLAGS = ("--ctx", "--max-model-len")
BATCH_FLAGS = ("--batch", "--max-batch", "--max-num-seqs")  # MindIE maxBatchSize, vLLM max_num_seqs
FRACTION_FLAGS = ("--memory-fraction", "--gpu-memory-utilization")
PREFILL_FLAGS = ("--max-prefill-tokens", "--max-num-batched-tokens")  # MindIE maxPrefillTokens
PROMPT_FLAGS = ("--input-tokens", "--prompt-tokens")  # prompt tokens per request
REQUESTS_FLAGS = ("--requests", "--num-requests")  # requests in a benchmark or simulated run
KvDtypeOpt = Annotated[
    str | None, typer.Option(*KV_DTYPE_FLAGS, help="KV-cache dtype (default: 16-bit activation dtype).")
]
TpOpt = Annotated[int, typer.Option(*TP_FLAGS, help="Tensor-parallel degree (devices per instance).")]
CtxOpt = Annotated[str, typer.Option(*CTX_FLAGS, help="Context length per sequence: 32768, 32k, 128K.")]
BatchOpt = Annotated[
    int | None, typer.Option(*BATCH_FLAGS, help="Concurrent sequences (default: the most that fit).")
]
BlockOpt = Annotated[int, typer.Option(help="KV block size in tokens (MindIE cacheBlockSize).")]
FractionOpt = Annotated[
    float, typer.Option(*FRACTION_FLAGS, help="NPU_MEMORY_FRACTION: share of memory usable.")
]
EngineFractionOpt = Annotated[
    float | None,
    typer.Option(
        *FRACTION_FLAGS,
        help="Share of device memory the engine may use (default: the engine's, MindIE NPU_MEMORY_FRACTION "
        "0.8, vLLM --gpu-memory-utilization 0.92).",
    ),
]
MemoryOpt = Annotated[float | None, typer.Option(help="Override the card's memory capacity (GiB).")]
BandwidthOpt = Annotated[float | None, typer.Option(help="Override memory bandwidth (GB/s).")]
MtpOpt = Annotated[int, typer.Option(help="MTP speculative draft tokens per step (0: off).")]
AcceptanceOpt = Annotated[float, typer.Option(help="Acceptance rate of each draft token.")]
PrefixCachedOpt = Annotated[
    float,
    typer.Option(
        help="Share of each prompt already in the prefix cache, 0..1 (a shared prefix with prefix caching "
        "on): prefill computes only the rest, whole KV blocks hit, the last prompt token always computed.",
    ),
]
SpecConfigOpt = Annotated[
    str | None,
    typer.Option(
        help='vLLM\'s --speculative-config: \'{"method": "eagle3", "num_speculative_tokens": 3}\' '
        "(method mtp, eagle3 or dflash; a draft model's weights, KV and passes are timed; replaces --mtp).",
    ),
]
AcceptanceRateOpt = Annotated[
    float | None,
    typer.Option(
        help="Draft acceptance rate as vLLM logs it (accepted / drafted tokens; tokens per step = 1 + k x "
        "rate). Default: a per-draft acceptance of 0.7 (--mtp-acceptance's).",
    ),
]
UncalibratedOpt = Annotated[bool, typer.Option("--uncalibrated", help="Ignore measured coefficients.")]
EngineOpt = Annotated[str, typer.Option(help="Kernel structure: mindie, vllm, transformers.")]
TpotOpt = Annotated[float | None, typer.Option(help="SLO: max time per output token (ms).")]
TtftOpt = Annotated[float | None, typer.Option(help="SLO: max time to first token under load (ms).")]
UserTpsOpt = Annotated[float | None, typer.Option(help="SLO: min tokens/s per user.")]
PrefillTokensOpt = Annotated[
    int | None,
    typer.Option(
        *PREFILL_FLAGS,
        help="Largest prefill batch in tokens, sizes the activation peak (default: max(8192, ctx - "
        "ctx/4), what `kvplan mindie` writes as maxPrefillTokens).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]
DpOpt = Annotated[int, typer.Option(help="Attention data-parallel groups (each holds its sequences' KV).")]
EpOpt = Annotated[int, typer.Option(help="Expert-parallel degree: routed experts split over ep ranks.")]
PpOpt = Annotated[int, typer.Option(help="Pipeline-parallel stages.")]
NodesOpt = Annotated[int | None, typer.Option(help="Nodes of the instance (default: as the layout needs).")]
NodeSizeOpt = Annotated[int | None, typer.Option(help="Devices per node (default: the card profile's).")]
RedundantOpt = Annotated[int, typer.Option(help="Redundant expert copies for EPLB load balancing.")]


def engine_memory_fraction(engine: str, given: float | None) -> float:
    """--memory-fraction when given, else the engine's own default (registry.default_memory_fraction:
    vLLM's gpu_memory_utilization, MindIE's NPU_MEMORY_FRACTION)."""
    if given is not None:
        return given
    from planner.engines import registry
    from planner.kinds import parse_engine

    return registry.default_memory_fraction(parse_engine(engine))


# The command parameters PlanRequest reads: its fields, under their own names but for --ctx (`ctx_len`: the
# root command's `ctx` is its typer.Context); --uncalibrated is read as calibrated=False.
REQUEST_FIELDS = frozenset(records.field_names(PlanRequest))
REQUEST_NAMES = {"ctx_len": "ctx"}


def plan_request(context: typer.Context, /, **fixed: Any) -> PlanRequest:
    """The command's typed PlanRequest from its deployment flags (the parameters named as its fields,
    --uncalibrated as calibrated=False, --memory-fraction defaulting to the engine's): one builder for every
    command. `fixed`: what the command decides itself over its flags (engine="vllm", the ctx a workload
    needs, None for a same-named flag that means something else, as sweep's --batch list)."""
    flags = {REQUEST_NAMES.get(name, name): value for name, value in context.params.items()}
    if "uncalibrated" in flags:
        flags["calibrated"] = not flags["uncalibrated"]
    values = {name: value for name, value in flags.items() if name in REQUEST_FIELDS} | fixed
    engine = values.get("engine", DEFAULT_ENGINE)
    values["memory_fraction"] = engine_memory_fraction(engine, values.get("memory_fraction"))
    return PlanRequest(**values)


def fail(exc: KvplanError) -> NoReturn:
    """Print an expected error as one line on stderr and exit with its code."""
    typer.echo(f"kvplan: error: {printable(str(exc))}", err=True)
    raise typer.Exit(code=exc.exit_code)


def printable(text: str) -> str:
    """`text` on one line: line breaks become spaces, other control characters their escapes (\\x1d)."""
    chars = (
        " " if c in "\n\r" else c if c.isprintable() else c.encode("unicode_escape").decode() for c in text
    )
    return "".join(chars)


def one_line(text: str) -> str:
    """`text` with its whitespace runs (newlines included) collapsed to single spaces, control escaped."""
    return printable(re.sub(r"[ \t]*[\r\n]+[ \t]*", " ", text)).strip()


def usage_line(exc: UsageError) -> str:
    """A click usage error as one line, with the rejected value when click's message lacks it."""
    text = one_line(exc.format_message())
    cause = getattr(exc, "__cause__", None)
    errors = getattr(cause, "errors", None)
    if callable(errors):
        found = [e.get("input") for e in errors() if isinstance(e, dict)]
        if found and f"{found[0]!r}" not in text:
            text += f" (got {found[0]!r})"
    name = getattr(getattr(exc, "param", None), "name", None)
    if isinstance(name, str) and not text.count("-"):
        text = text.replace(name, name.upper())  # an argument: its usage spelling, POINTS_CSV
    return text


@runtime_checkable
class UsageError(Protocol):
    """A usage error of the CLI library (bad type, unknown option, missing value): what the one-line
    handler reads of it, so kvplan imports none of the library's private modules."""

    exit_code: int

    def format_message(self) -> str:
        """The library's message."""


def without_flag_types(params: list[Any]) -> None:
    """Show no type for flags (`--json`, `--help`) in the help, which take no value; typer 0.29 prints
    `<bool>` there, as if the flag wanted one. An empty metavar is typer's own way to say so."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


class TypelessFlags:
    """What FlagCommand and FlagGroup add to typer's command classes: flags shown without a type."""

    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        without_flag_types(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        """click's --help option, without a type."""
        option = super().get_help_option(ctx)  # type: ignore[misc]
        without_flag_types([] if option is None else [option])
        return option


class FlagCommand(TypelessFlags, TyperCommand):
    """Every `kvplan` sub-command (cls= of app.command): flags shown without a type."""


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
    try:
        text = json.dumps(payload, indent=2, allow_nan=False)
    except ValueError as exc:
        raise KvplanError(f"--json: a result is not a finite number ({exc}); please report this") from exc
    sys.stdout.write(text + "\n")


def service_levels(tpot_ms: float | None, ttft_ms: float | None, min_user_tps: float | None) -> ServiceLevels:
    """The SLOs of --tpot-ms, --ttft-ms and --min-user-tps (each None or > 0), in seconds and tokens/s."""
    return ServiceLevels(
        tpot_s=ms_to_s(tpot_ms, "--tpot-ms"),
        ttft_s=ms_to_s(ttft_ms, "--ttft-ms"),
        min_user_tokens_per_s=positive(min_user_tps, "--min-user-tps"),
    )
