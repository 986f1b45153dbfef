"""The flags several `kvplan` commands share, each defined once: its spelling, help and default are one entry
of `shared_flags` below (a flag table: a function typer reads like any command's, never run), and each
command names the groups it takes and where they stand in its help (`flag_command` placements). A command's
own flags stay in its own signature; planner/cli/options.py's command classes put the placed ones among them
and leave their values in the context's params, where options.plan_request builds the typed request.

Adding a flag: one that several commands take is one entry in `shared_flags` plus its name in the group
(tuple below) or placement that carries it; a flag of one command is one parameter in its own signature.
A flag named as a PlanRequest field reaches the request through plan_request with no other change.
"""

from __future__ import annotations

from typing import Annotated

import typer

from planner.cli.options import (  # the flags' spellings live with the error printer (options.as_typed)
    BATCH_FLAGS,
    CTX_FLAGS,
    FRACTION_FLAGS,
    KV_DTYPE_FLAGS,
    PREFILL_FLAGS,
    TP_FLAGS,
    FlagCommand,
    FlagTable,
    JsonOpt,
    Placement,
)
from planner.deployment import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_MTP_ACCEPTANCE_FRACTION,
)
from planner.dtypes import WEIGHT_SCHEMES
from planner.inputs import DEFAULT_CARD, DEFAULT_CTX, DEFAULT_DTYPE
from planner.kinds import DEFAULT_ENGINE

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model id, alias or card YAML path.")]
MaybeModelOpt = Annotated[
    str | None, typer.Option("--model", "-m", help="Model id, alias or card YAML path.")
]
# Aliases: the spelling vLLM users already type (vllm serve --help) names the same thing here.
# --dtype names every weight scheme kvplan plans, read from the scheme table (planner/dtypes.py), so a new
# scheme reaches every command's help; aliases (w8a8, awq, ...) are accepted too.
WEIGHT_DTYPES_HELP = (
    "auto (the card's 16-bit dtype: bf16, else fp16), " + ", ".join(WEIGHT_SCHEMES) + " (int8 is W8A8)"
)
DtypeOpt = Annotated[str, typer.Option(help=f"Weight dtype: {WEIGHT_DTYPES_HELP}.")]
# The shared flags `kvplan bench import` takes too (with its own defaults).
CardOpt = Annotated[str, typer.Option(help="Hardware profile id or path to a profile YAML.")]
KvDtypeOpt = Annotated[
    str | None,
    typer.Option(
        *KV_DTYPE_FLAGS,
        help="KV-cache dtype: auto (the 16-bit activation dtype, the default), bf16, fp16, fp8 or int8, as "
        "the engine and card take them (MindIE: int8 C8 where documented; vLLM: fp8, and int8 C8 with a "
        "quantized --dtype from an msModelSlim C8 checkpoint).",
    ),
]
TpOpt = Annotated[int, typer.Option(*TP_FLAGS, help="Tensor-parallel degree (devices per instance).")]
MtpOpt = Annotated[int, typer.Option(help="MTP speculative draft tokens per step (0: off).")]
DpOpt = Annotated[int, typer.Option(help="Attention data-parallel groups (each holds its sequences' KV).")]
EpOpt = Annotated[int, typer.Option(help="Expert-parallel degree: routed experts split over ep ranks.")]
# --ctx of the load commands (`kvplan serve`, `kvplan simulate`): the engine's configured context, not the
# plan's memory-sizing context (shared_flags); parsed by the command (inputs.parse_ctx)
EngineCtxOpt = Annotated[
    str | None,
    typer.Option(
        *CTX_FLAGS,
        help="Context length the engine is configured with (vLLM --max-model-len, MindIE maxSeqLen), >= the "
        "longest request; sizes the memory check (default: the longest request's input + output tokens).",
    ),
]
# --max-prefill-tokens of the plan and `kvplan serve` (config commands word it per engine: cli/configs.py);
# checked once, in planner/inputs.py (1..MAX_PREFILL_TOKENS); the defaults: registry.default_prefill_tokens
PrefillTokensOpt = Annotated[
    int | None,
    typer.Option(
        *PREFILL_FLAGS,
        help="Prompt tokens one prefill pass batches, sizes the activation peak (default: the engine's: vLLM "
        "--max-num-batched-tokens for the card, 2048 on Ascend; SGLang --chunked-prefill-size; MindIE "
        "maxPrefillTokens max(8192, ctx - ctx/4), as `kvplan mindie` writes it).",
    ),
]


def shared_flags(
    card: CardOpt = DEFAULT_CARD,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    kv_dtype: KvDtypeOpt = None,
    tp: TpOpt = 1,
    ctx_len: Annotated[
        str, typer.Option(*CTX_FLAGS, help="Context length per sequence: 32768, 32k, 128K.")
    ] = DEFAULT_CTX,
    batch: Annotated[
        int | None, typer.Option(*BATCH_FLAGS, help="Concurrent sequences (default: the most that fit).")
    ] = None,
    block_size: Annotated[
        int, typer.Option(help="KV block size in tokens (MindIE cacheBlockSize).")
    ] = DEFAULT_BLOCK_SIZE_TOKENS,
    memory_fraction: Annotated[
        float | None,
        typer.Option(
            *FRACTION_FLAGS,
            help="Share of device memory the engine may use (default: the engine's, MindIE "
            "NPU_MEMORY_FRACTION 0.8, vLLM --gpu-memory-utilization 0.92).",
        ),
    ] = None,
    memory_gib: Annotated[
        float | None, typer.Option(help="Override the card's memory capacity (GiB).")
    ] = None,
    bandwidth_gbps: Annotated[float | None, typer.Option(help="Override memory bandwidth (GB/s).")] = None,
    max_prefill_tokens: PrefillTokensOpt = None,
    mtp: MtpOpt = 0,
    mtp_acceptance: Annotated[
        float, typer.Option(help="Acceptance rate of each draft token.")
    ] = DEFAULT_MTP_ACCEPTANCE_FRACTION,
    speculative_config: Annotated[
        str | None,
        typer.Option(
            help='vLLM\'s --speculative-config: \'{"method": "eagle3", "num_speculative_tokens": 3}\' '
            "(method mtp, eagle3 or dflash; a draft model's weights, KV and passes are timed; replaces "
            "--mtp).",
        ),
    ] = None,
    acceptance_rate: Annotated[
        float | None,
        typer.Option(
            help="Draft acceptance rate as vLLM logs it (accepted / drafted tokens; tokens per step = 1 + k "
            "x rate). Default: a per-draft acceptance of 0.7 (--mtp-acceptance's).",
        ),
    ] = None,
    prefix_cached_fraction: Annotated[
        float,
        typer.Option(
            help="Share of each prompt already in the prefix cache, 0..1 (a shared prefix with prefix "
            "caching on): prefill computes only the rest, whole KV blocks hit, the last prompt token always "
            "computed.",
        ),
    ] = 0.0,
    uncalibrated: Annotated[
        bool, typer.Option("--uncalibrated", help="Ignore measured coefficients.")
    ] = False,
    engine: Annotated[
        str, typer.Option(help="Kernel structure: mindie, vllm, transformers, sglang.")
    ] = DEFAULT_ENGINE,
    dp: DpOpt = 1,
    ep: EpOpt = 1,
    pp: Annotated[int, typer.Option(help="Pipeline-parallel stages.")] = 1,
    nodes: Annotated[
        int | None, typer.Option(help="Nodes of the instance (default: as the layout needs).")
    ] = None,
    devices_per_node: Annotated[
        int | None, typer.Option(help="Devices per node (default: the card profile's).")
    ] = None,
    redundant_experts: Annotated[
        int, typer.Option(help="Redundant expert copies for EPLB load balancing.")
    ] = 0,
    tpot_ms: Annotated[float | None, typer.Option(help="SLO: max time per output token (ms).")] = None,
    ttft_ms: Annotated[
        float | None, typer.Option(help="SLO: max time to first token under load (ms).")
    ] = None,
    min_user_tps: Annotated[float | None, typer.Option(help="SLO: min tokens/s per user.")] = None,
    as_json: JsonOpt = False,
    # `kvplan mindie` and `kvplan vllm`: the serving options (planner/engines/common.py ServingOptions)
    weights_path: Annotated[
        str | None, typer.Option(help="modelWeightPath: the checkpoint directory.")
    ] = None,
    model_name: Annotated[
        str | None,
        typer.Option(
            help="Served model name: MindIE modelName, vLLM --served-model-name (default: --model as "
            "typed, else its last path part or the card id, the first MindIE takes)."
        ),
    ] = None,
    prefix_cache: Annotated[
        bool,
        typer.Option(
            "--prefix-cache",
            help="Turn on the engine's prefix cache (MindIE's prefix_cache plugin, vLLM "
            "--enable-prefix-caching).",
        ),
    ] = False,
    max_input_tokens: Annotated[
        str | None,
        typer.Option(
            help="Longest prompt: MindIE maxInputTokenLen and the report's TTFT prompt "
            "(default: ctx - output)."
        ),
    ] = None,
    max_output_tokens: Annotated[
        str | None,
        typer.Option(
            help="Longest output: MindIE maxIterTimes (default: ctx / 4); vLLM and SGLang take "
            "max_tokens per request."
        ),
    ] = None,
) -> None:
    """The table of shared flags (never run): a command takes these by name (`placements`); their values
    reach it in its context's params, under these names, as the PlanRequest fields they fill."""


# The groups commands take together, in the order their help lists them.
MEMORY_FLAGS = ("card", "dtype", "kv_dtype", "batch", "block_size", "memory_fraction", "memory_gib")
LAYOUT_FLAGS = ("dp", "ep", "pp", "nodes", "devices_per_node", "redundant_experts")
SLO_FLAGS = ("tpot_ms", "ttft_ms", "min_user_tps")
DRAFT_FLAGS = ("mtp", "mtp_acceptance", "speculative_config", "acceptance_rate")  # speculative decoding
# `sweep`: the step model (drafts included), the engine and its memory share (the fits column), the layout
STEP_FLAGS = (
    "card", "kv_dtype", "tp", *DRAFT_FLAGS, "memory_gib", "uncalibrated", "engine", "memory_fraction",
    *LAYOUT_FLAGS,
)  # fmt: skip
# `serve` and `simulate`: the step model (drafts included), the engine and its memory share, the layout
LOAD_FLAGS = (
    "card", "kv_dtype", "tp", *DRAFT_FLAGS, "memory_gib", "uncalibrated", "engine", "as_json",
    "memory_fraction", *LAYOUT_FLAGS,
)  # fmt: skip


def flag_command(*placements: Placement, family: FlagTable | None = None) -> type[FlagCommand]:
    """The command class (cls= of app.command) of a command that takes these groups of shared flags, each
    after the flag it names (None: after the command's own), as its help lists them (then --version, as
    every command: options.every_command_flags); `family`: a table of flags a family of commands words its
    own way (configs.py's), looked up before `shared_flags`."""
    tables = (shared_flags,) if family is None else (family, shared_flags)
    return type("FlagCommand", (FlagCommand,), {"placements": placements, "flag_tables": tables})
