"""What every `kvplan` command shares: the option definitions (defaults defined once, in planner/inputs.py
and planner/deployment.py), the one way to build a PlanRequest from flags, and the one `fail`.

Importing this module must stay cheap (typer and planner.inputs' light imports only): `kvplan --help`
loads it.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import re
import sys
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from typer._click.exceptions import ClickException
from typer.core import TyperGroup, TyperOption
from typer.exceptions import Abort

from planner import units
from planner.deployment import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_MAX_PREFILL_TOKENS,
    DEFAULT_MEMORY_FRACTION,
    DEFAULT_MTP_ACCEPTANCE_FRACTION,
)
from planner.errors import KvplanError, PlanInputError
from planner.inputs import DEFAULT_CARD, DEFAULT_CTX, DEFAULT_DTYPE, PlanRequest
from planner.kinds import DEFAULT_ENGINE

if TYPE_CHECKING:
    from planner.plan.compose import ServiceLevels

__all__ = [
    "DEFAULT_BLOCK_SIZE_TOKENS",
    "DEFAULT_CARD",
    "DEFAULT_CTX",
    "DEFAULT_DTYPE",
    "DEFAULT_ENGINE",
    "DEFAULT_MAX_PREFILL_TOKENS",
    "DEFAULT_MEMORY_FRACTION",
    "DEFAULT_MTP_ACCEPTANCE_FRACTION",
]

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model id, alias or card YAML path.")]
MaybeModelOpt = Annotated[
    str | None, typer.Option("--model", "-m", help="Model id, alias or card YAML path.")
]
CardOpt = Annotated[str, typer.Option(help="Hardware profile id or path to a profile YAML.")]
DtypeOpt = Annotated[str, typer.Option(help="Weight dtype: bf16, fp16, fp8, int8 (W8A8), w8a16, w4a8, w4a16")]
KvDtypeOpt = Annotated[str | None, typer.Option(help="KV-cache dtype (default: 16-bit activation dtype).")]
TpOpt = Annotated[int, typer.Option(help="Tensor-parallel degree (devices per instance).")]
CtxOpt = Annotated[str, typer.Option("--ctx", help="Context length per sequence: 32768, 32k, 128K.")]
BatchOpt = Annotated[int | None, typer.Option(help="Concurrent sequences (default: the most that fit).")]
BlockOpt = Annotated[int, typer.Option(help="KV block size in tokens (MindIE cacheBlockSize).")]
FractionOpt = Annotated[
    float,
    typer.Option(
        "--memory-fraction",
        "--gpu-memory-utilization",
        help="NPU_MEMORY_FRACTION / vLLM --gpu-memory-utilization: share of memory usable.",
    ),
]
EngineFractionOpt = Annotated[
    float | None,
    typer.Option(
        "--memory-fraction",
        "--gpu-memory-utilization",
        help="Share of device memory the engine may use (default: the engine's, MindIE NPU_MEMORY_FRACTION "
        "0.8, vLLM --gpu-memory-utilization 0.92).",
    ),
]
MemoryOpt = Annotated[float | None, typer.Option(help="Override the card's memory capacity (GiB).")]
BandwidthOpt = Annotated[float | None, typer.Option(help="Override memory bandwidth (GB/s).")]
MtpOpt = Annotated[int, typer.Option(help="MTP speculative draft tokens per step (0: off).")]
AcceptanceOpt = Annotated[float, typer.Option(help="Acceptance rate of each draft token.")]
UncalibratedOpt = Annotated[bool, typer.Option("--uncalibrated", help="Ignore measured coefficients.")]
EngineOpt = Annotated[str, typer.Option(help="Kernel structure: mindie, vllm, transformers.")]
TpotOpt = Annotated[float | None, typer.Option(help="SLO: max time per output token (ms).")]
TtftOpt = Annotated[float | None, typer.Option(help="SLO: max time to first token under load (ms).")]
UserTpsOpt = Annotated[float | None, typer.Option(help="SLO: min tokens/s per user.")]
PrefillTokensOpt = Annotated[
    int | None,
    typer.Option(
        help="Largest prefill batch in tokens, sizes the activation peak (default: max(8192, ctx - "
        "ctx/4), what `kvplan mindie` writes as maxPrefillTokens)."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]
DpOpt = Annotated[int, typer.Option(help="Attention data-parallel groups (each holds its sequences' KV).")]
EpOpt = Annotated[int, typer.Option(help="Expert-parallel degree: routed experts split over ep ranks.")]
PpOpt = Annotated[int, typer.Option(help="Pipeline-parallel stages.")]
NodesOpt = Annotated[int | None, typer.Option(help="Nodes of the instance (default: as the layout needs).")]
NodeSizeOpt = Annotated[int | None, typer.Option(help="Devices per node (default: the card profile's).")]
RedundantOpt = Annotated[int, typer.Option(help="Redundant expert copies for EPLB load balancing.")]


def layout_options(
    dp: DpOpt = 1,
    ep: EpOpt = 1,
    pp: PpOpt = 1,
    nodes: NodesOpt = None,
    devices_per_node: NodeSizeOpt = None,
    redundant_experts: RedundantOpt = 0,
) -> None:
    """The parallel-layout options beyond --tp (a signature template for `with_options`; docs/layouts.md)."""


def speed_options(
    card: CardOpt = DEFAULT_CARD,
    kv_dtype: KvDtypeOpt = None,
    tp: TpOpt = 1,
    mtp: MtpOpt = 0,
    mtp_acceptance: AcceptanceOpt = DEFAULT_MTP_ACCEPTANCE_FRACTION,
    memory_gib: MemoryOpt = None,
    uncalibrated: UncalibratedOpt = False,
) -> None:
    """The deployment options of the speed commands `sweep`, `serve` and `simulate` (a signature template for
    `with_options`)."""


def load_options(
    engine: EngineOpt = DEFAULT_ENGINE, as_json: JsonOpt = False, memory_fraction: EngineFractionOpt = None
) -> None:
    """What the load commands `serve` and `simulate` add (a signature template for `with_options`)."""


def engine_memory_fraction(engine: str, given: float | None) -> float:
    """--memory-fraction when given, else the engine's own default (registry.default_memory_fraction:
    vLLM's gpu_memory_utilization, MindIE's NPU_MEMORY_FRACTION)."""
    if given is not None:
        return given
    from planner.engines import registry
    from planner.kinds import parse_engine

    return registry.default_memory_fraction(parse_engine(engine))


Command = TypeVar("Command", bound=Callable[..., None])


def plan_options(
    card: CardOpt = DEFAULT_CARD,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    kv_dtype: KvDtypeOpt = None,
    batch: BatchOpt = None,
    block_size: BlockOpt = DEFAULT_BLOCK_SIZE_TOKENS,
    memory_fraction: FractionOpt = DEFAULT_MEMORY_FRACTION,
    memory_gib: MemoryOpt = None,
) -> None:
    """The deployment options of every planning command (a signature template for `with_options`)."""


def with_options(*templates: Callable[..., None]) -> Callable[[Command], Command]:
    """Give a command the options of `templates` after its own (its own win on a name clash); the command
    takes them as `**flags` and passes them on (plan_request, ServingOptions), so each is defined once."""

    def decorate(command: Command) -> Command:
        hints = {}
        for function in (*templates, command):
            hints.update(typing.get_type_hints(function, include_extras=True))
        own = [p for p in inspect.signature(command).parameters.values() if p.kind is not p.VAR_KEYWORD]
        names = {p.name for p in own}
        shared = [
            p for t in templates for p in inspect.signature(t).parameters.values() if p.name not in names
        ]
        params = [p.replace(kind=p.KEYWORD_ONLY, annotation=hints[p.name]) for p in (*own, *shared)]
        command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {**hints, "return": None}
        return command

    return decorate


REQUEST_FIELDS = tuple(field.name for field in dataclasses.fields(PlanRequest))


def plan_request(flags: Mapping[str, object], **overrides: object) -> PlanRequest:
    """The PlanRequest of a command: its flag values (pass `locals()`) named as PlanRequest's fields;
    `ctx_len` is --ctx, `uncalibrated` negates `calibrated`; `overrides` replace values the command parsed."""
    values: dict[str, Any] = {name: flags[name] for name in REQUEST_FIELDS if name in flags}
    if "ctx_len" in flags:
        values["ctx"] = flags["ctx_len"]
    if "uncalibrated" in flags:
        values["calibrated"] = not flags["uncalibrated"]
    values.update(overrides)
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


def usage_line(exc: ClickException) -> str:
    """A click usage error as one line, with the rejected value when click's message lacks it."""
    text = one_line(exc.format_message())
    cause = exc.__cause__
    errors = getattr(cause, "errors", None)
    if callable(errors):
        found = [e.get("input") for e in errors() if isinstance(e, dict)]
        if found and f"{found[0]!r}" not in text:
            text += f" (got {found[0]!r})"
    name = getattr(getattr(exc, "param", None), "name", None)
    if isinstance(name, str) and not text.count("-"):
        text = text.replace(name, name.upper())  # an argument: its usage spelling, POINTS_CSV
    return text


_typer_display_type = TyperOption.display_type_rich


def _display_type(self: TyperOption, ctx: Any) -> str | None:
    """The help's type column: nothing for flags (`--json`, `--help`), which take no value; typer 0.29
    prints `<bool>` there, as if the flag wanted one."""
    if self.is_flag and not self.metavar:
        return None
    result: str | None = _typer_display_type(self, ctx)
    return result


TyperOption.display_type_rich = _display_type  # type: ignore[method-assign]


def error_line(exc: ClickException | Abort | KvplanError) -> tuple[str, int]:
    """(one-line message, exit code) of an error that ends a command: a click usage error (its code, 2),
    Ctrl-C (1) or a KvplanError (2 bad input or data, 3 does not fit)."""
    if isinstance(exc, ClickException):
        return usage_line(exc), exc.exit_code
    if isinstance(exc, Abort):
        return "aborted", 1
    return one_line(str(exc)), exc.exit_code


class OneLineErrors(TyperGroup):
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
        except (ClickException, Abort, KvplanError) as exc:
            if not standalone_mode:
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


def positive(value: float | None, flag: str) -> float | None:
    """`value` when None or > 0, else PlanInputError naming the flag."""
    if value is not None and not value > 0:
        raise PlanInputError(f"{flag}: must be > 0 (got {value})")
    if value is not None and not value < math.inf:
        raise PlanInputError(f"{flag}: must be finite (got {value})")
    return value


def ms_to_s(value: float | None, flag: str) -> float | None:
    """A millisecond flag (None or > 0) in seconds."""
    checked = positive(value, flag)
    return None if checked is None else checked * units.MS_S


def slo_options(tpot_ms: TpotOpt = None, ttft_ms: TtftOpt = None, min_user_tps: UserTpsOpt = None) -> None:
    """The service-level options of plan and layout (a signature template for `with_options`)."""


def service_levels(flags: Mapping[str, object]) -> ServiceLevels:
    """The SLOs of a command's slo_options flags (each None or > 0), in seconds and tokens/s."""
    from planner.plan.compose import ServiceLevels

    tpot_ms, ttft_ms, min_user_tps = (typing.cast(float | None, flags[name]) for name in SLO_FLAGS)
    return ServiceLevels(
        tpot_s=ms_to_s(tpot_ms, "--tpot-ms"),
        ttft_s=ms_to_s(ttft_ms, "--ttft-ms"),
        min_user_tokens_per_s=positive(min_user_tps, "--min-user-tps"),
    )


SLO_FLAGS = tuple(inspect.signature(slo_options).parameters)
