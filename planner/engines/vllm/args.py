"""`vllm serve` arguments for a plan, sized by vLLM's own KV-pool accounting (pure).

The budget is the engine's own start-up arithmetic (planner/engines/vllm/startup.py plan_budget: device
total x util - weights - the activation vLLM profiles at --max-num-batched-tokens - non-torch memory), the
plan's memory budget for engine vllm (capacity.memory_breakdown); how vLLM cuts it into blocks is
planner/engines/vllm/pool.py (docs/engines/vllm-memory.md). Mapping to the MindIE config of the same plan
(ascend-mindie-facts.md 1.6):
  --max-model-len           MindIE maxSeqLen (--ctx)
  --max-num-seqs            floor of vLLM's "Maximum concurrency" for max-model-len requests
  --max-num-batched-tokens  the engine's default per step unless --max-prefill-tokens is given (prompts
                            longer than it are chunked; scheduler.scheduler_defaults); MindIE's
                            maxPrefillTokens is >= the longest prompt
  --gpu-memory-utilization  NPU_MEMORY_FRACTION (a share of all memory, as vLLM's util), not npuMemSize
  --block-size              vllm-ascend: 128 for attention-only models; hybrids: computed by the engine
  --kv-cache-dtype          auto (16-bit) or fp8; vllm-ascend's INT8 KV comes with a quantized checkpoint
  --tensor-parallel-size    worldSize (--tp)
  --speculative-config      {"method": "mtp", "num_speculative_tokens": n} with --mtp n or the user's
                            --speculative-config; a draft model's (eagle3, dflash) with its "model" too
  --data-parallel-size, --enable-expert-parallel, ...: layouts beyond TP (planner/engines/layouts.py)
"""

from __future__ import annotations

import json
import math
import shlex

from planner import layout, units
from planner.deployment import Deployment
from planner.engines import checkpoints as ckpt
from planner.engines import common, layouts
from planner.engines.common import Lengths, ServingOptions
from planner.engines.vllm import pool as vm
from planner.engines.vllm import scheduler as vllm_scheduler
from planner.engines.vllm import startup as vllm_startup
from planner.engines.vllm.terms import HCCL_BUFFSIZE_DEFAULT_MIB, hccl_buffer_bytes, hccl_communicators
from planner.errors import DoesNotFitError, PlanInputError
from planner.results import Plan
from planner.schema import Frozen

KV_CACHE_DTYPES = {"bf16": "auto", "fp16": "auto", "fp8": "fp8", "int8": "auto", "fp32": "auto"}
# vLLM's --dtype for a plan whose weights are not the checkpoint's own dtype: fp32 upcasts a 16-bit checkpoint
# (vLLM --dtype choices: auto, half, float16, bfloat16, float, float32). vllm-ascend refuses fp32 before this
# is printed (planner/engines/vllm/batch.weight_dtype_refusal).
# vLLM's --dtype for a plan whose activations are not the checkpoint's usual bfloat16: fp32, and fp16, which
# the Atlas 300I Duo needs ("Atlas 300I DUO uses `float16`", vllm-ascend docs/source/quick_start.md:52
# @182b75ea: NPUPlatform leaves vLLM's supported dtypes as they are, so a bfloat16 config stays bfloat16)
MODEL_DTYPES = {"fp32": "float32", "fp16": "float16"}


class VllmArgs(Frozen):
    """`vllm serve <model> <args>`; value None is a bare flag. pool/log_lines: what vLLM will report."""

    model: str
    args: list[tuple[str, str | None]]
    env: list[tuple[str, str]]  # VAR=value the command needs, prefixed to it
    max_num_seqs: int
    min_gpu_memory_utilization: float | None  # None with pp > 1: the pool per pipeline stage is not modelled
    pool: vm.VllmPool
    log_lines: list[str]
    startup_lines: list[str]
    notes: list[str]


def plan_pool(plan: Plan, dep: Deployment, *, lengths: Lengths, options: ServingOptions) -> vm.VllmPool:
    """vLLM's pool for the plan: the plan's KV budget (the engine's start-up arithmetic) cut into the
    engine's blocks (vendor: platform)."""
    return vm.deployment_pool(
        dep,
        available_bytes=plan.memory.kv_budget_bytes,
        max_model_len=lengths.max_seq_len_tokens,
        prefix_caching=options.prefix_cache,
        num_spec=dep.speculative_tokens,  # MTP's or the draft model's: their layers hold KV in the pool
    )


def min_memory_utilization(
    dep: Deployment, terms: vllm_startup.StartupTerms, pool: vm.VllmPool, *, n_seqs: int
) -> float:
    """Smallest --gpu-memory-utilization (2 decimals, up) whose pool holds n_seqs full-length requests, by
    the engine's start-up terms.

    Formula: (weights + activation + non-torch + graph + cleared + k * n * blocks_per_request * block_bytes)
             / device total; k = 2 where the engine halves what is left (310P), else 1
    """
    return vm.min_gpu_memory_utilization(
        capacity_bytes=terms.device_total_bytes,
        non_kv_bytes=terms.weights_bytes
        + terms.activation_bytes
        + terms.non_torch_bytes
        + terms.graph_bytes
        + terms.cleared_bytes,
        n_seqs=n_seqs,
        pool=pool,
        kv_factor=2 if terms.halved else 1,
    )


def max_num_seqs(pool: vm.VllmPool) -> int:
    """floor(max concurrency); DoesNotFitError when one max-model-len request does not fit (vLLM refuses)."""
    seqs = math.floor(pool.max_concurrency)
    if seqs < 1:
        raise DoesNotFitError(
            f"--ctx: vLLM's KV pool holds {pool.max_concurrency:.2f} requests of "
            f"{pool.max_model_len_tokens} tokens ({pool.num_blocks} blocks, "
            f"{pool.blocks_per_request} needed each): vLLM refuses to start (expected at least 1)"
        )
    return seqs


def vllm_args(plan: Plan, dep: Deployment, *, lengths: Lengths, options: ServingOptions) -> VllmArgs:
    """The vllm serve arguments of the plan, what vLLM will log, and where vLLM and MindIE differ."""
    pool = plan_pool(plan, dep, lengths=lengths, options=options)
    # With pp > 1 the pool per stage is not modelled: the plan's batch (batch.max_batch_grid's rule).
    seqs = max_num_seqs(pool) if dep.pp == 1 else plan.recommendation.max_batch_size // dep.dp
    seqs = min(seqs, lengths.max_prefill_tokens)  # vLLM: max_num_batched_tokens >= max_num_seqs
    args: list[tuple[str, str | None]] = [
        ("--max-model-len", str(lengths.max_seq_len_tokens)),
        ("--max-num-seqs", str(seqs)),
        ("--max-num-batched-tokens", str(lengths.max_prefill_tokens)),
        ("--gpu-memory-utilization", f"{plan.memory_fraction:g}"),
    ]
    if pool.state_groups == 0:
        args.append(("--block-size", str(pool.block_size_tokens)))
    args += [("--kv-cache-dtype", KV_CACHE_DTYPES[plan.kv_dtype]), ("--tensor-parallel-size", str(plan.tp))]
    ascend = pool.platform == "ascend"
    env = long_context_env(dep, lengths=lengths)
    if plan.layout is not None:
        args += layouts.vllm_layout_args(plan.layout, ascend=ascend)
        env += layouts.vllm_layout_env(plan.layout, ascend=ascend)
    args += model_args(plan, dep, options=options)
    model, quantization = served_checkpoint(plan, dep, options)
    if quantization is not None:
        args.append(("--quantization", quantization))
    terms = vllm_startup.plan_budget(dep, weights_bytes=plan.memory.weights_bytes)
    util = min_memory_utilization(dep, terms, pool, n_seqs=seqs) if dep.pp == 1 else None
    return VllmArgs(
        model=model,
        args=args,
        env=env,
        max_num_seqs=seqs,
        min_gpu_memory_utilization=util,
        pool=pool,
        log_lines=vm.log_lines(pool),
        startup_lines=vllm_startup.plan_lines(dep, terms=terms),
        notes=vllm_notes(plan, dep, pool=pool, options=options, util=util, lengths=lengths),
    )


def model_args(plan: Plan, dep: Deployment, *, options: ServingOptions) -> list[tuple[str, str | None]]:
    """The flags about the model and its serving: --dtype (fp32, fp16 activations), --served-model-name,
    --trust-remote-code (the checkpoint's own code loads its config or tokenizer), prefix caching, speculative
    decoding."""
    args: list[tuple[str, str | None]] = []
    if dep.activation_dtype.value in MODEL_DTYPES:
        args.append(("--dtype", MODEL_DTYPES[dep.activation_dtype.value]))
    if options.model_name:
        args.append(("--served-model-name", options.model_name))
    if dep.model.trust_remote_code:
        args.append(("--trust-remote-code", None))
    if options.prefix_cache:
        args.append(("--enable-prefix-caching", None))
    spec = speculative_config(dep, draft_model=options.draft_model)
    if spec is not None:
        args.append(("--speculative-config", spec))
    return args


def long_context_env(dep: Deployment, *, lengths: Lengths) -> list[tuple[str, str]]:
    """VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 when --max-model-len exceeds the model's max_position_embeddings:
    vLLM refuses such a length otherwise ("User-specified max_model_len ... is greater than the derived
    max_model_len", vllm/config/model.py _get_and_verify_max_len, env var in vllm/envs.py)."""
    return [("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")] if beyond_trained_length(dep, lengths=lengths) else []


def beyond_trained_length(dep: Deployment, *, lengths: Lengths) -> bool:
    """True when the served length is longer than the model's max_position_embeddings."""
    return lengths.max_seq_len_tokens > dep.model.max_position_embeddings


def speculative_config(dep: Deployment, *, draft_model: str | None) -> str | None:
    """vLLM's --speculative-config JSON for the deployment's drafts, in vLLM's key names (vllm/config/
    speculative.py SpeculativeConfig: method, model, num_speculative_tokens): None without speculative
    decoding; PlanInputError when a draft-model method (eagle3, dflash) has no "model" to load."""
    if not dep.speculative_tokens:
        return None
    method = dep.draft_method or "mtp"
    if dep.draft_method and draft_model is None:
        raise PlanInputError(
            f'--speculative-config: method {method} needs "model", the draft checkpoint vLLM loads (got '
            f'none, expected e.g. {{"method": "{method}", "model": "<draft repo or path>", '
            f'"num_speculative_tokens": {dep.mtp_tokens}}})'
        )
    spec: dict[str, object] = {"method": method}
    if dep.draft_method:
        spec["model"] = draft_model
    spec["num_speculative_tokens"] = dep.mtp_tokens
    return json.dumps(spec, separators=(",", ":"))


def served_checkpoint(plan: Plan, dep: Deployment, options: ServingOptions) -> tuple[str, str | None]:
    """(model path or repo, --quantization value) whose weights are the plan's dtype
    (planner/engines/checkpoints.py); PlanInputError when none is known and --weights-path is absent."""
    if options.weights_path:
        return options.weights_path, ckpt.quantization_flag(plan.dtype, vendor=dep.hardware.vendor)
    found = ckpt.known_checkpoint(dep.model, scheme=plan.dtype, alias=dep.model_alias)
    return found.repo, found.quantization


def vllm_notes(
    plan: Plan,
    dep: Deployment,
    *,
    pool: vm.VllmPool,
    options: ServingOptions,
    util: float | None,
    lengths: Lengths,
) -> list[str]:
    """Where the vLLM command differs from the MindIE config in meaning, and what kvplan assumed."""
    defaults = vllm_scheduler.card_defaults(dep.hardware)
    printed = min(seqs_of(pool), lengths.max_prefill_tokens)
    notes = [
        f"--gpu-memory-utilization {plan.memory_fraction:g} is kvplan's memory fraction (vLLM's default is "
        f"{vm.DEFAULT_GPU_MEMORY_UTILIZATION:g}); "
        + (
            f"--max-num-seqs {printed} needs at least {util:g}"
            if util is not None
            else "the least that holds --max-num-seqs is not computed with --pp > 1 (the pool per pipeline "
            "stage is not modelled)"
        ),
        f"KV pool ({pool.platform}): {pool.num_blocks} blocks of {pool.block_size_tokens} tokens, "
        f"{pool.blocks_per_request} per request, from the engine's start-up arithmetic below",
    ]
    notes += vllm_scheduler.seqs_cap_notes(
        lengths.max_prefill_tokens, wanted=seqs_of(pool), what="the pool holds"
    )
    if options.max_prefill_tokens is None:
        notes.append(
            f"--max-num-batched-tokens {lengths.max_prefill_tokens} is the engine's own default "
            f"({defaults.reason}); prompts longer than it are chunked (MindIE's maxPrefillTokens is "
            "max(8192, the longest prompt)); the activation profile is taken at it"
        )
    if pool.state_groups:
        notes.append(block_size_note(pool))
    elif pool.block_size_tokens != plan.block_size_tokens:
        notes.append(
            f"--block-size: vllm-ascend forces {pool.block_size_tokens} with prefix caching or chunked "
            f"prefill on (got {plan.block_size_tokens})"
        )
    notes += dtype_and_cache_notes(plan, dep, options) + model_notes(dep, lengths=lengths)
    notes += mc2_window_note(plan, dep, pool=pool)
    if plan.layout is not None:
        notes += layouts.vllm_layout_notes(plan.layout)
    return notes


def mc2_window_note(plan: Plan, dep: Deployment, *, pool: vm.VllmPool) -> list[str]:
    """With expert parallelism on Ascend: the MoE dispatch (MC2) window a rank needs against HCCL's default
    HCCL_BUFFSIZE (200 MB, what the plan's non-torch memory counts per communicator buffer), and the full-
    length requests the pool holds once every communicator's 2 buffers grow to it.

    Formula: requests = ((kv_budget - C * 2 * (W - 200 MiB)) // block_bytes) // per_request
        C  terms.hccl_communicators of the deployment;  W the window, MiB (layout.mc2_window_bytes)
    """
    if not (dep.model.is_moe and dep.ep > 1 and dep.hardware.vendor == "huawei"):
        return []
    window_mib = math.ceil(layout.mc2_window_bytes(dep) / units.MIB_BYTES)
    if window_mib <= HCCL_BUFFSIZE_DEFAULT_MIB:
        return []
    version = vllm_scheduler.version_for_card(dep.hardware)
    comms = hccl_communicators(
        tp=dep.tp, dp=dep.dp, moe=True, ep=True, moe_groups_need_ep=version.moe_groups_need_ep, pp=dep.pp
    )
    extra = hccl_buffer_bytes(comms, buffsize_mib=window_mib) - hccl_buffer_bytes(comms)
    left = vm.blocks_in_pool(
        plan.memory.kv_budget_bytes - extra, page_bytes=pool.block_bytes, layers_per_group=1
    )
    return [
        f"MoE dispatch (MC2) needs a {window_mib} MB window per rank (CANN aclnnMoeDistributeDispatch; "
        f"planner/layout.mc2_window_bytes): export HCCL_BUFFSIZE={window_mib} or more, as vllm-ascend's EP "
        f"recipes do (200-1024). The figures above count HCCL's default {HCCL_BUFFSIZE_DEFAULT_MIB}: at "
        f"{window_mib} its {comms} communicators hold {units.fmt_gib(extra)} more, and the pool "
        f"{left // pool.blocks_per_request} full-length requests (lower --max-num-seqs to match)"
    ]


def model_notes(dep: Deployment, *, lengths: Lengths) -> list[str]:
    """A compressed-attention pool kvplan sizes by bytes; a --max-model-len beyond the trained length."""
    notes = []
    if dep.model.attention_traits.compressed_kv:
        notes.append(
            "KV pool of a compressed-attention model (DeepSeek-V4) sized by its cache's bytes "
            "(engines/vllm/pool.compressed_pool): vllm-ascend's own page layout is not modelled, so the "
            "logged figures may differ"
        )
    if beyond_trained_length(dep, lengths=lengths):
        notes.append(
            f"--max-model-len {lengths.max_seq_len_tokens} is beyond {dep.model.id}'s "
            f"max_position_embeddings {dep.model.max_position_embeddings}: vLLM refuses it without "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (set on the command); past the trained length quality needs "
            "the model's rope scaling (e.g. YaRN through --hf-overrides)"
        )
    return notes


def seqs_of(pool: vm.VllmPool) -> int:
    """floor(max concurrency), for notes."""
    return math.floor(pool.max_concurrency)


def block_size_note(pool: vm.VllmPool) -> str:
    """Hybrid models: vLLM computes the block size; vllm-ascend's rule wastes about half a state page."""
    note = (
        f"--block-size is not printed: vLLM sets {pool.block_size_tokens} tokens for this hybrid model "
        f"so one attention page ({pool.page_bytes} B) holds one linear-attention state"
    )
    if pool.platform == "ascend":
        note += " (vllm-ascend sizes it from the K half only, issue #7393: about 2x the state per page)"
    return note


def dtype_and_cache_notes(plan: Plan, dep: Deployment, options: ServingOptions) -> list[str]:
    """int8 KV and vLLM's prefix-caching default."""
    notes: list[str] = []
    if plan.kv_dtype == "int8":
        notes.append(
            "--kv-cache-dtype: vLLM has no int8 choice, so auto is printed; vllm-ascend's INT8 KV cache (C8) "
            "is switched on by the msModelSlim checkpoint's quant_model_description.json (kv_cache_type C8): "
            "one quantized without C8 gets 16-bit KV and fewer sequences than planned"
        )
    if not options.prefix_cache and dep.model.linear_attention_layers == 0:
        notes.append(
            "vLLM V1 enables prefix caching by default for this model (MindIE does not); add "
            "--no-enable-prefix-caching to match the MindIE config"
        )
    return notes


def render_command(result: VllmArgs) -> str:
    """A copy-pasteable shell command, one argument per line, its environment (VAR=value) before it."""
    env = "".join(f"{name}={shlex.quote(value)} " for name, value in result.env)
    return common.shell_command(f"{env}vllm serve {shlex.quote(result.model)}", result.args)


def summary_lines(result: VllmArgs) -> list[str]:
    """What to check at start-up: vLLM's two log lines and the smallest utilisation for --max-num-seqs."""
    return [
        "vLLM will log at start-up:",
        *(f"  {line}" for line in result.log_lines),
        f"--max-num-seqs {result.max_num_seqs} needs --gpu-memory-utilization >= "
        f"{result.min_gpu_memory_utilization:g} ({result.pool.platform} block accounting)"
        if result.min_gpu_memory_utilization is not None
        else f"--max-num-seqs {result.max_num_seqs}: the least --gpu-memory-utilization is not computed with "
        "--pp > 1 (the pool per pipeline stage is not modelled)",
        *result.startup_lines,
    ]
