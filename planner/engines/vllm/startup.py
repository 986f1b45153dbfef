"""vLLM / vllm-ascend start-up arithmetic per engine release: the memory the KV pool gets, term by term.

Every term is bytes on one rank. Source lines ([VA] = vllm-project/vllm-ascend at the tag or commit named;
vLLM = vllm-project/vllm 0.27.1 unless named):

  requested   = device_total x gpu_memory_utilization
                [VA] 182b75ea worker/worker.py:424-425; _310p/worker_310p.py:141-142;
                vLLM gpu_worker.py:500-548
  available   = requested - weights - activation peak - non-torch [- graph] [- cleared], halved on 310P
      vllm-ascend v0.11.0rc0 .. v0.15.x  int(total x util - (torch peak + non-torch after empty_cache))
                                         ([VA] v0.12.0rc1 worker/worker_v1.py:240-273; logged in bytes as
                                         "Available memory: N, total memory: T"); torch peak = weights +
                                         activation; graphs are captured later, not subtracted
      vllm-ascend v0.16.x .. v0.17.x     requested - non-KV - non_torch_memory_cleared_by_empty_cache
                                         ([VA] v0.16.0rc1 worker/worker.py:350-363)
      vllm-ascend v0.18.0 .. main        requested - non-KV ([VA] 182b75ea worker/worker.py:483-577); the
                                         ACL graphs are captured after the pool is allocated and are NOT
                                         subtracted (worker.py:749-752); a "--kv-cache-memory" hint with a
                                         150 MiB margin is logged afterwards (worker.py:753-790)
      vllm-ascend 310P (NPUWorker310)    (requested - non-KV - cleared) // 2 "halved for workspace"
                                         ([VA] 182b75ea _310p/worker_310p.py:63-123); cleared = device memory
                                         not held by this instance's torch at profile time (other processes,
                                         the driver's reserve): vllm-ascend issues #14004 / #14274
      vLLM (CUDA) >= 0.21                requested - non-KV - CUDA graph estimate (gpu_worker.py:512-548;
                                         VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 by default, envs.py:295)
  non-KV      = weights + activation peak + non-torch increase ([VA] worker.py:528-531)
  activation  = peak of the dummy forward of max_num_batched_tokens tokens and of the dummy sampler over
                max_num_seqs rows of fp32 logits (vLLM gpu_model_runner.py:6433-6506, sampler.py:96)

The pool's blocks, concurrency and the "GPU KV cache size" line come from planner/engines/vllm/pool.py.
"""

from __future__ import annotations

import math
from typing import Literal

from planner import layout, memory, units
from planner.deployment import Deployment
from planner.dtypes import StorageDType
from planner.engines.vllm import pool as vm
from planner.engines.vllm import scheduler
from planner.engines.vllm.pool import StartupMemory
from planner.errors import PlanInputError
from planner.schema import BUILT_ON_FIRST_USE, Frozen, HardwareProfile, ModelCard

Formula = Literal["profile", "profile-cleared", "profile-310p", "cuda-graph"]
TokensRule = Literal["blocks", "concurrency"]

FP32_BYTES = 4  # the dummy sampler's logits are fp32 (vLLM sampler.py:96)
HCCL_BUFFSIZE_DEFAULT_MIB = 200  # HCCL's default HCCL_BUFFSIZE (MB); [VA] utils.py:70 uses it for its groups
HCCL_BUFFERS_PER_COMMUNICATOR = 2  # S: CANN HCCL env doc: each communicator holds an input and an output
# buffer of HCCL_BUFFSIZE each (not re-read at a commit here)
DP_BUFFER_MIN_MIB = 50  # [VA] 182b75ea utils.py:71 _MIN_DP_BUFFER_SIZE, calculate_dp_buffer_size :994-1005


class EngineVersion(Frozen):
    """One engine release range with the start-up rules that differ between releases."""

    key: str
    engine: Literal["vllm-ascend", "vllm"]
    releases: str
    formula: Formula
    hybrid_platform: vm.Platform
    tokens_rule: TokensRule
    default_gpu_memory_utilization: float
    source: str
    non_torch_absolute: bool = False  # non-torch = all device memory torch does not hold, not the increase
    moe_groups_need_ep: bool = False  # MoE dispatch communicators only with expert parallelism
    rope_cache_copies: int = 1  # rotary caches of max_position x rotary dim it holds (rope_cache_bytes)


# One row per release range: key, engine, releases, formula, hybrid platform, tokens rule, default
# gpu_memory_utilization; each row's source lines are in VERSION_SOURCES.
VERSION_ROWS = (
    ("vllm-ascend-0.11", "vllm-ascend", "v0.11.0rc0 .. v0.13.0rc1", "profile", "ascend-v0.12", "blocks", 0.9),
    ("vllm-ascend-0.13", "vllm-ascend", "v0.13.0rc2 .. v0.15.x", "profile", "ascend-v0.12", "blocks", 0.9),
    ("vllm-ascend-0.16", "vllm-ascend", "v0.16.0rc1 .. v0.17.x", "profile-cleared", "ascend", "blocks", 0.9),
    ("vllm-ascend-main", "vllm-ascend", "v0.18.0 .. main 182b75ea (vLLM 0.27.1)", "profile", "ascend",
     "concurrency", 0.92),
    ("vllm-ascend-310p", "vllm-ascend", "310P (NPUWorker310), main 182b75ea", "profile-310p", "ascend",
     "concurrency", 0.92),
    ("vllm-cuda", "vllm", "vLLM >= 0.21 on CUDA (read at 0.27.1)", "cuda-graph", "cuda", "concurrency", 0.92),
    ("vllm-cuda-v0", "vllm", "vLLM V0 engine (0.6.x)", "profile", "cuda", "blocks", 0.9),
)  # fmt: skip
VERSION_SOURCES = {
    "vllm-ascend-0.11": "[VA] v0.12.0rc1 worker/worker_v1.py:240-273, "
    "patch/platform/patch_mamba_config.py:37-62",
    "vllm-ascend-0.13": "[VA] v0.13.0rc2 worker/worker_v1.py determine_available_memory, "
    "ops/rotary_embedding.py:142, 271",
    "vllm-ascend-0.16": "[VA] v0.16.0rc1 worker/worker.py:350-363",
    "vllm-ascend-main": "[VA] 182b75ea worker/worker.py:483-577; vLLM 0.27.1 config/cache.py:68",
    "vllm-ascend-310p": "[VA] 182b75ea _310p/worker_310p.py:63-123",
    "vllm-cuda": "vLLM 0.27.1 v1/worker/gpu_worker.py:500-548, config/cache.py:68",
    "vllm-cuda-v0": "vLLM V0 worker/worker.py determine_num_available_blocks "
    "(log 'Memory profiling results')",
}
# Releases whose non-torch memory is "device used minus torch allocated" (memory already in use on an idle
# card counts): [VA] v0.11.0rc3 worker source; later releases count only the increase during start-up.
NON_TORCH_ABSOLUTE = frozenset({"vllm-ascend-0.11", "vllm-ascend-0.13"})
# Releases that set up the MoE dispatch methods (MC2 / all-to-all, whose communicators hold HCCL buffers) only
# when ep_size > 1: [VA] v0.20.2rc1 .. 182b75ea ops/fused_moe/moe_comm_method.py setup_moe_comm_method; up to
# v0.19.1rc1 every MoE model builds them (v0.16.0rc1 :50-54, v0.19.1rc1 :55-59).
MOE_GROUPS_NEED_EP = frozenset({"vllm-ascend-main", "vllm-ascend-310p"})
# Releases whose AscendRotaryEmbedding also keeps the interleaved cos and sin caches, one tensor of twice the
# cos/sin cache's size beside it (cos_sin_cache.view(-1, 2, r / 2).repeat(1, 1, 2)): [VA] v0.13.0rc2
# ops/rotary_embedding.py:142, 271 .. 182b75ea :126, 211; not in v0.13.0rc1 or v0.12.0rc1.
ROPE_CACHE_COPIES = {
    "vllm-ascend-0.13": 3,
    "vllm-ascend-0.16": 3,
    "vllm-ascend-main": 3,
    "vllm-ascend-310p": 3,
}
VERSION_COLUMNS = (
    "key", "engine", "releases", "formula", "hybrid_platform", "tokens_rule",
    "default_gpu_memory_utilization",
)  # fmt: skip
VERSIONS: dict[str, EngineVersion] = {
    str(row[0]): EngineVersion.model_validate(
        {
            **dict(zip(VERSION_COLUMNS, row, strict=True)),
            "source": VERSION_SOURCES[str(row[0])],
            "non_torch_absolute": str(row[0]) in NON_TORCH_ABSOLUTE,
            "moe_groups_need_ep": str(row[0]) in MOE_GROUPS_NEED_EP,
            "rope_cache_copies": ROPE_CACHE_COPIES.get(str(row[0]), 1),
        }
    )
    for row in VERSION_ROWS
}
DEFAULT_VERSION = "vllm-ascend-main"


def engine_version(key: str) -> EngineVersion:
    """The release range by key; PlanInputError naming the known keys otherwise."""
    if key not in VERSIONS:
        raise PlanInputError(f"--vllm-version: unknown (got {key!r}, expected one of {', '.join(VERSIONS)})")
    return VERSIONS[key]


class SchedulerDefaults(Frozen):
    """What `vllm serve` uses when --max-num-batched-tokens / --max-num-seqs are not given."""

    model_config = BUILT_ON_FIRST_USE

    max_num_batched_tokens: int
    max_num_seqs: int
    reason: str


def scheduler_defaults(
    version: EngineVersion, *, device_total_bytes: int, device_name: str = ""
) -> SchedulerDefaults:
    """`vllm serve` defaults (OpenAI server context) per engine.

    The numbers and the rule are engines/vllm/scheduler.py default_limits (the simulator reads them there):
    >= 70 GiB and not an A100 gives 8192 tokens / 1024 seqs, anything else 2048 / 256; vllm-ascend always
    2048 / 256 ([VA] 182b75ea platform.py:206-213).
    """
    ascend = version.engine == "vllm-ascend"
    tokens, seqs = scheduler.default_limits(
        ascend=ascend, device_total_bytes=device_total_bytes, device_name=device_name
    )
    if ascend:
        reason = "vllm-ascend cannot report device memory to vLLM (platform.py:206-213): small-GPU defaults"
    elif (tokens, seqs) == scheduler.LARGE_DEFAULTS:
        reason = "device >= 70 GiB (vLLM arg_utils.py)"
    else:
        reason = "device < 70 GiB or A100 (vLLM arg_utils.py)"
    return SchedulerDefaults(max_num_batched_tokens=tokens, max_num_seqs=seqs, reason=reason)


def hccl_communicators(
    *, tp: int, dp: int = 1, moe: bool = False, ep: bool = False, moe_groups_need_ep: bool = False
) -> int:
    """Communicators that hold HCCL_BUFFSIZE buffers on one rank (D, an assumption from the group list).

    The TP group when tp > 1, and the MoE dispatch group (MC2 / EP, sized by HCCL_BUFFSIZE, [VA] utils.py:
    976-984) for a MoE model spread over more than one rank; with moe_groups_need_ep (vllm-ascend >=
    v0.20, EngineVersion.moe_groups_need_ep) only when expert parallelism is on. The DP group has its own
    small buffer (dp_buffer_bytes).
    """
    groups = 1 if tp > 1 else 0
    if moe and (tp * dp > 1 or ep) and (ep or not moe_groups_need_ep):
        groups += 1
    return groups


def hccl_buffer_bytes(communicators: int, *, buffsize_mib: int = HCCL_BUFFSIZE_DEFAULT_MIB) -> int:
    """HCCL buffers of one rank: communicators x 2 x HCCL_BUFFSIZE MiB (counted in non-torch memory)."""
    return communicators * HCCL_BUFFERS_PER_COMMUNICATOR * buffsize_mib * units.MIB_BYTES


def dp_buffer_bytes(dp: int) -> int:
    """vllm-ascend's DP group buffer: max(ceil((dp + 1) * 4 B / 1 MiB), 50) MiB when dp > 1.

    Source: [VA] 182b75ea utils.py:994-1005 calculate_dp_buffer_size.
    """
    if dp <= 1:
        return 0
    return max(math.ceil((dp + 1) * 4 / units.MIB_BYTES), DP_BUFFER_MIN_MIB) * units.MIB_BYTES


def rope_cache_bytes(card: ModelCard, *, dtype: StorageDType, copies: int = 1) -> int:
    """vLLM's rotary cos/sin cache: one buffer that every layer shares (get_rope reuses the instance), held
    beside the weights and counted in "Model loading took".

    Formula: c * P * r * b / 8
        c  copies: 1, or 3 where vllm-ascend also keeps the interleaved cos and sin caches
           (EngineVersion.rope_cache_copies)
        P  card.max_position_embeddings (rows of the cache)
        r  rotary dim: qk_rope_head_dim (MLA), else head_dim * partial_rotary_factor; a row is cos then sin,
           r / 2 each
        b  the model dtype's bits (the cache is cast to it)
    Source: vLLM model_executor/layers/rotary_embedding, RotaryEmbedding._compute_cos_sin_cache
    (cat(cos, sin) of shape [max_position, rotary_dim], registered as a buffer). Measured: vLLM #10517,
    Llama-3.1-8B logs 14.9888 GiB loaded where its parameters are 14.958 GiB: 131072 x 128 x 2 B = 0.031 GiB.
    """
    if card.qk_rope_head_dim is not None:
        rotary_dim = card.qk_rope_head_dim
    else:
        rotary_dim = int((card.head_dim or 0) * card.partial_rotary_factor)
    return copies * card.max_position_embeddings * rotary_dim * dtype.bits // units.BITS_PER_BYTE


def sampler_bytes(*, max_num_seqs: int, vocab_size: int) -> int:
    """The dummy sampler's fp32 logits in profile_run: max_num_seqs x vocab x 4 B (vLLM sampler.py:96)."""
    return max_num_seqs * vocab_size * FP32_BYTES


class StartupTerms(StartupMemory):
    """Each term of the engine's KV budget on one rank (bytes), and what it leaves for the pool."""

    model_config = BUILT_ON_FIRST_USE

    version: str
    cleared_bytes: int
    resident_bytes: int = 0
    halved: bool
    available_kv_bytes: int


def startup_terms(
    version: EngineVersion,
    *,
    device_total_bytes: int,
    gpu_memory_utilization: float,
    weights_bytes: int,
    activation_bytes: int,
    non_torch_bytes: int,
    graph_bytes: int = 0,
    cleared_bytes: int = 0,
    resident_bytes: int = 0,
) -> StartupTerms:
    """The engine's available KV memory, term by term (formulas in the module docstring).

    graph_bytes counts only where the version subtracts it (CUDA); cleared_bytes only for v0.16-0.17 and 310P;
    resident_bytes (memory in use before the engine started) only where non-torch is counted absolutely
    (v0.11-v0.15).
    """
    requested = int(device_total_bytes * gpu_memory_utilization)
    subtracted = {  # what the version takes from the requested memory before the pool
        "weights_bytes": weights_bytes,
        "activation_bytes": activation_bytes,
        "non_torch_bytes": non_torch_bytes,
        "graph_bytes": graph_bytes if version.formula == "cuda-graph" else 0,
        "cleared_bytes": cleared_bytes if version.formula in ("profile-cleared", "profile-310p") else 0,
        "resident_bytes": resident_bytes if version.non_torch_absolute else 0,
    }
    left = requested - sum(subtracted.values())
    halved = version.formula == "profile-310p"
    return StartupTerms(
        version=version.key,
        device_total_bytes=device_total_bytes,
        gpu_memory_utilization=gpu_memory_utilization,
        requested_bytes=requested,
        **subtracted,
        halved=halved,
        available_kv_bytes=left // 2 if halved else left,
    )


def device_total_bytes(hardware: HardwareProfile, *, logged_bytes: int | None = None) -> int:
    """The device total the engine sizes from: the logged figure when there is one, else the card's.

    The one place kvplan reads a card's total for vLLM's start-up arithmetic: the card variant's
    runtime-visible total (HardwareProfile.device_total_bytes: visible_memory_bytes, else nominal).
    """
    if logged_bytes is not None:
        return logged_bytes
    return hardware.device_total_bytes


def logged_kv_tokens(version: EngineVersion, pool: vm.VllmPool) -> int:
    """The "GPU KV cache size: N tokens" figure this version logs for the pool."""
    if version.tokens_rule == "blocks":
        groups = pool.attention_groups + pool.state_groups
        return vm.kv_cache_size_tokens_by_blocks(
            pool.num_blocks, groups=groups, block_tokens=pool.block_size_tokens
        )
    return pool.kv_cache_size_tokens


def term_lines(terms: StartupTerms) -> list[str]:
    """The terms as printed lines (GiB with two decimals, as the engine logs them)."""
    gib = units.fmt_gib
    lines = [
        f"engine rule {terms.version}: requested = {gib(terms.device_total_bytes)} x "
        f"{terms.gpu_memory_utilization:g} = {gib(terms.requested_bytes)}",
        f"  - weights {gib(terms.weights_bytes)}",
        f"  - activation peak {gib(terms.activation_bytes)}",
        f"  - non-torch {gib(terms.non_torch_bytes)}",
    ]
    if terms.graph_bytes:
        lines.append(f"  - graph estimate {gib(terms.graph_bytes)}")
    if terms.cleared_bytes:
        lines.append(f"  - device memory not this instance's {gib(terms.cleared_bytes)}")
    if terms.resident_bytes:
        lines.append(f"  - device memory in use before start {gib(terms.resident_bytes)}")
    lines.append(
        f"  = available KV {gib(terms.available_kv_bytes)}"
        + (" (halved for workspace, 310P)" if terms.halved else "")
    )
    return lines


def activation_bytes(
    card: ModelCard,
    *,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    activation_dtype: StorageDType,
    tp: int,
    moe_tp: int | None = None,
) -> int:
    """The activation peak vLLM's profile_run records: max(dummy forward, dummy sampler).

    Formula: max(T * ((R + 1) * H + W) * b / 8,  S * V * 4)
        T max_num_batched_tokens, S max_num_seqs, V vocab; R, W as in memory.activation_bytes_per_device
        R + 1: while the MLP's down projection writes its H-wide output, the residual, the normed input and
        the gate/up outputs are still live, one hidden-size buffer more than kvplan's MindIE estimate.
        Chosen from vLLM issue #10517 (Llama-3.1-8B, 20k and 29k tokens: 111 KB per token logged, R = 2
        gives 102 KB, R + 1 gives 111 KB); the peak is the larger of forward and sampler, not their sum
        (the forward's buffers are freed before the sampler runs).
    """
    forward = memory.activation_bytes_per_device(
        card,
        max_prefill_tokens=max_num_batched_tokens,
        activation_dtype=activation_dtype,
        tp=tp,
        moe_tp=moe_tp,
    )
    down_proj_output = (
        max_num_batched_tokens * card.hidden_size * activation_dtype.bits // units.BITS_PER_BYTE
    )
    return max(
        forward + down_proj_output, sampler_bytes(max_num_seqs=max_num_seqs, vocab_size=card.vocab_size)
    )


# Base non-torch memory besides HCCL buffers (ACL / CUDA context, workspaces): 305 MiB, the mean over the
# eleven rows of lab/published/startup-logs.csv that show it (0.02-0.71 GiB), the estimator the lab validates
# leave-one-log-out (lab/accuracy/startup_logs.py: a row's prediction takes the mean of the other sources).
# [measured: lab/accuracy/startup_logs.py, 2026-12-05]
NON_TORCH_BASE_BYTES = 305 * units.MIB_BYTES


# Device memory in use inside the runtime-visible total before any engine starts, on a 64 GB 910B and a
# 32 GB 910B4 (D, from idle npu-smi outputs pasted in vllm-ascend issues, not from start-up logs): 910B3
# 3318-3525 MB of 65536 in use (median 3396, seven issues' collect_env outputs) minus the 3116 MiB outside the
# visible 62420 MiB; 910B4 2837-2854 of 32768 (#2473, #5044) minus the 2572 MiB outside the visible 30196 MiB:
# ~280 MiB on both. Releases v0.11-v0.15 count it as non-torch (non_torch_absolute: device used - torch
# allocated, [VA] v0.11.0rc3 worker/worker_v1.py determine_available_memory); main counts only the increase
# since its own snapshot, so it drops out there.
RESIDENT_AT_START_BYTES = 280 * units.MIB_BYTES

# Device memory held before a 310P instance starts (driver reserve on an idle chip): total - free at start in
# vllm-ascend #10122 (43.24 - 42.24 and 42.67 - 41.64 GiB on its two ranks, D); NPUWorker310 subtracts it
# as "cleared" memory ([VA] 182b75ea _310p/worker_310p.py:63-123).
P310_CLEARED_BYTES = units.gib_to_bytes(1.0)
# Fixed-point rounds for the sampler's max_num_seqs (plan_budget); 2-3 suffice (one sequence changes the
# sampler by V x 4 B, far below one request's KV).
MAX_SEQS_ROUNDS = 8


def version_for_card(hardware: HardwareProfile) -> EngineVersion:
    """The release kvplan plans for: vLLM >= 0.21 on NVIDIA, vllm-ascend main's NPUWorker310 on a 310P chip
    (worker selected by SoC, [VA] 182b75ea _310p/worker_310p.py), vllm-ascend main otherwise."""
    if not scheduler.runs_vllm_ascend(hardware.vendor):
        return VERSIONS["vllm-cuda"]
    if "310p" in hardware.name.lower():
        return VERSIONS["vllm-ascend-310p"]
    return VERSIONS[DEFAULT_VERSION]


def card_defaults(hardware: HardwareProfile) -> SchedulerDefaults:
    """`vllm serve`'s --max-num-batched-tokens / --max-num-seqs defaults on the card (scheduler_defaults for
    version_for_card)."""
    return scheduler_defaults(
        version_for_card(hardware),
        device_total_bytes=hardware.device_total_bytes,
        device_name=hardware.name,
    )


def plan_terms(
    dep: Deployment,
    *,
    gpu_memory_utilization: float,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    weights_bytes: int,
) -> StartupTerms:
    """The engine's own start-up terms for a deployment (kvplan's weights, the vLLM activation peak, the base
    non-torch constant plus HCCL buffers, on a 310P the driver's reserve as cleared memory; the card's device
    total through device_total_bytes). weights_bytes: the memory plan's (capacity.weight_bytes, the one
    implementation of the layout's weights per rank); the weights vLLM loads add its rotary cache
    (rope_cache_bytes)."""
    version = version_for_card(dep.hardware)
    ascend = version.engine == "vllm-ascend"
    comms = (
        hccl_communicators(
            tp=dep.tp,
            dp=dep.dp,
            moe=dep.model.is_moe,
            ep=dep.ep > 1,
            moe_groups_need_ep=version.moe_groups_need_ep,
        )
        if ascend
        else 0
    )
    non_torch = NON_TORCH_BASE_BYTES + hccl_buffer_bytes(comms) + (dp_buffer_bytes(dep.dp) if ascend else 0)
    return startup_terms(
        version,
        device_total_bytes=device_total_bytes(dep.hardware),
        gpu_memory_utilization=gpu_memory_utilization,
        weights_bytes=weights_bytes
        + rope_cache_bytes(dep.model, dtype=dep.activation_dtype, copies=version.rope_cache_copies),
        activation_bytes=activation_bytes(
            dep.model,
            max_num_batched_tokens=max_num_batched_tokens,
            max_num_seqs=max_num_seqs,
            activation_dtype=dep.activation_dtype,
            tp=dep.tp,
            moe_tp=layout.moe_tp(dep),
        ),
        non_torch_bytes=non_torch,
        cleared_bytes=P310_CLEARED_BYTES if version.formula == "profile-310p" else 0,
    )


def terms_pool(dep: Deployment, *, terms: StartupTerms) -> vm.VllmPool:
    """The pool the engine builds from the terms' available KV memory at --max-model-len = ctx (with the
    plan's MTP draft tokens)."""
    return vm.deployment_pool(
        dep,
        available_bytes=max(terms.available_kv_bytes, 0),
        max_model_len=dep.ctx_tokens,
        num_spec=dep.mtp_tokens,
    )


def plan_budget(dep: Deployment, *, weights_bytes: int) -> StartupTerms:
    """The engine's start-up terms for the plan's own settings: --gpu-memory-utilization = the plan's memory
    fraction, --max-num-batched-tokens = dep.max_prefill_tokens (the engine's default unless the user set
    one: card_defaults), --max-num-seqs = the batch these terms give at --max-model-len = ctx.

    The dummy sampler profiles max_num_seqs rows, and kvplan prints --max-num-seqs = floor(the pool's
    maximum concurrency), so the terms are taken at the fixed point S = floor(concurrency(S)), starting from
    the engine's default S; if rounding makes two values alternate, the larger S (the smaller pool: every
    printed sequence fits) is kept. This is the budget the plan's vLLM batch, `kvplan vllm` and the
    dashboard read (capacity.memory_breakdown through the registry).
    """
    seqs = card_defaults(dep.hardware).max_num_seqs
    tried: dict[int, StartupTerms] = {}
    for _ in range(MAX_SEQS_ROUNDS):
        terms = plan_terms(
            dep,
            gpu_memory_utilization=dep.memory_fraction,
            max_num_batched_tokens=dep.max_prefill_tokens,
            max_num_seqs=seqs,
            weights_bytes=weights_bytes,
        )
        tried[seqs] = terms
        built = terms_pool(dep, terms=terms)
        # vLLM refuses max_num_seqs > max_num_batched_tokens (batch.seqs_cap)
        batch = min(max(math.floor(built.max_concurrency), 1), dep.max_prefill_tokens)
        if batch == seqs:
            return terms
        if batch in tried:  # two values alternate: keep the larger max_num_seqs
            return tried[max(batch, seqs)]
        seqs = batch
    return tried[seqs]


def rope_and_non_torch_lines(dep: Deployment, *, version: EngineVersion) -> list[str]:
    """What the weights and non-torch lines of plan_lines hold besides the plan's own figures."""
    rope = rope_cache_bytes(dep.model, dtype=dep.activation_dtype, copies=version.rope_cache_copies)
    copies = ", with the interleaved cos and sin copies" if version.rope_cache_copies > 1 else ""
    return [
        f"  weights include vLLM's rotary cos/sin cache ({units.fmt_bytes(rope)}{copies})",
        f"  non-torch = {units.fmt_gib(NON_TORCH_BASE_BYTES)} base (fitted, lab/accuracy/startup_logs.py) "
        "+ 2 x HCCL_BUFFSIZE (200 MB) per HCCL communicator (TP group; MoE dispatch group"
        + (" with EP only" if version.moe_groups_need_ep else "")
        + "); set HCCL_BUFFSIZE higher (EP) and it grows",
    ]


def plan_lines(dep: Deployment, *, terms: StartupTerms) -> list[str]:
    """The engine's own start-up arithmetic for the deployment, term by term, and what it logs: the terms
    the plan's vLLM batch comes from (plan_budget).

    Utilisation: the plan's memory fraction (printed as --gpu-memory-utilization); tokens per dummy step:
    dep.max_prefill_tokens (printed as --max-num-batched-tokens).
    """
    version = VERSIONS[terms.version]
    pool = terms_pool(dep, terms=terms)
    defaults = scheduler_defaults(
        version, device_total_bytes=terms.device_total_bytes, device_name=dep.hardware.name
    )
    cleared = (
        ["  cleared = the driver's reserve on an idle 310P chip (1.0 GiB, vllm-ascend #10122)"]
        if terms.cleared_bytes
        else []
    )
    return [
        f"vLLM start-up arithmetic ({version.key}: {version.releases}; {version.source}), which sizes "
        "the plan's batch:",
        *(f"  {line}" for line in term_lines(terms)),
        f"  -> {pool.num_blocks} blocks of {pool.block_size_tokens} tokens; it logs "
        f"'GPU KV cache size: {logged_kv_tokens(version, pool):,} tokens' and 'Maximum concurrency for "
        f"{dep.ctx_tokens:,} tokens per request: {pool.max_concurrency:.2f}x'",
        f"  --max-num-batched-tokens {dep.max_prefill_tokens} (the activation profile's tokens); defaults "
        f"when left out: --max-num-batched-tokens {defaults.max_num_batched_tokens}, --max-num-seqs "
        f"{defaults.max_num_seqs} ({defaults.reason}); --gpu-memory-utilization "
        f"{version.default_gpu_memory_utilization:g}",
        *rope_and_non_torch_lines(dep, version=version),
        *cleared,
        *(
            [
                "  CUDA graph estimate not modelled here: vLLM subtracts it too "
                "(0.09-0.52 GiB in the logs read)"
            ]
            if version.formula == "cuda-graph"
            else []
        ),
        f"  device total taken as {units.fmt_gib(terms.device_total_bytes)} ({dep.hardware.variant_id}'s "
        + (
            "runtime-visible total"
            if dep.hardware.visible_memory_bytes is not None
            else "nominal memory: no runtime-visible total is known for it, the engine may see less"
        )
        + "; check with `kvplan calibrate --from-log` on a real start-up log)",
    ]
