"""MindIE's memory and scheduler facts: its block rule, reserved block, batch cap, KV dtypes, defaults.

Sources: [DOC] = MindIE-LLM docs/zh/user_guide/user_manual/service_parameter_configuration.md (master
8b4871ad31f5); [KV] = mindie_llm/text_generator/utils/kvcache_settings.py; [ROUTER] = the Python router's
initialize() (mindie_llm/connector/request_router/router_impl.py); summarised in ascend-mindie-facts.md
section 1 and docs/engines/mindie-memory.md; the scheduler's facts are in engines/mindie/scheduler.py
(re-exported here). The registry asks this module; nothing else names these facts.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from planner import deployment, layout, units
from planner.arrays import IntArray
from planner.deployment import Deployment
from planner.engines import common
from planner.engines.mindie import limits, rules
from planner.engines.mindie.scheduler import ADMITS_BEYOND_POOL as ADMITS_BEYOND_POOL
from planner.engines.mindie.scheduler import DP_LOCKSTEP_DENSE as DP_LOCKSTEP_DENSE
from planner.engines.mindie.scheduler import DP_PHASE_VOTE as DP_PHASE_VOTE
from planner.engines.mindie.scheduler import MAX_PROMPTS_PER_PASS as MAX_PROMPTS_PER_PASS
from planner.engines.mindie.scheduler import REQUEST_OVERHEAD_PRIOR_US as REQUEST_OVERHEAD_PRIOR_US
from planner.engines.mindie.scheduler import SCHEDULER as SCHEDULER
from planner.engines.mindie.scheduler import beyond_pool_words as beyond_pool_words
from planner.errors import DoesNotFitError, KvplanError, PlanInputError
from planner.kinds import EngineName
from planner.results import MemoryBreakdown, Plan, Recommendation

# The router reports npuBlockNum = num_npu_blocks - 1: the last block is kept for dummy batches ([ROUTER]);
# with data parallelism it takes one more first (mindie_llm/connector/request_router/router_impl.py
# initialize(): `if ...mapping.has_dp(): num_npu_blocks = num_npu_blocks - 1`, MindIE-LLM @419d8029).
RESERVED_BLOCKS = 1
DP_RESERVED_BLOCKS = 1


def reserved_blocks(*, dp: int) -> int:
    """Blocks MindIE's router keeps back from npuBlockNum: 1, and 1 more with data parallelism (dp > 1)."""
    return RESERVED_BLOCKS + (DP_RESERVED_BLOCKS if dp > 1 else 0)


# Checkpoints MindIE treats as multimodal: npuMemSize must be explicit whole GiB ([DOC]: -1 not for
# multimodal). [assumed: the facts file lists Qwen3.5 checkpoints as multimodal]
EXPLICIT_NPU_MEM = frozenset({"qwen3.5-27b", "qwen3.5-0.8b"})
# KV dtypes: the activation dtype, or int8 from a C8-quantized checkpoint; no FP8 KV cache
# (mindie_llm/runtime/model_runner/model_runner.py; docs/engines/mindie-memory.md).
KV_DTYPES = ("bf16", "fp16", "int8")
# [assumed] MindIE's P:D TTFT ends at its prefill (its source not checked)
PD_DECODER_STREAMS_FIRST_TOKEN = False
# [DOC] maxPrefillTokens >= maxInputTokenLen (facts 1.2): a smaller --max-prefill-tokens is raised to it
PREFILL_AT_LEAST_INPUT = True
MAX_PROMPT_TOKENS: int | None = rules.MAX_TOKENS  # [DOC] maxInputTokenLen / maxPrefillTokens in [1, 4194304]
MODEL_NAME_PATTERN: str | None = rules.MODEL_NAME_PATTERN  # modelName
MODEL_NAME_RULE: str | None = rules.MODEL_NAME_RULE
BATCH_CAP_RULE = (
    f"MindIE's maxBatchSize: {limits.MAX_BATCH_SIZE} before 3.0.0.beta.3, "
    "or the card's documented range if smaller"
)
DEFAULT_MEMORY_FRACTION = deployment.DEFAULT_MEMORY_FRACTION  # NPU_MEMORY_FRACTION (mindie_llm/utils/env.py)
RUNTIME_SOURCE = "card profile"  # runtime_overhead_gib: MindIE logs no runtime figure to read
LAYOUT_BUFFER_NOTES: dict[str, str] = {}  # all in runtime: capacity.runtime_bytes adds them to the reserve
MEMORY_FRACTION_NAME = "NPU_MEMORY_FRACTION"  # an environment variable (mindie_llm/utils/env.py)
STATE_PASSES = 2  # linear-attention state reads + writes per decode step (planner/perf/kernels.py) [assumed]
FUSED_KERNELS = True  # fused decode kernels (planner/perf/kernels.py FUSED)
SUPPORTS_PIPELINE = False  # kvplan knows no MindIE pipeline-parallel setting
GATHERS_MOE_OUTPUTS = False  # MoE outputs all-reduced, not all-gathered (planner/perf/opcost.py)
# In-node collectives run on LCCL, launched from the device, wherever the card needs no NZ weight layout (A2,
# A3) and npu-smi shows HCCS links, unless MINDIE's hccl_enable is set: NPUSocInfo.communication_backend in
# atb_llm/utils/initial.py (MindIE-LLM examples/atb_models, mirror verylucky01/MindIE-LLM @230a4ff1). So
# they skip the AI-CPU expansion of HCCL ops that a fitted allreduce_latency_us describes, and a fit on
# MindIE rows holds that latency at the profile's value.
DEVICE_LAUNCHED_COLLECTIVES = True
FITTED_PROFILE_ENGINE: EngineName = "mindie"  # its own fit (hwprofiles/fitted/<card>.mindie.yaml)
# [mtp.md] MindIE's speculative plugin drafts with the model's own MTP layers only
DRAFT_METHODS: tuple[str, ...] = ()
EXPERTS_OVER_WHOLE_GROUP: str | None = None  # MindIE's ep divides the MoE group: every candidate degree runs


# MindIE's int8 KV cache (C8) comes with a C8-quantized W8A8 checkpoint; documented for Atlas 800I A2 with
# LLaMA3.1-70B / Qwen2-72B / Qwen2.5-72B-Instruct (MindIE-LLM docs/zh/user_guide/feature/kv_cache_int8.md:7-12
# commit 8b4871ad31f5). DeepSeek's MLA latent has its own int8 path (kvcache_quant_layers, atb_llm
# runner/model_runner.py:290-292, 566-574) on A2/A3. Elsewhere MindIE keeps 16-bit KV.
C8_SOURCE = "MindIE-LLM docs/zh/user_guide/feature/kv_cache_int8.md:7-12"
C8_MODELS = frozenset({"llama-3.1-70b"})  # the documented models kvplan has cards of
MLA_INT8_MODELS = frozenset({"deepseek-v3", "deepseek-r1"})
ATLAS_A2_CARDS = frozenset({"ascend-910b1", "ascend-910b2", "ascend-910b3", "ascend-910b4"})
ATLAS_A3_CARDS = frozenset({"ascend-910c"})


def int8_kv_refusal(dep: Deployment) -> str | None:
    """Why MindIE would not run dep's int8 KV cache (None when it would, or when the KV is not int8)."""
    if dep.kv_dtype.value != "int8":
        return None
    model, card = dep.model.id, dep.hardware.id
    if model in MLA_INT8_MODELS and card in ATLAS_A2_CARDS | ATLAS_A3_CARDS:
        return None
    if model in C8_MODELS and card in ATLAS_A2_CARDS and dep.weight_scheme.name == "int8":
        return None
    return (
        f"--kv-dtype: MindIE's int8 KV cache (C8) is documented only on Atlas 800I A2 with W8A8 checkpoints "
        f"of LLaMA3.1-70B / Qwen2-72B / Qwen2.5-72B-Instruct ({C8_SOURCE}); elsewhere it keeps 16-bit KV "
        f"(got {model} {dep.weight_scheme.name} on {dep.hardware.variant_id}); use --kv-dtype auto"
    )


def check_kv_dtype(dep: Deployment) -> None:
    """PlanInputError when MindIE has no KV cache of dep's KV dtype on this card and checkpoint."""
    if dep.kv_dtype.value not in KV_DTYPES:
        raise PlanInputError(
            f"--kv-dtype: MindIE has no {dep.kv_dtype.value.upper()} KV cache (got {dep.kv_dtype.value}); "
            f"use bf16/fp16 or int8 (C8, needs a quantized checkpoint)"
        )
    refusal = int8_kv_refusal(dep)
    if refusal is not None:
        raise PlanInputError(refusal)


def weight_dtype_refusal(dep: Deployment) -> str | None:
    """Why MindIE cannot serve dep's weight dtype, or None. fp32: its KV cache is the 16-bit activation dtype
    or int8 (KV_DTYPES), and no fp32 serving is documented for its ATB models.  [assumed: not run]"""
    if dep.weight_scheme_name != "fp32":
        return None
    return (
        "--dtype: MindIE serves no fp32 weights (got fp32, expected bf16, fp16 or a quantized scheme: its "
        "KV cache is bf16/fp16 or int8); use --engine transformers for an eager fp32 stack"
    )


def batch_cap(dep: Deployment) -> int:
    """maxBatchSize's upper bound (limits.py): the 5000 MindIE releases before 3.0.0.beta.3 check, or the
    card's documented range when smaller (Atlas 300I Duo: 2000); max_batch_grid never exceeds it."""
    return limits.max_batch_size(card_cap=dep.hardware.mindie_max_batch_size)


def check_layout(dep: Deployment) -> None:
    """PlanInputError for layouts kvplan cannot write a MindIE config for: pipeline parallelism, and a
    block size MindIE's config check refuses (rules.py: cacheBlockSize <= 128, a multiple of 16), so the
    plan never recommends what `kvplan mindie` then refuses with the same flags; so are speculative tokens
    beyond its mtp plugin's (rules.MTP_TOKENS)."""
    if dep.mtp_tokens not in (0, *rules.MTP_TOKENS):
        raise PlanInputError(
            f"--mtp: MindIE's MTP plugin takes 1 or 2 speculative tokens (got {dep.mtp_tokens}, expected "
            "0, 1 or 2); use --engine vllm for more"
        )
    if dep.pp > 1:
        raise PlanInputError(
            f"--pp: kvplan knows no MindIE pipeline-parallel setting (got {dep.pp}, expected 1); "
            f"use --engine vllm"
        )
    block = dep.block_size_tokens
    if block > rules.MAX_BLOCK_TOKENS or block % rules.BLOCK_MULTIPLE:
        raise PlanInputError(
            f"--block-size: MindIE's cacheBlockSize must be a multiple of {rules.BLOCK_MULTIPLE} up to "
            f"{rules.MAX_BLOCK_TOKENS} (got {block}, expected 16, 32, ..., 128); MindIE advises 128, "
            f"or use --engine vllm"
        )
    check_prefill_tokens(dep)


def check_prefill_tokens(dep: Deployment) -> None:
    """PlanInputError when the prefill budget passes MindIE's [1, 4194304] (rules.MAX_TOKENS), naming the flag
    it came from: --ctx when the default for the context (max(8192, ctx - out)) is already over it, else
    --max-prefill-tokens (a larger flag value is the only way past it; options.as_typed respells it)."""
    if dep.max_prefill_tokens <= rules.MAX_TOKENS:
        return
    at_ctx = deployment.default_max_prefill_tokens(dep.ctx_tokens, block_size_tokens=dep.block_size_tokens)
    if at_ctx <= rules.MAX_TOKENS:
        raise PlanInputError(
            f"--max-prefill-tokens: MindIE's maxPrefillTokens is at most {rules.MAX_TOKENS} tokens (got "
            f"{dep.max_prefill_tokens}, expected <= {rules.MAX_TOKENS}); lower it or use --engine vllm"
        )
    raise PlanInputError(
        f"--ctx: MindIE takes prompts (maxInputTokenLen, maxPrefillTokens) of at most {rules.MAX_TOKENS} "
        f"tokens (got a prefill budget of {dep.max_prefill_tokens} for --ctx {dep.ctx_tokens}); lower "
        "--ctx, set `kvplan mindie --max-input-tokens` within it (maxPrefillTokens is raised to the "
        "input), or use --engine vllm"
    )


# How MindIE's block manager holds a sequence (MindIE-LLM src/block_manager/, master 8b4871ad31f5): admission
# takes ceil(prompt / B) blocks (self_attn_block_manager.cpp GetNumRequiredBlocks, CanAllocate), and each
# decode step's tokens first fill the empty slots of the sequence's last block, a new block only when it is
# full (block_table.cpp AppendTokenIds -> EnsureEnoughSlots, GetNumRelatedBlocks). The docs' maxBatchSize
# rule (service_parameter_configuration.md, maxBatchSize row; facts row 10) charges ceil(in / B) +
# ceil(out / B): up to one block more per request, a margin rather than the allocation.
BLOCK_RULE_SOURCE = (
    "MindIE-LLM src/block_manager/self_attn_block_manager.cpp GetNumRequiredBlocks and block_table.cpp "
    "EnsureEnoughSlots @8b4871ad"
)


def lookahead_slots(mtp_drafts: int) -> int:
    """Empty slots MindIE keeps ahead of a decoding sequence for its MTP drafts (speculationGamma).

    Formula: gamma = 0 without MTP, else max(n, 2n - 2) for n = num_speculative_tokens (MindIE-LLM @8b4871a
    model_deploy_config.cpp:122-149 GammaUpdate; scheduler.cpp:50 hands it to the block manager as
    speculativeSlots, which block_table.cpp:253-262 keeps free every decode step).
    """
    return 0 if mtp_drafts <= 0 else max(mtp_drafts, 2 * mtp_drafts - 2)


def blocks_per_sequence(
    seq_tokens: common.IntOrArray, *, block_tokens: int, mtp_drafts: int = 0
) -> common.IntOrArray:
    """KV blocks MindIE's block manager holds for one sequence of seq_tokens (prompt + output) tokens.

    Formula (BLOCK_RULE_SOURCE): ceil((seq_tokens + gamma) / B), B = cacheBlockSize, gamma =
    lookahead_slots(MTP drafts): output tokens fill the prompt's last block before a new one is taken, and
    with MTP the last step keeps gamma slots free past the sequence. The rule the plan, `kvplan mindie` and
    serve share; the simulator grows a decoding sequence block by block to the same ceil((tokens + gamma) /
    B) (block_pool's lookahead_tokens; planner/sim/engine.py push_block_event).
    [assumed: no sequence-parallel ranks (their +1 block)]
    """
    return -(-(seq_tokens + lookahead_slots(mtp_drafts)) // block_tokens)


def documented_blocks_per_request(in_tokens: int, out_tokens: int, *, block_tokens: int) -> int:
    """The docs' blocks per request for maxBatchSize ([DOC] maxBatchSize row): ceil(in / B) + ceil(out / B),
    >= blocks_per_sequence(in + out); `kvplan mindie` prints the batch it gives in a note."""
    return -(-in_tokens // block_tokens) + -(-out_tokens // block_tokens)


def usable_blocks(
    paged_bytes: common.IntOrArray, *, block_bytes: int, model_id: str, dp: int
) -> common.IntOrArray:
    """npuBlockNum: the KV blocks MindIE's router offers (int or int64 array) for `paged_bytes` of KV pool.

    Formula ([KV] L127-150, [ROUTER]): floor(paged / block_bytes) - reserved_blocks(dp), block_bytes = block *
    KV bytes per token per rank; paged floored to whole GiB first for EXPLICIT_NPU_MEM checkpoints
    (npuMemSize is then written in whole GiB).
    """
    if model_id in EXPLICIT_NPU_MEM:
        paged_bytes = paged_bytes // units.GIB_BYTES * units.GIB_BYTES
    return paged_bytes // block_bytes - reserved_blocks(dp=dp)


def batch_holds(
    dep: Deployment, mem: MemoryBreakdown, batch: common.IntOrArray, *, ctx_tokens: common.IntOrArray
) -> npt.NDArray[np.bool_]:
    """Whether MindIE's usable blocks hold `batch` sequences of ctx (ints or int64 arrays that broadcast).

    Formula (docs/engines/mindie-memory.md): usable_blocks(kv_budget - batch * state) >= batch *
    blocks_per_sequence(ctx, MTP drafts) = batch * ceil((ctx + gamma) / block): each sequence's
    linear-attention state is kept outside the blocks (assumed, engine_notes).
    """
    paged = mem.kv_budget_bytes - batch * mem.state_bytes_per_sequence
    per_sequence = blocks_per_sequence(
        ctx_tokens, block_tokens=dep.block_size_tokens, mtp_drafts=dep.mtp_drafts
    )
    usable = usable_blocks(paged, block_bytes=block_bytes(dep, mem), model_id=dep.model.id, dp=dep.dp)
    return np.asarray(usable >= batch * per_sequence)


def block_bytes(dep: Deployment, mem: MemoryBreakdown) -> int:
    """Bytes of one KV block per rank: cacheBlockSize * KV bytes per token (tokens * bytes per token)."""
    return dep.block_size_tokens * mem.kv_bytes_per_token


def sequence_bytes(dep: Deployment, mem: MemoryBreakdown) -> int:
    """Bytes one sequence of ctx holds (batch_holds' terms): blocks_per_sequence(ctx, MTP drafts) *
    block_bytes + its state, kept outside the blocks (assumed, engine_notes)."""
    n = blocks_per_sequence(dep.ctx_tokens, block_tokens=dep.block_size_tokens, mtp_drafts=dep.mtp_drafts)
    return int(n) * block_bytes(dep, mem) + mem.state_bytes_per_sequence


def max_batch_grid(dep: Deployment, mem: MemoryBreakdown, *, ctx_tokens: IntArray) -> IntArray:
    """Largest batch MindIE's usable blocks hold at each ctx, capped at batch_cap.

    Binary search on batch_holds (monotone in batch), all contexts at once; upper bound floor(kv_budget /
    per-sequence bytes) (common.kv_bound_grid).
    """
    low = np.zeros_like(ctx_tokens)
    high = common.kv_bound_grid(dep, mem, ctx_tokens=ctx_tokens)
    while np.any(low < high):
        middle = (low + high + 1) // 2
        holds = batch_holds(dep, mem, middle, ctx_tokens=ctx_tokens)
        open_ = low < high
        low = np.where(open_ & holds, middle, low)
        high = np.where(open_ & ~holds, middle - 1, high)
    return np.minimum(low, batch_cap(dep))


def check_holds_one(dep: Deployment, mem: MemoryBreakdown, *, max_batch: int) -> None:
    """DoesNotFitError when MindIE's usable blocks hold not one sequence of ctx."""
    if max_batch < 1:
        raise DoesNotFitError(
            f"--ctx: MindIE's usable KV blocks ({reserved_blocks(dp=dep.dp)} kept by its router) hold no "
            f"{dep.ctx_tokens}-token sequence on {dep.hardware.id} at {layout.describe(dep)} (got 0, "
            f"expected at least 1); try --tp {dep.tp * 2}"
        )


def block_pool(dep: Deployment, mem: MemoryBreakdown, *, max_model_len: int) -> common.BlockPool:
    """The simulator's view of the pool: usable blocks of the whole budget, state as whole blocks per
    sequence (ceil(state / block_bytes)); max_model_len does not change MindIE's blocks."""
    b = block_bytes(dep, mem)
    return common.BlockPool(
        total_blocks=int(usable_blocks(mem.kv_budget_bytes, block_bytes=b, model_id=dep.model.id, dp=dep.dp)),
        state_blocks=-(-mem.state_bytes_per_sequence // b),
        block_tokens=dep.block_size_tokens,
        lookahead_tokens=lookahead_slots(dep.mtp_drafts),
    )


def default_max_batch(dep: Deployment, *, planned_batch: int) -> int:
    """maxBatchSize the simulator runs with: the plan's batch at the longest request (what `kvplan mindie`
    writes)."""
    return planned_batch


def prefix_cache_block_tokens(dep: Deployment) -> int:
    """Tokens per prefix-cache block: MindIE's prefix cache matches whole cacheBlockSize blocks
    (the plan's block_size_tokens)."""
    return dep.block_size_tokens


def engine_notes(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]:
    """What the batch assumes of MindIE: linear-attention state outside the KV blocks (undocumented)."""
    if not mem.state_bytes_per_sequence:
        return []
    return [
        f"assumed: MindIE-LLM's public sources have no {dep.model.id} model; max_batch_size "
        f"{rec.max_batch_size} assumes MindIE keeps each sequence's {state_name(dep)} "
        f"({units.fmt_bytes(mem.state_bytes_per_sequence)}) outside its KV blocks (undocumented)"
    ]


def state_name(dep: Deployment) -> str:
    """What a sequence's fixed state is: Gated DeltaNet's, or DeepSeek-V4's windows and compressor states."""
    if dep.model.attention_traits.compressed_kv:
        return "sliding-window and compressor state"
    return "linear-attention state"


def startup_lines(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]:
    """No start-up lines modelled for this engine (MindIE's npuBlockNum: kvplan mindie prints it)."""
    return []


def npu_mem_mode(model_id: str, *, requested: str | None) -> Literal["auto", "explicit"]:
    """auto (-1) by default: MindIE then measures the real non-KV memory after warm-up, so kvplan's estimates
    of activations and runtime cannot cause an OOM. Multimodal checkpoints must use explicit ([DOC])."""
    multimodal = model_id in EXPLICIT_NPU_MEM
    if requested == "auto" and multimodal:
        raise PlanInputError(
            f"--npu-mem-size: MindIE does not allow npuMemSize -1 for multimodal models "
            f"(got auto for {model_id}, expected explicit)"
        )
    if requested == "explicit" or multimodal:
        return "explicit"
    return "auto"


def npu_mem_size_gib(plan: Plan, *, mode: str) -> int:
    """npuMemSize: -1, or the paged-KV part of the plan's budget in whole GiB ([KV]: its "GB" is GiB).

    Formula: floor((kv_budget - batch_per_dp_group * state_bytes_per_sequence) / GiB). Hybrid models' fixed
    linear-attention states are taken out first: MindIE's npuMemSize sizes KV blocks only, and kvplan
    cannot tell whether MindIE allocates those states inside it (assumed: outside, the safe side). The
    budget is one device's, so the states are those of the sequences its DP group runs, not the instance's.
    """
    if mode == "auto":
        return -1
    states = plan.batch_per_dp_group * plan.memory.state_bytes_per_sequence
    gib = (plan.memory.kv_budget_bytes - states) // units.GIB_BYTES
    if gib < 1:
        budget = units.fmt_gib(plan.memory.kv_budget_bytes - states)
        raise DoesNotFitError(
            f"{plan.model} on {plan.card} at tp={plan.tp}: npuMemSize would be 0 GB "
            f"(got {budget} of KV budget, expected >= 1 GiB); "
            f"try --npu-mem-size auto or a larger --tp"
        )
    return int(gib)


def config_words(plan: Plan, dep: Deployment) -> tuple[str, list[tuple[str, str]], str]:
    """The plan as the config.json fields `kvplan mindie` writes from it ([DOC] ScheduleConfig.maxBatchSize,
    ModelDeployConfig.maxSeqLen, ScheduleConfig.maxPrefillTokens, ModelConfig.npuMemSize): (title, fields,
    what the command needs beyond the plan's flags)."""
    try:
        gib = npu_mem_size_gib(plan, mode=npu_mem_mode(plan.model, requested=None))
        mem = "-1 (auto)" if gib < 0 else f"{gib} (GiB: explicit)"
    except KvplanError as exc:
        mem = f"n/a ({exc})"
    rec = plan.recommendation
    fields = [
        ("maxBatchSize", str(plan.batch_per_dp_group)),
        ("maxSeqLen", str(rec.max_seq_len)),
        ("maxPrefillTokens", str(dep.max_prefill_tokens)),
        ("npuMemSize", mem),
    ]
    return "MindIE config.json", fields, "--weights-path <checkpoint dir> -o config.json"


startup_budget = common.own_budget  # the plan's KV budget is kvplan's own formula
default_prefill_tokens = common.one_pass_prefill  # a prompt in one pass: the plan's default
default_memory_fraction_at = common.constant_memory_fraction(DEFAULT_MEMORY_FRACTION)
