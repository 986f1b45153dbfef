"""vLLM / vllm-ascend as the planner asks it: how many sequences its pool holds, its scheduler defaults and
the layouts it runs. The pool arithmetic is planner/engines/vllm/pool.py (docs/engines/vllm-memory.md); the
registry (planner/engines/registry.py) asks this module.
"""

from __future__ import annotations

import math

import numpy as np

from planner import layout
from planner.arrays import IntArray
from planner.deployment import DEFAULT_BLOCK_SIZE_TOKENS, Deployment
from planner.engines import checkpoints, common
from planner.engines.vllm import flags, pool, scheduler, startup
from planner.engines.vllm.scheduler import ADMITS_BEYOND_POOL as ADMITS_BEYOND_POOL
from planner.engines.vllm.scheduler import DP_LOCKSTEP_DENSE as DP_LOCKSTEP_DENSE
from planner.engines.vllm.scheduler import DP_PHASE_VOTE as DP_PHASE_VOTE
from planner.engines.vllm.scheduler import MAX_PROMPTS_PER_PASS as MAX_PROMPTS_PER_PASS
from planner.engines.vllm.scheduler import REQUEST_OVERHEAD_PRIOR_US as REQUEST_OVERHEAD_PRIOR_US
from planner.engines.vllm.scheduler import SCHEDULER as SCHEDULER
from planner.engines.vllm.scheduler import beyond_pool_words as beyond_pool_words
from planner.engines.vllm.scheduler import default_max_batch as default_max_batch
from planner.errors import DoesNotFitError, PlanInputError
from planner.kinds import EngineName
from planner.results import MemoryBreakdown, Plan, Recommendation
from planner.schema import HardwareProfile

# vllm-ascend's P:D proxy keeps only the prefill's kv_transfer_params and streams from the decoder
# (examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py @93dbfa65)
PD_DECODER_STREAMS_FIRST_TOKEN = True
PREFILL_AT_LEAST_INPUT = False  # prompts longer than --max-num-batched-tokens are chunked
MAX_PROMPT_TOKENS: int | None = None  # bounded by --max-model-len only
MODEL_NAME_PATTERN: str | None = None  # --served-model-name: any string
MODEL_NAME_RULE: str | None = None
BATCH_CAP_RULE = "--max-num-seqs <= --max-num-batched-tokens"
DEFAULT_MEMORY_FRACTION = pool.DEFAULT_GPU_MEMORY_UTILIZATION  # vllm/config/cache.py
RUNTIME_SOURCE = "vLLM's start-up: non-torch, rotary caches"  # startup_budget: requested - the rest
# The runtime row is vLLM's start-up non-torch memory, which counts the HCCL groups by its own rule
# (terms.hccl_communicators: 2 x HCCL_BUFFSIZE each on vllm-ascend, a dp-only MoE group only before v0.20,
# none on CUDA), not the layout's one-buffer figure; the MC2 window asks for a larger HCCL_BUFFSIZE, whose
# cost `kvplan vllm` states (args.mc2_window_note)
LAYOUT_BUFFER_NOTES: dict[str, str] = {
    layout.MC2_WINDOW: "runtime counts its group at HCCL_BUFFSIZE 200 MB (`kvplan vllm`: if it needs more)",
    **dict.fromkeys(
        (layout.EXPERT_GROUP_BUFFER, layout.PIPELINE_BUFFER),
        "not added: runtime counts vLLM's HCCL groups its own way (`kvplan vllm` lists them)",
    ),
}
MEMORY_FRACTION_NAME = (
    "--gpu-memory-utilization"  # CacheConfig.gpu_memory_utilization (vllm/config/cache.py:68)
)
STATE_PASSES = 2  # linear-attention state reads + writes per decode step (planner/perf/kernels.py) [assumed]
FUSED_KERNELS = True  # fused decode kernels (planner/perf/kernels.py FUSED)
SUPPORTS_PIPELINE = True  # --pipeline-parallel-size
# With --enable-expert-parallel the MoE outputs are all-gathered over the TP ranks (planner/perf/opcost.py;
# vllm-ascend 182b75ea vllm_ascend/ops/fused_moe/prepare_finalize.py).
GATHERS_MOE_OUTPUTS = True
# TP all-reduces go through torch_npu's HCCL process groups, expanded on the AI CPU unless
# HCCL_OP_EXPANSION_MODE=AIV is set (xLLM-AI/xllm PR #1988): a fit may move allreduce_latency_us
DEVICE_LAUNCHED_COLLECTIVES = False
FITTED_PROFILE_ENGINE: EngineName = "vllm"  # its own fit (hwprofiles/fitted/<card>.vllm.yaml)
# --speculative-config method eagle3 / dflash load a draft model (vllm-ascend spec_decode/)
DRAFT_METHODS: tuple[str, ...] = ("eagle3", "dflash")
# ep is 1 or every rank of the tp x dp group (registry.check_layout, expert_degrees)
EXPERTS_OVER_WHOLE_GROUP: str | None = "vLLM's --enable-expert-parallel splits experts over all tp x dp ranks"


# vllm-ascend has no FP8 KV path for GQA / GDN attention (vllm_ascend/attention/attention_v1.py:1975-2007
# @182b75ea); FP8 KV only on MLA layers of a 950 (attention/mla_v1.py:744-747). int8 KV (C8) comes with an
# msModelSlim checkpoint (quantization/methods/kv_c8.py:108-140), printed as --kv-cache-dtype auto.
# C8 is switched on by the checkpoint's quant_model_description.json alone (kv_cache_type "C8" with
# k_proj.kv_cache_scale entries, or MLA's fa_quant_type: quantization/modelslim_config.py:1034-1052
# @182b75ea), which only msModelSlim writes; vLLM's --kv-cache-dtype has no int8 value, and an HF FP8,
# AWQ or GPTQ checkpoint (or a bf16 one) carries no C8 scales, so vllm-ascend allocates 16-bit KV for it.
# The C8 checkpoints vllm-ascend's tests and tutorials run are W8A8, W4A8 and W4A4 ones (w8a8c8, w4a8c8,
# w4a4c8, e.g. tests/e2e/nightly/multi_node/external_dp/config/GLM-5.1-W8A8C8-128k-1k-90-50-PD.yaml), but the
# switch reads kv_cache_type alone, whatever the weights: any scheme msModelSlim writes may carry it (its
# W8A16 / W4A16, W8A8_MXFP8: DeepSeek-V3.1-w8a8c8-mxfp8). An unquantized (bf16 / fp16 / fp32) checkpoint has
# no description file, so no C8.  [assumed: no msModelSlim KV-only quantization of 16-bit weights]; the
# plan's note (args.dtype_and_cache_notes) says a checkpoint quantized without C8 gets 16-bit KV.
C8_WEIGHT_SCHEMES = ("int8", "w4a8", "w4a4", "w8a16", "w4a16", "fp8")
C8_SOURCE = "vllm-ascend quantization/modelslim_config.py:1034-1052 @182b75ea"
ASCEND_FP8_KV_SOURCE = "vllm-ascend attention_v1.py:1975-2007, mla_v1.py:744-747 @182b75ea"
ASCEND_FP8_KV_CARDS = frozenset({"ascend-950pr", "ascend-950dt"})


def fp8_kv_refusal(dep: Deployment) -> str | None:
    """Why vllm-ascend would not run dep's FP8 KV cache (None when it would, or when not on Ascend)."""
    if dep.kv_dtype.value != "fp8" or dep.hardware.vendor != "huawei":
        return None
    if dep.model.attention_traits.latent_kv and dep.hardware.id in ASCEND_FP8_KV_CARDS:
        return None
    return (
        f"--kv-dtype: vllm-ascend has no FP8 KV cache for {dep.model.attention.upper()} attention on "
        f"{dep.hardware.variant_id} (got fp8, expected auto or int8 from an msModelSlim C8 checkpoint; "
        f"FP8 KV only on MLA layers of a 950; {ASCEND_FP8_KV_SOURCE})"
    )


def int8_kv_refusal(dep: Deployment) -> str | None:
    """Why vLLM would not run dep's int8 KV cache: only vllm-ascend has one (C8), and only from an
    msModelSlim checkpoint, whose weights are one of C8_WEIGHT_SCHEMES (None when it would, or when the KV
    is not int8)."""
    if dep.kv_dtype.value != "int8":
        return None
    scheme = dep.weight_scheme.name
    if dep.hardware.vendor != "huawei":
        return (
            f"--kv-dtype: vLLM's --kv-cache-dtype has no int8 on {dep.hardware.variant_id} (got int8, "
            "expected auto or fp8; INT8 KV (C8) is vllm-ascend's)"
        )
    if scheme in C8_WEIGHT_SCHEMES:
        return None
    return (
        f"--kv-dtype: vllm-ascend has INT8 KV (C8) only from an msModelSlim-quantized checkpoint whose "
        f"quant_model_description.json says kv_cache_type C8 (got int8 with --dtype {scheme}, expected "
        f"--kv-dtype auto, or a quantized --dtype: {', '.join(C8_WEIGHT_SCHEMES)}); {scheme} weights come "
        f"with no C8 scales and get 16-bit KV ({C8_SOURCE})"
    )


def check_kv_dtype(dep: Deployment) -> None:
    """vLLM runs the KV dtypes the card has natively (checked by the core), except FP8 on vllm-ascend
    outside MLA on a 950, and int8 outside vllm-ascend's C8 checkpoints."""
    for refusal in (fp8_kv_refusal(dep), int8_kv_refusal(dep)):
        if refusal is not None:
            raise PlanInputError(refusal)


# vllm-ascend cannot serve fp32: `--dtype float32` fails at its paged-KV cache write (ATB
# ReshapeCacheOperation, ERR00100: bf16/fp16 only), as a user's 910B3 report quotes (found by text search,
# repository not recorded).  [S: one user report; not run here]
def weight_dtype_refusal(dep: Deployment) -> str | None:
    """Why vLLM cannot serve dep's weight dtype on its card (fp32 on vllm-ascend), or None."""
    return common.ascend_fp32_refusal(
        dep,
        refusal=f"--dtype: vllm-ascend cannot serve fp32 on {dep.hardware.id} (got fp32, expected bf16 or "
        f"fp16: its paged-KV cache op takes 16-bit only); use --engine transformers for an eager fp32 stack",
    )


# [DOC] vLLM refuses speculative decoding with --pipeline-parallel-size > 1 (vllm-project/vllm PR #10975
# "PP isn't compatible with speculative decoding yet"; MTP under PP still cannot start: issues #44697, #52069)
SPECULATES_WITH_PIPELINE = False


def check_layout(dep: Deployment) -> None:
    """PlanInputError when speculative decoding is asked of a pipeline-parallel layout
    (SPECULATES_WITH_PIPELINE). The ep rule: EXPERTS_OVER_WHOLE_GROUP (registry.check_layout applies it)."""
    if dep.pp > 1 and dep.mtp_tokens > 0 and not SPECULATES_WITH_PIPELINE:
        raise PlanInputError(
            f"--pp: vLLM runs no speculative decoding with pipeline parallelism (got --pp {dep.pp} with "
            f"{dep.mtp_tokens} speculative tokens, expected --pp 1 or no --mtp / --speculative-config)"
        )


def concurrency(
    dep: Deployment, mem: MemoryBreakdown, *, ctx_tokens: int, available_bytes: int | None = None
) -> float:
    """vLLM's "Maximum concurrency" for requests of ctx_tokens (pool.deployment_pool on the plan's budget,
    or on available_bytes)."""
    built = pool.deployment_pool(
        dep,
        available_bytes=mem.kv_budget_bytes if available_bytes is None else available_bytes,
        max_model_len=ctx_tokens,
        num_spec=dep.mtp_tokens,
    )
    return built.max_concurrency


def seqs_cap(dep: Deployment) -> int:
    """vLLM refuses max_num_batched_tokens < max_num_seqs (scheduler.SEQS_RULE): the batch is capped at
    --max-num-batched-tokens (dep's prefill tokens, the engine's default 2048 on vllm-ascend unless
    --max-prefill-tokens sets it)."""
    return dep.max_prefill_tokens


def seqs_cap_words(dep: Deployment) -> str:
    """The cap and its rule in words (scheduler.seqs_cap_words), for a note or a refusal."""
    return scheduler.seqs_cap_words(seqs_cap(dep))


def seqs_cap_notes(dep: Deployment, *, wanted: int, what: str) -> list[str]:
    """scheduler.seqs_cap_notes at dep's cap."""
    return scheduler.seqs_cap_notes(seqs_cap(dep), wanted=wanted, what=what)


def batch_cap(dep: Deployment) -> int:
    """--max-num-seqs' upper bound: seqs_cap (max_batch_grid never exceeds it)."""
    return seqs_cap(dep)


def max_batch_grid(dep: Deployment, mem: MemoryBreakdown, *, ctx_tokens: IntArray) -> IntArray:
    """min(floor(vLLM's maximum concurrency), --max-num-batched-tokens) at each ctx; with pp > 1 (the pool
    per stage is not modelled) min(the engine-neutral bound floor(kv_budget / per-sequence bytes)
    (common.kv_bound_grid), --max-num-batched-tokens).

    A cell at another ctx is what the plan at that ctx answers: the engine's start-up budget there differs
    from mem's only by the dummy sampler's rows (--max-num-seqs is that ctx's batch), so the cell's budget
    is mem's plus startup.plan_budget(dep at ctx) - startup.plan_budget(dep) (0 at dep's own ctx).
    """
    if dep.pp > 1:  # the cap binds with pipeline stages too (one engine per DP rank, one scheduler)
        return np.minimum(common.kv_bound_grid(dep, mem, ctx_tokens=ctx_tokens), seqs_cap(dep))
    here = None
    flat = []
    for c in ctx_tokens.ravel():
        available = mem.kv_budget_bytes
        if int(c) != dep.ctx_tokens:
            if here is None:
                here = startup.plan_budget(dep, weights_bytes=mem.weights_bytes).available_kv_bytes
            at_ctx = dep.model_copy(update={"ctx_tokens": int(c)})
            there = startup.plan_budget(at_ctx, weights_bytes=mem.weights_bytes).available_kv_bytes
            available += there - here
        held = math.floor(concurrency(dep, mem, ctx_tokens=int(c), available_bytes=available))
        flat.append(min(max(held, 0), seqs_cap(dep)))
    return np.asarray(flat, dtype=np.int64).reshape(ctx_tokens.shape)


def check_holds_one(dep: Deployment, mem: MemoryBreakdown, *, max_batch: int) -> None:
    """DoesNotFitError when vLLM's pool holds less than one request of ctx (vLLM refuses to start)."""
    if max_batch >= 1 or dep.pp > 1:
        return
    held = concurrency(dep, mem, ctx_tokens=dep.ctx_tokens)
    raise DoesNotFitError(
        f"--ctx: vLLM's KV pool holds {held:.2f} requests of {dep.ctx_tokens} tokens "
        f"on {dep.hardware.id} at {layout.describe(dep)} (expected at least 1; vLLM refuses to start)"
    )


def cut_pool(
    dep: Deployment, mem: MemoryBreakdown, *, max_model_len: int
) -> tuple[pool.VllmPool, common.BlockPool]:
    """vLLM's pool on the plan's budget (pool.vllm_pool) and the simulator's view of it: its blocks, per
    sequence the blocks beyond those of the max_model_len tokens of KV (state pages), and the draft tokens'
    slots a decoding sequence allocates ahead (vLLM v1/core/sched/scheduler.py: num_lookahead_tokens =
    num_speculative_tokens where an EAGLE / MTP head or a draft model drafts, passed to allocate_slots for
    running requests; none for a fresh prefill), never past max_model_len (v1/core/kv_cache_manager.py
    allocate_slots: num_tokens_need_slot = min(tokens + num_lookahead_tokens, max_model_len))."""
    settings = pool.deployment_settings(dep, max_model_len=max_model_len, num_spec=dep.mtp_tokens)
    built = pool.vllm_pool(dep.model, settings=settings, available_bytes=mem.kv_budget_bytes)
    kv_blocks = -(-max_model_len // built.block_size_tokens)
    return built, common.BlockPool(
        total_blocks=built.num_blocks,
        state_blocks=max(built.blocks_per_request - kv_blocks, 0),
        block_tokens=built.block_size_tokens,
        lookahead_tokens=settings.num_spec,
        slot_cap_tokens=max_model_len,
    )


def block_pool(dep: Deployment, mem: MemoryBreakdown, *, max_model_len: int) -> common.BlockPool:
    """vLLM's pool as the simulator counts it (cut_pool's view)."""
    return cut_pool(dep, mem, max_model_len=max_model_len)[1]


def sequence_bytes(dep: Deployment, mem: MemoryBreakdown) -> int:
    """Bytes one sequence of ctx takes in vLLM's pool at full length, its state pages included; the drafts'
    lookahead slots stop at max_model_len = ctx (cut_pool), so a full-length sequence holds vLLM's
    blocks_per_request; with pp > 1 (the pool per stage is not modelled) mem.kv_bytes_per_sequence.

    Formula: BlockPool.sequence_blocks(ctx) * block_bytes = (ceil(min(ctx + n, ctx) / B) + state blocks)
             * block_bytes = blocks_per_request * block_bytes
        n  draft tokens (0 without drafts); B block tokens; block_bytes VllmPool.block_bytes (bytes per
           block id: page * layers per group)
    """
    if dep.pp > 1:
        return mem.kv_bytes_per_sequence
    built, view = cut_pool(dep, mem, max_model_len=dep.ctx_tokens)
    return view.sequence_blocks(dep.ctx_tokens) * built.block_bytes


def prefix_cache_block_tokens(dep: Deployment) -> int:
    """Tokens per prefix-cache block: vLLM hashes and hits whole KV blocks (vllm/v1/core/kv_cache_utils.py
    hash_request_tokens: full blocks only), whose size is the engine's block (pool.deployment_block_tokens:
    on hybrid GDN models the aligned block, vllm-ascend's patch_mamba_config.py setting mamba_block_size =
    block_size under --enable-prefix-caching, mamba_cache_mode "align")."""
    return pool.deployment_block_tokens(dep)


def engine_notes(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]:
    """Where --max-num-batched-tokens caps the batch below what the pool holds (seqs_cap_notes; --batch
    given: never, check_batch_cap refused it); a --block-size vLLM does not run (vllm-ascend forces 128-token
    blocks; hybrids compute theirs): the plan is sized at the engine's block, and says so."""
    notes = [] if dep.batch is not None else seqs_cap_notes(dep, wanted=held(dep, mem), what="the pool holds")
    block = pool.deployment_block_tokens(dep)
    if dep.block_size_tokens in (block, DEFAULT_BLOCK_SIZE_TOKENS):
        return notes
    return [
        *notes,
        f"--block-size {dep.block_size_tokens}: vLLM runs this deployment at {block}-token blocks "
        f"({block_rule_words(dep)}); the plan is sized at {block}",
    ]


def held(dep: Deployment, mem: MemoryBreakdown) -> int:
    """Sequences of ctx one DP group's pool holds, before the --max-num-batched-tokens cap: floor(vLLM's
    maximum concurrency); with pp > 1 the engine-neutral bound (common.kv_bound_grid)."""
    if dep.pp > 1:
        return int(common.kv_bound_grid(dep, mem, ctx_tokens=np.asarray([dep.ctx_tokens]))[0])
    return max(math.floor(concurrency(dep, mem, ctx_tokens=dep.ctx_tokens)), 0)


def block_rule_words(dep: Deployment) -> str:
    """Why vLLM picks its block size for the deployment, in a few words (deployment_block_tokens' rule)."""
    if dep.model.linear_attention_layers:
        return "the hybrid rule: one attention page holds one linear-attention state"
    if pool.platform_for(dep.hardware.vendor) == "cuda":
        return "--block-size as given"
    return "vllm-ascend forces 128 with prefix caching or chunked prefill, both on by default"


def startup_budget(dep: Deployment, *, weights_bytes: int) -> common.EngineBudget:
    """The plan's KV budget is the engine's own start-up arithmetic (startup.plan_budget): the activation
    peak vLLM profiles at --max-num-batched-tokens, and everything else it holds back as runtime.

    Formula: runtime = requested - weights - activation - KV budget (bytes), weights the checkpoint's: what
    the engine loads beside them (rotary caches: terms.weights_bytes - weights) is runtime too, so weights,
    activation, runtime and KV budget sum to the requested memory.
    """
    terms = startup.plan_budget(dep, weights_bytes=weights_bytes)
    return common.EngineBudget(
        activation_bytes=terms.activation_bytes,
        runtime_bytes=terms.requested_bytes
        - weights_bytes
        - terms.activation_bytes
        - terms.available_kv_bytes,
        kv_budget_bytes=terms.available_kv_bytes,
    )


def default_prefill_tokens(hardware: HardwareProfile) -> int:
    """`vllm serve`'s default --max-num-batched-tokens on the card (scheduler.card_defaults: 2048 on every
    vllm-ascend release, 8192 on a >= 70 GiB non-A100 GPU); prompts longer than it are chunked."""
    return scheduler.card_defaults(hardware).max_num_batched_tokens


def startup_lines(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]:
    """vLLM / vllm-ascend's start-up arithmetic for the plan, term by term (engines/vllm/startup.py): the
    terms the plan's batch comes from."""
    return startup.plan_lines(dep, terms=startup.plan_budget(dep, weights_bytes=mem.weights_bytes))


def config_words(plan: Plan, dep: Deployment) -> tuple[str, list[tuple[str, str]], str]:
    """The plan as `vllm serve` flags (engines/vllm/flags.py): (title, flags, what `kvplan vllm` still
    needs): --weights-path when kvplan knows no checkpoint of the plan's dtype to name
    (engines/checkpoints.py), so the printed next command runs as printed."""
    known = checkpoints.checkpoint(dep.model, scheme=plan.dtype, alias=dep.model_alias)
    return "vllm serve", flags.serve_words(plan, dep), "" if known else "--weights-path <checkpoint dir>"


def default_memory_fraction_at(
    hardware: HardwareProfile, *, ranks: tuple[int, int, int], prefill_tokens: int | None, drafting: bool
) -> float:
    """DEFAULT_MEMORY_FRACTION whatever the deployment (the engine's setting is one constant)."""
    return DEFAULT_MEMORY_FRACTION
