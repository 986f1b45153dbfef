"""`kvplan mindie` and `kvplan vllm`: a serving config from the same plan. Parse -> call -> format.

planner/engines/ builds everything (mindie/config.py, mindie/rules.py, mindie/log.py, vllm/args.py); this
module reads the user's files, writes the output through planner/atomic.py, and prints (MindIE's report on
stderr: planner/cli/mindie_view.py). The deployment comes from the flags through options.plan_request, the
serving options through serving_values: each command lists its flags in its own signature (typer reads them
there), and one builder turns each group into its request.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError

from planner.cli.flags import DRAFT_FLAGS, LAYOUT_FLAGS, MEMORY_FLAGS, ModelOpt, flag_command
from planner.cli.options import (
    CTX_FLAGS,
    PREFILL_FLAGS,
    TP_FLAGS,
    Launch,
    emit_launch,
    fail,
    parse_devices,
    plan_request,
    print_json,
    wants_json,
)
from planner.errors import DataFileError, KvplanError, PlanInputError
from planner.inputs import DEFAULT_CTX, PlanRequest

if TYPE_CHECKING:
    from planner.deployment import Deployment
    from planner.engines.common import Lengths, Options, ServingOptions
    from planner.engines.mindie.config import MindieOptions
    from planner.engines.mindie.log import LogComparison
    from planner.engines.mindie.rules import MindieConfig
    from planner.kinds import EngineName
    from planner.results import Plan


# Each engine's own name for what the config flags set (the shared table words them for all three).
TP_HELP = "Tensor-parallel degree (MindIE worldSize, vLLM --tensor-parallel-size, SGLang --tp-size)."
CTX_HELP = "Tokens per request, 32k (MindIE maxSeqLen, vLLM --max-model-len, SGLang --context-length)."
PREFILL_HELP = (
    "Prompt tokens per prefill pass (maxPrefillTokens, --max-num-batched-tokens, --chunked-prefill-size)."
)
MTP_HELP = "MTP speculative tokens, 0: off (MindIE plugin_params: 1 or 2; vLLM num_speculative_tokens)."


def config_flags(
    tp: Annotated[int, typer.Option(*TP_FLAGS, help=TP_HELP)] = 1,
    ctx_len: Annotated[str, typer.Option(*CTX_FLAGS, help=CTX_HELP)] = DEFAULT_CTX,
    max_prefill_tokens: Annotated[int | None, typer.Option(*PREFILL_FLAGS, help=PREFILL_HELP)] = None,
    mtp: Annotated[int, typer.Option(help=MTP_HELP)] = 0,
) -> None:
    """The flags `mindie`, `vllm` and `sglang` word with each engine's fields (a flag table, never run:
    options.flag_command); the rest are the plan's shared flags (planner/cli/flags.py)."""


# What `mindie` and `vllm` take after their own flags: the plan's memory flags, the serving options
# (planner/engines/common.py ServingOptions), speculative decoding (--mtp worded as above), the plan's speed
# flags (the report prints the plan's speeds) and the layout.
CONFIG_FLAGS = (
    "as_json", *MEMORY_FLAGS, "max_prefill_tokens", "weights_path", "model_name", *DRAFT_FLAGS,
    "prefix_cache", "prefix_cached_fraction", "max_input_tokens", "max_output_tokens", "bandwidth_gbps",
    "uncalibrated", *LAYOUT_FLAGS,
)  # fmt: skip


def _tokens(text: str | None, flag: str) -> int | None:
    from planner import inputs

    return inputs.parse_ctx(text, flag=flag) if text is not None else None


def read_text(path: Path, *, flag: str) -> str:
    """A user's file as text, or DataFileError naming the flag and the file."""
    from planner import readers
    from planner.engines.mindie.rules import MAX_CONFIG_BYTES

    limit = MAX_CONFIG_BYTES if flag == "--base" else readers.DEFAULT_LIMIT_BYTES
    return readers.read_bytes_capped(path, flag=flag, limit_bytes=limit).decode("utf-8-sig", errors="replace")


def build_plan(dep: Deployment, *, prompt_tokens: int) -> Plan:
    """The plan with the roofline's speed (MindIE's schedule times come from it)."""
    from planner.plan import compose as perf_plan

    return perf_plan.build_plan(dep, prompt_tokens=prompt_tokens)


def prepare(request: PlanRequest, options: ServingOptions) -> tuple[Deployment, Lengths]:
    """(Deployment sized with the request lengths, Lengths): maxPrefillTokens drives the activation peak."""
    from planner import inputs
    from planner.engines import registry

    dep = inputs.to_deployment(request)
    registry.check_draft_model(dep)  # before sizing: one line naming --speculative-config
    return registry.sized_deployment(dep, options=options)


def prepared(request: PlanRequest, options: Options) -> tuple[Deployment, Lengths, Options]:
    """prepare()'s deployment and lengths, and the options with its MTP drafts (common.with_drafts)."""
    from planner.engines.common import with_drafts

    dep, lengths = prepare(request, options)
    return dep, lengths, with_drafts(options, dep)


def apply_log(dep: Deployment, lengths: Lengths, log_path: Path) -> tuple[Plan, Deployment, LogComparison]:
    """(corrected plan, corrected deployment, comparison) from a MindIE start-up log."""
    from planner.engines.mindie import config as mindie
    from planner.engines.mindie import log as mindie_log

    plan = build_plan(dep, prompt_tokens=lengths.max_input_tokens)
    prediction = mindie.predict_blocks(plan, lengths=lengths, npu_mem_gib=-1, mtp_drafts=dep.mtp_drafts)
    try:
        figures = mindie_log.parse_mindie_log(read_text(log_path, flag="--from-log"))
    except PlanInputError as exc:
        raise DataFileError(f"--from-log {log_path}: {exc}") from exc
    comparison = mindie_log.compare_with_log(plan, figures=figures, prediction=prediction)
    fixed = mindie_log.corrected_deployment(dep, comparison)
    return build_plan(fixed, prompt_tokens=lengths.max_input_tokens), fixed, comparison


def load_base(base_path: Path | None, version: str) -> MindieConfig:
    """The user's --base config, or kvplan's pinned base for --mindie-version."""
    from planner.engines.mindie import rules as mindie_rules

    if base_path is None:
        return mindie_rules.load_base(version)
    text = read_text(base_path, flag="--base")
    try:
        return mindie_rules.parse_config_text(text, source=str(base_path))
    except RecursionError as exc:
        raise DataFileError(f"--base {base_path}: JSON nested too deeply to read") from exc
    except KvplanError as exc:
        if str(base_path) in str(exc):
            raise
        raise DataFileError(f"--base {base_path}: {exc}") from exc


def resolve_identity(options: MindieOptions, *, has_base: bool) -> MindieOptions:
    """modelWeightPath is required unless --base has one; modelName: named() once the model is found."""
    if has_base or options.weights_path is not None:
        return options
    raise PlanInputError(
        "--weights-path: required to write a MindIE config (got nothing, expected the "
        "checkpoint directory, e.g. /data/models/qwen3-27b); or pass --base config.json"
    )


def named(options: Options, typed: str, *, card_id: str) -> tuple[Options, list[str]]:
    """(the options with the served name every config command uses by default, its note): --model-name as
    given, else registry.default_served_name."""
    from planner.engines import registry

    if options.model_name:
        return options, []
    name, notes = registry.default_served_name(typed, card_id=card_id)
    return options.model_copy(update={"model_name": name}), notes


def register(app: typer.Typer) -> None:
    """Add `mindie`, `vllm` and `sglang` to the kvplan app."""
    front = ("model", ("tp", "ctx_len"))
    mindie = flag_command(front, ("npu_mem_size", CONFIG_FLAGS), family=config_flags)
    app.command("mindie", cls=mindie)(mindie_command)
    launcher = flag_command(front, ("ctx_len", CONFIG_FLAGS), family=config_flags)
    app.command("vllm", cls=launcher)(vllm_command)
    app.command("sglang", cls=launcher)(sglang_command)


def option_error(exc: ValidationError) -> PlanInputError:
    """A pydantic error of an options object as one line naming the flag(s) and the value(s)."""
    parts = [
        f"--{str(e['loc'][0]).replace('_', '-') if e['loc'] else 'option'}: "
        f"{e['msg'].removeprefix('Value error, ')} (got {repr(e.get('input'))[:80]})"
        for e in exc.errors()[:3]
    ]
    return PlanInputError("; ".join(parts))


def base_error(exc: KvplanError, base: Path | None) -> KvplanError:
    """An error about a field of the --base config, prefixed with `--base FILE:` (the file it came from)."""
    if base is None or str(base) in str(exc) or not re.match(r"^[A-Z][A-Za-z]*[.\[:]", str(exc)):
        return exc
    return DataFileError(f"--base {base}: {exc}")


def serving_values(context: typer.Context) -> dict[str, object]:
    """ServingOptions' fields from the command's flags of the same names, token counts parsed ("8k" ->
    8192): the one builder of `mindie`'s and `vllm`'s serving options, as options.plan_request is of their
    deployment."""
    from planner.engines.common import ServingOptions
    from planner.speculation import draft_model

    flags = set(ServingOptions.model_fields) - {"draft_model", "trust_remote_code"}  # not flags: derived
    values: dict[str, object] = {name: context.params[name] for name in flags}
    values["draft_model"] = draft_model(context.params["speculative_config"])
    for name in ("weights_path", "model_name"):
        text = values[name]
        if text is not None and not str(text).strip():
            raise PlanInputError(f"--{name.replace('_', '-')}: empty (got '', expected a non-empty value)")
    for name in ("max_input_tokens", "max_output_tokens"):
        values[name] = _tokens(context.params[name], "--" + name.replace("_", "-"))
    return values


def mindie_command(
    context: typer.Context,
    model: ModelOpt,
    devices: Annotated[str | None, typer.Option(help="npuDeviceIds, e.g. 0,1 (default 0..tp-1).")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write config.json here.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists (keeps .bak).")] = False,
    base: Annotated[Path | None, typer.Option(help="Merge into this existing config.json.")] = None,
    mindie_version: Annotated[str, typer.Option(help="Base layout: 2.x (master) or 1.0.RC3.")] = "2.x",
    from_log: Annotated[Path | None, typer.Option(help="MindIE log: compare, fix the reserve.")] = None,
    npu_mem_size: Annotated[
        str | None,
        typer.Option(
            help="auto (writes npuMemSize -1: MindIE sizes the KV after warm-up) or explicit (writes the "
            "plan's whole GiB); the words, not numbers."
        ),
    ] = None,
) -> None:
    """Write a MindIE Server config.json from the plan and print the plan behind it."""
    from planner import atomic
    from planner.engines.mindie import config as mindie

    request = plan_request(context, engine="mindie")  # re-sized with the request lengths by prepare()
    try:
        atomic.check_new({"-o/--out": out}, force=force)  # before the plan: the error names the flag
        if npu_mem_size not in (None, "auto", "explicit"):
            raise PlanInputError(
                f"--npu-mem-size: unknown mode (got {npu_mem_size!r}, expected auto or explicit)"
            )
        options = mindie.MindieOptions.model_validate(
            {
                "devices": parse_devices(devices),
                **serving_values(context),
                "npu_mem_size": npu_mem_size,
                "mindie_version": mindie_version,
            }
        )
        options = resolve_identity(options, has_base=base is not None)
        run_mindie(request, options, paths=(base, out, from_log), force=force, as_json=wants_json(context))
    except ValidationError as exc:
        fail(option_error(exc))
    except KvplanError as exc:
        fail(base_error(exc, base))


def planned_for_mindie(
    dep: Deployment, lengths: Lengths, log_path: Path | None
) -> tuple[Plan, Deployment, LogComparison | None]:
    """The plan behind the config: corrected from a start-up log when one is given."""
    if log_path is not None:
        return apply_log(dep, lengths, log_path)
    return build_plan(dep, prompt_tokens=lengths.max_input_tokens), dep, None


def run_mindie(
    request: PlanRequest,
    options: MindieOptions,
    *,
    paths: tuple[Path | None, ...],
    force: bool,
    as_json: bool,
) -> None:
    """Plan, (correct from the log,) build, validate, write, print."""
    from planner import atomic
    from planner.engines.mindie import config as mindie
    from planner.engines.mindie import rules as mindie_rules

    base_path, out, log_path = paths
    dep, lengths, options = prepared(request, options)
    name_notes: list[str] = []
    if base_path is None:  # a base's modelName stays
        options, name_notes = named(options, request.model, card_id=dep.model.id)
    check_mindie_drafts(request, options)
    base = load_base(base_path, options.mindie_version)
    plan, dep, comparison = planned_for_mindie(dep, lengths, log_path)
    result = mindie.mindie_config(plan, base=base, lengths=lengths, options=options)
    notes = [*result.notes, *request_notes(request, options, lengths), *name_notes]
    result = result.model_copy(update={"notes": notes})
    backup = out and atomic.write_atomic(out, mindie_rules.render_config(result.config), force=force)
    if as_json:
        payload = {
            "plan": plan.json_payload(),
            "lengths": lengths.model_dump(),
            "mindie": result.model_dump(mode="json"),
            "log": comparison.model_dump(mode="json") if comparison else None,
            "written": str(out) if out else None,
            "backup": str(backup) if backup else None,
        }
        print_json(payload)
        return
    from planner.cli import render as cli_render
    from planner.cli.mindie_view import print_mindie

    # the config alone on stdout: `kvplan mindie ... > config.json`
    with contextlib.redirect_stdout(sys.stderr):
        cli_render.print_plan(plan, dep)
        print_mindie(cli_render.console, plan=plan, result=result, lengths=lengths, comparison=comparison)
    if out is None:
        sys.stdout.write(mindie_rules.render_config(result.config))
    else:
        typer.echo(f"wrote {out}" + (f" (previous file kept as {backup})" if backup else ""), err=True)


def request_notes(request: PlanRequest, options: MindieOptions, lengths: Lengths) -> list[str]:
    """Notes on the request: a --max-prefill-tokens raised to maxInputTokenLen (common.raised_prefill_notes);
    --prefix-cached-fraction counting prefix-cache hits that the MindIE config turns off."""
    from planner.engines.common import raised_prefill_notes

    notes = raised_prefill_notes(options.max_prefill_tokens, used=lengths.max_prefill_tokens)
    if not request.prefix_cached_fraction or options.prefix_cache:
        return notes
    return [
        f"--prefix-cached-fraction {request.prefix_cached_fraction:g}: the plan's TTFT counts prefix-cache "
        "hits, which MindIE makes only with its prefix_cache plugin: add --prefix-cache",
        *notes,
    ]


def check_mindie_drafts(request: PlanRequest, options: MindieOptions) -> None:
    """--speculative-config's MTP drafts within what MindIE's mtp plugin takes, named by that flag (--mtp's
    own range is checked with the config: mindie.check_options)."""
    from planner.engines.mindie.rules import MTP_TOKENS

    if request.speculative_config is not None and options.mtp not in (0, *MTP_TOKENS):
        raise PlanInputError(
            f"--speculative-config: MindIE's mtp plugin takes 1 or 2 speculative tokens (got "
            f"num_speculative_tokens {options.mtp}, expected {' or '.join(map(str, MTP_TOKENS))})"
        )


def vllm_command(
    context: typer.Context,
    model: ModelOpt,
) -> None:
    """Print the `vllm serve` arguments (vllm-ascend) for the same deployment, sized by vLLM's own pool."""
    from planner.engines.vllm import args as vllm_args

    # engine: vLLM's block accounting; re-sized with the request lengths by prepare(); the drafts reach
    # the options (--speculative-config's MTP drafts become vLLM's num_speculative_tokens)
    plan, result, notes = launch_plan(context, "vllm", vllm_args.vllm_args, drafts_in_options=True)
    command = vllm_args.render_command(result)
    comments = vllm_args.summary_lines(result)
    emit_launch(context, plan, result, key="vllm", command=command, comments=comments, notes=notes)


def sglang_command(
    context: typer.Context,
    model: ModelOpt,
) -> None:
    """Print the `python -m sglang.launch_server` command (SGLang, its Ascend backend on NPUs) of the plan."""
    from planner.engines.sglang import launch

    plan, result, notes = launch_plan(context, "sglang", launch.launch_args, drafts_in_options=False)
    emit_launch(context, plan, result, key="sglang", command=launch.render_command(result), notes=notes)


def launch_plan(
    context: typer.Context, engine: EngineName, make: Callable[..., Launch], *, drafts_in_options: bool
) -> tuple[Plan, Launch, list[str]]:
    """(plan, the engine's launch arguments, notes on the card) for `kvplan vllm` / `kvplan sglang`: the
    request sized with its lengths, the plan at its longest prompt, make(plan, dep, lengths=, options=); one
    error line on bad input. drafts_in_options: the options carry the deployment's drafts (prepared) rather
    than as given. The notes: a --dtype other than the card's checkpoint_dtype (compose), the served name."""
    from planner.engines.common import ServingOptions
    from planner.plan import compose

    request = plan_request(context, engine=engine)
    try:
        options = ServingOptions.model_validate(serving_values(context))
        if drafts_in_options:
            dep, lengths, options = prepared(request, options)
        else:
            dep, lengths = prepare(request, options)
        options, name_notes = named(options, request.model, card_id=dep.model.id)
        plan = build_plan(dep, prompt_tokens=lengths.max_input_tokens)
        notes = compose.dtype_warnings(dep) + name_notes
        return plan, make(plan, dep, lengths=lengths, options=options), notes
    except ValidationError as exc:
        fail(option_error(exc))
    except KvplanError as exc:
        fail(exc)
