"""SGLang (`python -m sglang.launch_server`, its Ascend NPU backend on Huawei cards) as the planner asks it:
its KV pool, the defaults it picks for the card, its scheduler and the layouts it runs. The default
arithmetic is planner/engines/sglang/defaults.py (sources cited there); the registry
(planner/engines/registry.py) asks this module. docs/engines/sglang.md says what is modelled and what not.

The pool (model_runner profile_max_num_token): SGLang measures the free memory once the process is up
(total_gpu_memory, here device total - the card's runtime_overhead_bytes), loads the weights, and gives the
KV pool what is left of mem_fraction_static of it: rest = (T - c) * f - W. Activations and graphs live in
the 1 - f it holds back, so the plan's activation term is 0. The pool is a token pool in pages of
page_size tokens (128 on Ascend) of the model's KV cell: kvplan's KV bytes per token on one rank (K and V of
every full-attention layer, or the MLA latent and rope key, plus the draft's layers), the same cell SGLang
computes. Linear-attention (Gated DeltaNet) state is charged per sequence from the same memory
[assumed: SGLang sizes a separate mamba pool from the same rest; its split is not modelled].

Layout: kvplan's --tp T --dp D is SGLang's `--tp-size T*D --dp-size D --enable-dp-attention` (attention
data-parallel inside one tensor-parallel group of T*D ranks, MoE experts over all of them with --ep-size
T*D); --dp 1 is plain `--tp-size T`.
"""

from __future__ import annotations

import math

from planner import layout, memory
from planner.arrays import IntArray
from planner.deployment import DEFAULT_BLOCK_SIZE_TOKENS, Deployment
from planner.engines import checkpoints, common
from planner.engines.sglang import defaults, flags
from planner.errors import PlanInputError
from planner.kinds import EngineName, SchedulerKind
from planner.results import MemoryBreakdown, Plan, Recommendation
from planner.schema import HardwareProfile

# Prefill-priority with chunked prefill, no mixing (enable_mixed_chunk False): the simulator's "sglang"
# scheduler (planner/sim/schedulers.py sglang_step); schedule_policy "fcfs" by default (arrival order).
SCHEDULER: SchedulerKind = "sglang"
# Tokens are allocated as they arrive; when the pool runs out the scheduler retracts decoding requests
# (retract_decode, recompute) and re-queues them (managers/scheduler.py update_running_batch).
ADMITS_BEYOND_POOL = True
# No prompt count per prefill batch beyond max_running_requests and the token budget [assumed: ServerArgs
# has no such setting]
MAX_PROMPTS_PER_PASS: int | None = None


def beyond_pool_words(*, max_batch: int, clients: int) -> str:
    """What SGLang does with `clients` sequences when its pool holds fewer at full length
    (ADMITS_BEYOND_POOL), max_batch its max_running_requests."""
    del clients  # how many run is the admission's (serve's engine and queue lines)
    return (
        f"SGLang admits up to max_running_requests {max_batch}, "
        "allocates KV pages as tokens arrive and retracts decoding requests (recompute) when the pool "
        "runs out"
    )


# The PD router (sglang_router / mini_lb) returns the decode server's stream: the first token the user sees
# comes from the decode instance after the KV transfer.
PD_DECODER_STREAMS_FIRST_TOKEN = True
PREFILL_AT_LEAST_INPUT = False  # prompts longer than --chunked-prefill-size are chunked
MAX_PROMPT_TOKENS: int | None = None  # bounded by the context (--context-length) only
MODEL_NAME_PATTERN: str | None = None  # --served-model-name: any string
MODEL_NAME_RULE: str | None = None
BATCH_CAP_RULE = ""  # no batch limit of its own (batch_cap None)
# DP attention (layers/dp_attention.py): every attention-DP rank joins each MLP / MoE forward (an idle rank
# runs an idle batch), so ranks step together, dense models too; no shared prefill/decode vote.
DP_PHASE_VOTE = False
DP_LOCKSTEP_DENSE = True
# The fallback when the device memory is unknown ([SA] `else 0.88`); the plan's default is the formula
# at the deployment (default_memory_fraction_at).
DEFAULT_MEMORY_FRACTION = 0.88
RUNTIME_SOURCE = "card profile x the fraction"  # c * f in startup_budget
# rest_bytes reads the card's runtime reserve alone: a layout's comm buffers are in none of the plan's rows
LAYOUT_BUFFER_NOTES: dict[str, str] = dict.fromkeys(
    (layout.MC2_WINDOW, layout.EXPERT_GROUP_BUFFER, layout.PIPELINE_BUFFER),
    "not in these figures: SGLang's fraction arithmetic leaves it out",
)
MEMORY_FRACTION_NAME = "--mem-fraction-static"  # ServerArgs.mem_fraction_static ([SA] server_args.py)
# Below this the formula's reserve (activations of a chunked-prefill pass, graphs) fills the card: a negative
# default crashed the plan (pydantic traceback); refused in one line (inputs.MIN_MEMORY_FRACTION's floor).
MIN_DEFAULT_FRACTION = 0.01
REQUEST_OVERHEAD_PRIOR_US = 10_000.0  # [assumed: the generic prior; no SGLang-on-Ascend per-request figure]
STATE_PASSES = 2  # fused recurrent kernel reads and writes the state once each [assumed: as vLLM's]
FUSED_KERNELS = True  # ascend attention backend, torch_npu fused ops, NPU graphs for decode
SUPPORTS_PIPELINE = True  # --pp-size
# With DP attention the hidden states are gathered over the group before the MoE and scattered after
# (dp_attention.py dp_gather / dp_scatter): the same traffic vLLM's all-gather of MoE outputs costs.
GATHERS_MOE_OUTPUTS = True
# Collectives go through torch_npu's HCCL process groups, as vllm-ascend's (host-expanded on the AI CPU).
DEVICE_LAUNCHED_COLLECTIVES = False
# --speculative-algorithm EAGLE3 loads an eagle3 draft model; SGLang has no DFlash algorithm (its choices:
# EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM; docs advanced_features/speculative_decoding.md): dflash is refused
DRAFT_METHODS: tuple[str, ...] = ("eagle3",)
# --ep-size equals --tp-size for MoE experts: ep is 1 or the whole group (registry.check_layout)
EXPERTS_OVER_WHOLE_GROUP: str | None = "SGLang's --ep-size splits experts over its whole --tp-size group"
# SGLang's Ascend backend runs the same CANN / torch_npu operator family as vllm-ascend (fused attention,
# grouped matmul, NPU graphs); no SGLang row is fitted yet, so a card's SGLang speeds come from its
# vllm-ascend fit where one is shipped, without vllm-ascend's own per-request and per-prefill-pass costs
# (catalog.borrowed_fit) [assumed: docs/engines/sglang.md; the held-out error of that choice is in
# docs/accuracy.md].
FITTED_PROFILE_ENGINE: EngineName = "vllm"


is_npu = defaults.is_npu
page_tokens = defaults.page_tokens
sglang_tp = defaults.sglang_tp


def default_memory_fraction_at(
    hardware: HardwareProfile, *, ranks: tuple[int, int, int], prefill_tokens: int | None, drafting: bool
) -> float:
    """SGLang's default --mem-fraction-static for kvplan's (tp, pp, dp) on the card, at
    --chunked-prefill-size `prefill_tokens` (None: its own default), with or without an EAGLE-family draft
    (defaults.reserved_mib)."""
    tp, pp, dp = ranks
    mib = defaults.device_mib(hardware.device_total_bytes)
    group = sglang_tp(tp=tp, dp=dp)
    chunk, graph_bs = defaults.chunk_and_graph_bs(mib, tp=group, npu=is_npu(hardware))
    reserved = defaults.reserved_mib(
        mib, chunk_tokens=prefill_tokens or chunk, graph_bs=graph_bs, ranks=(group, pp, dp), drafting=drafting
    )
    fraction = defaults.mem_fraction_static(mib, reserved=reserved)
    if fraction < MIN_DEFAULT_FRACTION:
        raise PlanInputError(
            f"SGLang's default {MEMORY_FRACTION_NAME} on {hardware.id} would be {fraction:g} (got a reserve "
            f"of {reserved:,.0f} MiB for --chunked-prefill-size {prefill_tokens or chunk} and graphs, "
            f"expected less than the {mib:,} MiB card): SGLang would not start; give --memory-fraction "
            f"({MEMORY_FRACTION_NAME}) or a smaller --max-prefill-tokens"
        )
    return fraction


def rest_bytes(dep: Deployment, *, weights_bytes: int) -> int:
    """KV memory on one rank (profile_max_num_token): (T - c) * f - W, bytes."""
    free_at_start = dep.hardware.device_total_bytes - dep.hardware.runtime_overhead_bytes
    return math.floor(free_at_start * dep.memory_fraction) - weights_bytes


def startup_budget(dep: Deployment, *, weights_bytes: int) -> common.EngineBudget:
    """The plan's KV budget is SGLang's rest_bytes; the activation peak sits in the 1 - f held back (0 here)
    and the runtime context's share c * f is what else the fraction holds."""
    usable = memory.usable_bytes(dep.hardware.device_total_bytes, memory_fraction=dep.memory_fraction)
    rest = rest_bytes(dep, weights_bytes=weights_bytes)
    return common.EngineBudget(
        activation_bytes=0, runtime_bytes=usable - weights_bytes - rest, kv_budget_bytes=rest
    )


def pool_tokens(dep: Deployment, mem: MemoryBreakdown) -> int:
    """max_total_num_tokens: the budget in whole pages of the KV cell (defaults.max_total_num_tokens)."""
    return defaults.max_total_num_tokens(
        mem.kv_budget_bytes, cell_bytes=mem.kv_bytes_per_token, page_tokens=page_tokens(dep.hardware)
    )


def drafting(dep: Deployment) -> bool:
    """Whether SGLang runs an EAGLE-family speculative algorithm (EAGLE3 draft model or NEXTN = MTP)."""
    return dep.speculative_tokens > 0


# server_args.py --kv-cache-dtype: auto (the model's dtype) or FP8 / FP4 formats; no INT8 KV cache
# (docs advanced_features/quantized_kv_cache.md: "FP8 or FP4")
KV_DTYPES_REFUSED = ("int8",)


def check_kv_dtype(dep: Deployment) -> None:
    """PlanInputError for a KV dtype SGLang's --kv-cache-dtype has no choice for (int8); the core checks
    the card's native dtypes."""
    if dep.kv_dtype.value in KV_DTYPES_REFUSED:
        raise PlanInputError(
            f"--kv-dtype: SGLang's --kv-cache-dtype has no {dep.kv_dtype.value} KV cache (got "
            f"{dep.kv_dtype.value}, expected the model's 16-bit dtype or fp8); use --kv-dtype auto, or "
            "--engine vllm / mindie with a checkpoint quantized with C8 (msModelSlim)"
        )


def weight_dtype_refusal(dep: Deployment) -> str | None:
    """Why SGLang cannot serve dep's weight dtype on its card, or None: fp32 on Ascend is refused, its NPU
    attention backend taking the same 16-bit paged-KV ops as vllm-ascend.  [assumed: not checked]"""
    return common.ascend_fp32_refusal(
        dep,
        refusal=f"--dtype: SGLang on {dep.hardware.id} serves no fp32 weights (got fp32, expected bf16 or "
        f"fp16); use --engine transformers for an eager fp32 stack",
    )


def check_layout(dep: Deployment) -> None:
    """PlanInputError when --block-size asks for KV blocks other than the page the pool is sized at
    (page_tokens: 128 on Ascend, what `kvplan sglang` writes as --page-size); kvplan's default block size
    passes everywhere. The ep rule is EXPERTS_OVER_WHOLE_GROUP's (registry.check_layout applies it)."""
    page = page_tokens(dep.hardware)
    if dep.block_size_tokens not in (page, DEFAULT_BLOCK_SIZE_TOKENS):
        raise PlanInputError(
            f"--block-size: kvplan sizes SGLang's pool in pages of {page} tokens on {dep.hardware.id} "
            f"(got {dep.block_size_tokens}, expected {page}); SGLang's --page-size is not planned otherwise"
        )


def sequence_bytes_at(dep: Deployment, mem: MemoryBreakdown, *, ctx_tokens: memory.Tokens) -> memory.Tokens:
    """Bytes one sequence of each ctx holds: whole pages of ctx plus its state (memory.sequence_bytes at
    the SGLang page size)."""
    return memory.sequence_bytes(
        ctx_tokens,
        kv_bytes_per_token=mem.kv_bytes_per_token,
        state_bytes=mem.state_bytes_per_sequence,
        block_size_tokens=page_tokens(dep.hardware),
    )


def sequence_bytes(dep: Deployment, mem: MemoryBreakdown) -> int:
    """sequence_bytes_at dep's ctx."""
    return sequence_bytes_at(dep, mem, ctx_tokens=dep.ctx_tokens)


def max_batch_grid(dep: Deployment, mem: MemoryBreakdown, *, ctx_tokens: IntArray) -> IntArray:
    """Sequences of each ctx the pool holds at full length: floor(N * cell / per-sequence bytes)
    (sequence_bytes_at)."""
    per_sequence = sequence_bytes_at(dep, mem, ctx_tokens=ctx_tokens)
    held: IntArray = (pool_tokens(dep, mem) * mem.kv_bytes_per_token) // per_sequence
    return held


def check_holds_one(dep: Deployment, mem: MemoryBreakdown, *, max_batch: int) -> None:
    """Nothing beyond the core's check that one sequence fits the budget."""


def block_pool(dep: Deployment, mem: MemoryBreakdown, *, max_model_len: int) -> common.BlockPool:
    """The token pool in pages: N / page pages, the state as whole pages per sequence."""
    page = page_tokens(dep.hardware)
    page_bytes = page * mem.kv_bytes_per_token
    return common.BlockPool(
        total_blocks=max(pool_tokens(dep, mem) // page, 1),
        state_blocks=-(-mem.state_bytes_per_sequence // page_bytes),
        block_tokens=page,
    )


def prefix_cache_block_tokens(dep: Deployment) -> int:
    """The radix cache matches whole pages (page_size > 1 aligns prefix matches to pages)."""
    return page_tokens(dep.hardware)


def default_max_batch(dep: Deployment, *, planned_batch: int) -> int:
    """--max-running-requests per attention-DP rank when not given (defaults.default_max_running_requests):
    48 // dp with speculative decoding; else min(N // 2, clamp(N / ctx * 512, 2048, 4096)), with N the
    pool's tokens taken as planned_batch x ctx (what the plan's batch holds at --context-length ctx, as
    `kvplan sglang` writes it; the pool is at least that)."""
    tokens = planned_batch * dep.ctx_tokens
    return defaults.default_max_running_requests(
        tokens, context_tokens=dep.ctx_tokens, attention_dp=dep.dp, drafting=drafting(dep)
    )


def batch_cap(dep: Deployment) -> None:
    """None: no config limit beyond memory (max_running_requests is the simulator's cap:
    default_max_batch)."""
    return None


def default_prefill_tokens(hardware: HardwareProfile) -> int:
    """--chunked-prefill-size default on the card ([NPU]: 8192 on a <= 64 GiB Ascend die): the tokens of one
    prefill pass; longer prompts are chunked."""
    chunk, _ = defaults.chunk_and_graph_bs(
        defaults.device_mib(hardware.device_total_bytes), tp=1, npu=is_npu(hardware)
    )
    return chunk


def engine_notes(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]:
    """What the plan assumes of SGLang."""
    return [
        f"SGLang: KV pool of {pool_tokens(dep, mem):,} tokens per rank (mem_fraction_static "
        f"{dep.memory_fraction:g}, page {page_tokens(dep.hardware)}); prefill and decode batches alternate "
        "(--enable-mixed-chunk off)"
    ]


def startup_lines(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]:
    """The figures SGLang logs at start-up for the plan (scheduler.py 'max_total_num_tokens=...')."""
    running = default_max_batch(dep, planned_batch=rec.max_batch_size)
    return [
        f"mem_fraction_static={dep.memory_fraction:g}, page_size={page_tokens(dep.hardware)}",
        f"max_total_num_tokens={pool_tokens(dep, mem)}, chunked_prefill_size={dep.max_prefill_tokens}, "
        f"max_running_requests={running} per attention-DP rank ({layout.describe(dep)})",
    ]


def config_words(plan: Plan, dep: Deployment) -> tuple[str, list[tuple[str, str]], str]:
    """The plan as `python -m sglang.launch_server` flags (engines/sglang/flags.py) and what `kvplan sglang`
    needs beyond the plan's flags: --weights-path when kvplan knows no checkpoint of the plan's dtype to name
    (engines/checkpoints.py), so the printed next command runs as printed."""
    known = checkpoints.checkpoint(dep.model, scheme=plan.dtype, alias=dep.model_alias)
    return flags.MODULE, flags.plan_words(plan, dep), "" if known else "--weights-path <checkpoint dir>"
