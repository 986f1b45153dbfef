"""`kvplan`: the command-line interface. Parse -> call the planner -> format. No formulas here.

Expected errors (KvplanError) print one line on stderr and exit 2 (bad input / data) or 3 (does not fit);
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Annotated, NoReturn

import typer

from planner.errors import KvplanError, PlanInputError
from planner.inputs import DEFAULT_CARD, DEFAULT_DTYPE, PlanRequest

app = typer.Typer(
    name="kvplan",
    help="Capacity planner for LLM inference on Ascend NPUs: memory, KV cache, speed, MindIE configs.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="List catalogued model cards, or import one from a Hugging Face config.json.")
app.add_typer(models_app, name="models")
importlib.import_module("planner.cli_models").register_models(models_app)  # `kvplan models import`

# Sub-command modules each define register(app); importing them must stay cheap (no torch, no plotly).
COMMAND_MODULES = ("planner.cli_perf", "planner.cli_calibrate", "planner.cli_mindie")


def fail(exc: KvplanError) -> NoReturn:
    """Print an expected error as one line on stderr and exit with its code."""
    typer.echo(f"kvplan: error: {exc}", err=True)
    raise typer.Exit(code=exc.exit_code)


def print_json(payload: object) -> None:
    """Write a JSON document to stdout."""
    sys.stdout.write(json.dumps(payload, indent=2) + "\n")


def _positive(value: float | None, flag: str) -> float | None:
    if value is not None and not value > 0:
        raise PlanInputError(f"{flag}: must be > 0 (got {value})")
    return value


def _ms_to_s(value: float | None, flag: str) -> float | None:
    from planner import units

    checked = _positive(value, flag)
    return None if checked is None else checked * units.MS_S


@app.callback(invoke_without_command=True)
def plan(
    ctx: typer.Context,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model id, alias or card YAML path.")
    ] = None,
    card: Annotated[str, typer.Option(help="Hardware profile id or path to a profile YAML.")] = DEFAULT_CARD,
    dtype: Annotated[
        str, typer.Option(help="Weight dtype: bf16, fp16, fp8, int8 (W8A8), w8a16, w4a16.")
    ] = DEFAULT_DTYPE,
    kv_dtype: Annotated[
        str | None, typer.Option(help="KV-cache dtype (default: 16-bit activation dtype).")
    ] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree (devices per instance).")] = 1,
    ctx_len: Annotated[
        str, typer.Option("--ctx", help="Context length per sequence: 32768, 32k, 128K.")
    ] = "4k",
    batch: Annotated[
        int | None, typer.Option(help="Concurrent sequences (default: the most that fit).")
    ] = None,
    block_size: Annotated[int, typer.Option(help="KV block size in tokens (MindIE cacheBlockSize).")] = 128,
    memory_fraction: Annotated[
        float, typer.Option(help="NPU_MEMORY_FRACTION: share of memory usable.")
    ] = 0.8,
    memory_gib: Annotated[
        float | None, typer.Option(help="Override the card's memory capacity (GiB).")
    ] = None,
    bandwidth_gbps: Annotated[float | None, typer.Option(help="Override memory bandwidth (GB/s).")] = None,
    max_prefill_tokens: Annotated[
        int, typer.Option(help="Largest prefill batch in tokens (activation peak).")
    ] = 8192,
    prompt_tokens: Annotated[
        str | None, typer.Option(help="Prompt length for TTFT (default: --ctx).")
    ] = None,
    mtp: Annotated[int, typer.Option(help="MTP speculative draft tokens per step (0: off).")] = 0,
    mtp_acceptance: Annotated[float, typer.Option(help="Acceptance rate of each draft token.")] = 0.7,
    tpot_ms: Annotated[float | None, typer.Option(help="SLO: max time per output token (ms).")] = None,
    ttft_ms: Annotated[
        float | None, typer.Option(help="SLO: max time to first token under load (ms).")
    ] = None,
    min_user_tps: Annotated[float | None, typer.Option(help="SLO: min tokens/s per user.")] = None,
    uncalibrated: Annotated[
        bool, typer.Option("--uncalibrated", help="Ignore measured coefficients.")
    ] = False,
    engine: Annotated[str, typer.Option(help="Kernel structure: mindie, vllm, transformers.")] = "mindie",
    explain: Annotated[
        bool, typer.Option("--explain", help="Print every term of the decode ledger.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as one JSON object.")] = False,
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
    from planner import capacity, inputs  # deferred so `kvplan --help` stays instant

    request = PlanRequest(
        model=model,
        card=card,
        dtype=dtype,
        kv_dtype=kv_dtype,
        tp=tp,
        ctx=ctx_len,
        batch=batch,
        block_size=block_size,
        memory_fraction=memory_fraction,
        memory_gib=memory_gib,
        bandwidth_gbps=bandwidth_gbps,
        max_prefill_tokens=max_prefill_tokens,
        mtp=mtp,
        mtp_acceptance=mtp_acceptance,
        calibrated=not uncalibrated,
        engine=engine,
    )
    try:
        dep = inputs.to_deployment(request)
        prompt = inputs.parse_ctx(prompt_tokens, flag="--prompt-tokens") if prompt_tokens else None
        slo = capacity.ServiceLevels(
            tpot_s=_ms_to_s(tpot_ms, "--tpot-ms"),
            ttft_s=_ms_to_s(ttft_ms, "--ttft-ms"),
            min_user_tokens_per_s=_positive(min_user_tps, "--min-user-tps"),
        )
        result = capacity.build_plan(dep, prompt_tokens=prompt, slo=slo)
    except KvplanError as exc:
        fail(exc)
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    from planner import cli_render

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
    from planner import cli_render

    try:
        cli_render.print_models(as_json=as_json)
    except KvplanError as exc:
        fail(exc)


@app.command("cards")
def cards_list(as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False) -> None:
    """List catalogued hardware profiles (capacity, bandwidth, peaks, dtypes, calibration)."""
    from planner import cli_render

    try:
        cli_render.print_cards(as_json=as_json)
    except KvplanError as exc:
        fail(exc)


def _register_command_modules() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(app)


_register_command_modules()


def main() -> None:
    """Entry point for `python -m planner.cli`."""
    app()


if __name__ == "__main__":
    main()
