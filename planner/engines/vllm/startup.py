"""vLLM / vllm-ascend start-up arithmetic per engine release: the memory the KV pool gets, term by term.

Every term is bytes on one rank. Source lines ([VA] = vllm-project/vllm-ascend at the tag or commit named;
vLLM = vllm-project/vllm 0.27.1 unless named):

  requested   = device_total x gpu_memory_utilization, rounded up on CUDA and down on vllm-ascend
                (requested_bytes; versions.REQUESTED_ROUNDS_UP)
                [VA] 182b75ea worker/worker.py:424-425; _310p/worker_310p.py:141-142;
                vLLM v1/worker/utils.py:414, gpu_worker.py:500-548
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

import math

from planner import layout, memory, units
from planner.deployment import Deployment
from planner.dtypes import StorageDType
from planner.engines.vllm import pool as vm
from planner.engines.vllm import scheduler
from planner.engines.vllm.terms import (
    dp_buffer_bytes,
    hccl_buffer_bytes,
    hccl_communicators,
    rope_cache_bytes,
    sampler_bytes,
)
from planner.engines.vllm.versions import VERSIONS, EngineVersion
from planner.schema import BUILT_ON_FIRST_USE, Frozen, HardwareProfile, ModelCard


class StartupMemory(Frozen):
    """The terms of the engine's KV budget on one rank (bytes) that vllm-ascend >= 0.18 logs (log.py) and
    this module computes (StartupTerms): requested (requested_bytes), less weights, the activation peak,
    non-torch memory and graphs; what is left is the pool's memory (pool.vllm_pool's available_bytes)."""

    model_config = BUILT_ON_FIRST_USE

    device_total_bytes: int
    gpu_memory_utilization: float
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    graph_bytes: int


class StartupTerms(StartupMemory):
    """Each term of the engine's KV budget on one rank (bytes), and what it leaves for the pool."""

    model_config = BUILT_ON_FIRST_USE

    version: str
    cleared_bytes: int
    resident_bytes: int = 0
    halved: bool
    available_kv_bytes: int


class ProfileRun(Frozen):
    """What the engine's start-up profile run sees on one rank (bytes; utilization a fraction in (0, 1]).

    graph_bytes counts only where the version subtracts it (CUDA); cleared_bytes only for v0.16-0.17 and 310P;
    resident_bytes (memory in use before the engine started) only where non-torch is counted absolutely
    (v0.11-v0.15).
    """

    model_config = BUILT_ON_FIRST_USE

    device_total_bytes: int
    gpu_memory_utilization: float
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    graph_bytes: int = 0
    cleared_bytes: int = 0
    resident_bytes: int = 0


def requested_bytes(version: EngineVersion, *, device_total_bytes: int, gpu_memory_utilization: float) -> int:
    """The memory the engine claims on one rank before profiling (bytes), spec step 1 (vllm-memory.md).

    Formula: ceil(total * util) where the release rounds up (vLLM's request_memory, CUDA), else
             floor(total * util) (vllm-ascend truncates total * util - non-KV: the same for integer non-KV)
        total device_total_bytes (bytes); util gpu_memory_utilization (fraction); rule and source lines per
        release: versions.REQUESTED_ROUNDS_UP
    """
    product = device_total_bytes * gpu_memory_utilization
    return math.ceil(product) if version.requested_rounds_up else math.floor(product)


def startup_terms(version: EngineVersion, *, profile: ProfileRun) -> StartupTerms:
    """The engine's available KV memory, term by term (formulas in the module docstring).

    Formula: requested = requested_bytes(total, util);  available = requested - weights - activation
             - non_torch - [graph] - [cleared] - [resident], halved on 310P (the bracketed terms per
             version: ProfileRun)
    """
    requested = requested_bytes(
        version,
        device_total_bytes=profile.device_total_bytes,
        gpu_memory_utilization=profile.gpu_memory_utilization,
    )
    cleared_counts = version.formula in ("profile-cleared", "profile-310p")
    subtracted = {  # what the version takes from the requested memory before the pool
        "weights_bytes": profile.weights_bytes,
        "activation_bytes": profile.activation_bytes,
        "non_torch_bytes": profile.non_torch_bytes,
        "graph_bytes": profile.graph_bytes if version.formula == "cuda-graph" else 0,
        "cleared_bytes": profile.cleared_bytes if cleared_counts else 0,
        "resident_bytes": profile.resident_bytes if version.non_torch_absolute else 0,
    }
    left = requested - sum(subtracted.values())
    halved = version.formula == "profile-310p"
    return StartupTerms(
        version=version.key,
        device_total_bytes=profile.device_total_bytes,
        gpu_memory_utilization=profile.gpu_memory_utilization,
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


# Base non-torch memory besides HCCL buffers (ACL / CUDA context, workspaces): 356 MiB, the mean over the
# thirteen rows of lab/published/startup-logs.csv showing it (0.02-0.75 GiB), the estimator the lab validates
# leave-one-log-out (lab/accuracy/startup_logs.py: a row's prediction takes the mean of the other sources).
# [measured: lab/accuracy/startup_logs.py, 2026-12-07; 348 MiB before va-4037, 305 MiB before the fifth pass
# (docs/engines/vllm-memory.md)]
NON_TORCH_BASE_BYTES = 356 * units.MIB_BYTES


# Device memory in use when a vllm-ascend worker has set its device, before torch allocates anything: total -
# free in the main rule's "Free memory on device (free/total GiB) on startup" line ([VA] 182b75ea
# worker.py:418-431: snapshot after set_device and empty_cache, before the HCCL groups), 0.36 GiB on a 64 GB
# 910B (va-14139) and 0.41 / 0.39 GiB on an A3 die (va-8289, omni-4130), mean 396 MiB (D). It holds the
# driver's reserve inside the visible total (~280 MiB by idle npu-smi outputs in vllm-ascend issues) and the
# worker's own ACL context. Releases v0.11-v0.15 count it as non-torch (non_torch_absolute: device used -
# torch allocated, [VA] v0.11.0rc3 worker/worker_v1.py:219-259); main's snapshot excludes it, so it drops
# out there. lab/accuracy/startup_logs.py takes the same mean leave-one-source-out (in_use_at_start).
RESIDENT_AT_START_BYTES = 396 * units.MIB_BYTES

# Device memory held before a 310P instance starts (driver reserve on an idle chip): total - free at start in
# vllm-ascend #10122 (43.24 - 42.24 and 42.67 - 41.64 GiB on its two ranks, D); NPUWorker310 subtracts it
# as "cleared" memory ([VA] 182b75ea _310p/worker_310p.py:63-123).
P310_CLEARED_BYTES = units.gib_to_bytes(1.0)
# Fixed-point rounds for the sampler's max_num_seqs (plan_budget); 2-3 suffice (one sequence changes the
# sampler by V x 4 B, far below one request's KV).
MAX_SEQS_ROUNDS = 8


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
    version = scheduler.version_for_card(dep.hardware)
    ascend = version.engine == "vllm-ascend"
    comms = (
        hccl_communicators(
            tp=dep.tp,
            dp=dep.dp,
            moe=dep.model.is_moe,
            ep=dep.ep > 1,
            moe_groups_need_ep=version.moe_groups_need_ep,
            pp=dep.pp,
        )
        if ascend
        else 0
    )
    non_torch = NON_TORCH_BASE_BYTES + hccl_buffer_bytes(comms) + (dp_buffer_bytes(dep.dp) if ascend else 0)
    profile = ProfileRun(
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
    return startup_terms(version, profile=profile)


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
    seqs = scheduler.card_defaults(dep.hardware).max_num_seqs
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
        + "; pipeline group with PP); set HCCL_BUFFSIZE higher (EP) and it grows",
    ]


def plan_lines(dep: Deployment, *, terms: StartupTerms) -> list[str]:
    """The engine's own start-up arithmetic for the deployment, term by term, and what it logs: the terms
    the plan's vLLM batch comes from (plan_budget).

    Utilisation: the plan's memory fraction (printed as --gpu-memory-utilization); tokens per dummy step:
    dep.max_prefill_tokens (printed as --max-num-batched-tokens).
    """
    version = VERSIONS[terms.version]
    pool = terms_pool(dep, terms=terms)
    defaults = scheduler.scheduler_defaults(
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
