"""SGLang's server-argument defaults that size its KV pool and its scheduler, as `python -m
sglang.launch_server` resolves them when the flag is left out. Pure arithmetic over plain numbers; the room
(planner/engines/sglang/room.py) feeds it a Deployment.

Sources: sgl-project/sglang at 386e5415 (2025-12-31, the commit the corpus's SGLang rows cite; read with
`git show` on the Ascend/sglang mirror, 2026-12-06), paths under python/sglang/srt/:
  [SA]  server_args.py:836-985 _handle_gpu_memory_settings (called after _handle_npu_backends, :669-675):
        chunked_prefill_size / cuda_graph_max_bs by GPU memory (:861-), then mem_fraction_static =
        round((gpu_mem - reserved_mem) / gpu_mem, 3) (:944-981), memory in MiB.
  [NPU] hardware_backend/npu/utils.py:39 set_default_server_args (PR #15258, 2025-12-16): on Ascend the
        attention backend is "ascend", page_size 128, and chunked_prefill_size / cuda_graph_max_bs come
        from the NPU's memory (utils/common.py:1669 get_npu_memory_capacity: torch.npu.mem_get_info()[1],
        MiB) (<= 32 GiB: 4096 and 16 | 64 by tp < 4; <= 64 GiB: 8192 and 64 | 256); larger NPUs fall
        through to [SA].
  [SPEC] server_args.py:2032, :2134 (EAGLE / EAGLE3, NEXTN run as EAGLE): max_running_requests = 48 when not
        given ("Max running requests is reset to 48 for speculative decoding").
  [TPW] model_executor/model_runner.py:549-557: max_running_requests = min(max_total_num_tokens // 2 when not
        given, else the flag // dp_size with DP attention, the request pool);
        model_runner_kv_cache_mixin.py:271-283: request pool clamp(int(N / context_len * 512), 2048, 4096);
        :112-142 profile_max_num_token (rest = available - total * (1 - f), // cell) and :231 whole pages.
Ascend differs from CUDA in the page size (128, not 1) and the chunk / graph table ([NPU] over [SA]); the
mem_fraction_static formula and the scheduler are the same code on both.
"""

from __future__ import annotations

from planner import units
from planner.schema import HardwareProfile

MIB_PER_GIB = units.GIB_BYTES // units.MIB_BYTES  # SGLang writes its memory bounds as N * 1024 MiB
# [NPU] NPU memory tiers (MiB): (upper bound inclusive, chunked_prefill_size, graph bs at tp < 4, at tp >= 4)
NPU_TIERS = ((32 * MIB_PER_GIB, 4096, 16, 64), (64 * MIB_PER_GIB, 8192, 64, 256))
# [SA] GPU tiers (MiB, upper bound exclusive): (bound, chunked_prefill_size, graph bs at tp < 4, at tp >= 4)
GPU_TIERS = (
    (20 * MIB_PER_GIB, 2048, 8, 8),
    (35 * MIB_PER_GIB, 2048, 24, 80),
    (60 * MIB_PER_GIB, 4096, 32, 160),
    (90 * MIB_PER_GIB, 8192, 256, 512),
    (160 * MIB_PER_GIB, 8192, 256, 512),
)
LARGEST_GPU = (16384, 512)  # [SA] B200 / MI300 tier: (chunked_prefill_size, cuda_graph_max_bs)
GRAPH_TP_SPLIT = 4  # [SA]/[NPU]: the larger graph batch from tp_size >= 4
NPU_PAGE_TOKENS = 128  # [NPU] page_size default on Ascend
CUDA_PAGE_TOKENS = 1  # [SA] page_size default elsewhere (token-granular pool)
# [SA] reserved_mem terms, MiB: constant metadata; activation per chunked-prefill token (floor 2048 tokens);
# graph buffers per graph batch; per tp x pp / 8; DP attention padding per graph batch x dp (and more above
# 300); a floor on cards above 60 GiB; the EAGLE-family draft model and its graphs.
RESERVED_BASE_MIB = 512
ACTIVATION_MIB_PER_TOKEN = 1.5
MIN_ACTIVATION_TOKENS = 2048
GRAPH_MIB_PER_BS = 2
PARALLEL_MIB_PER_8_RANKS = MIB_PER_GIB  # tp * pp / 8 * 1024
DP_ATTENTION_MIB_PER_BS = 3
DP_ATTENTION_LARGE_BS = 300
DP_ATTENTION_LARGE_MIB_PER_BS = 1.5
LARGE_CARD_MIB = 60 * MIB_PER_GIB
LARGE_CARD_FLOOR_MIB = 10 * MIB_PER_GIB
DRAFT_MODEL_MIB = 2 * MIB_PER_GIB
FRACTION_DECIMALS = 3  # round(..., 3)
SPECULATIVE_MAX_RUNNING = 48  # [SPEC]
# [TPW] request pool: int(tokens / context_len * 512) clamped to [2048, 4096]
REQ_POOL_PER_CONTEXT = 512
REQ_POOL_MIN = 2048
REQ_POOL_MAX = 4096


def device_mib(device_total_bytes: int) -> int:
    """The device memory SGLang sizes its defaults from, in MiB (get_npu/gpu_memory_capacity)."""
    return device_total_bytes // units.MIB_BYTES


def chunk_and_graph_bs(gpu_mib: int, *, tp: int, npu: bool) -> tuple[int, int]:
    """(chunked_prefill_size tokens, cuda_graph_max_bs) SGLang picks for a device of gpu_mib MiB at tp.

    Ascend ([NPU]) uses NPU_TIERS up to 64 GiB (bounds inclusive); above it, and on GPUs, GPU_TIERS ([SA],
    bounds exclusive); graph bs is the tp < 4 or the tp >= 4 column.
    """
    wide = tp >= GRAPH_TP_SPLIT
    for bound, chunk, small, large in NPU_TIERS if npu else ():
        if gpu_mib <= bound:
            return chunk, large if wide else small
    for bound, chunk, small, large in GPU_TIERS:
        if gpu_mib < bound:
            return chunk, large if wide else small
    return LARGEST_GPU


def reserved_mib(
    gpu_mib: int, *, chunk_tokens: int, graph_bs: int, ranks: tuple[int, int, int], drafting: bool
) -> float:
    """The memory SGLang keeps outside mem_fraction_static for activations and graphs ([SA]), MiB.

    Formula (ranks = (tp, pp, dp_attention), dp_attention 1 without --enable-dp-attention):
        r = 512 + 1.5 * max(chunk, 2048) + 2 * bs + tp * pp / 8 * 1024
            + [dp > 1] * (3 * bs * dp + [bs > 300] * 1.5 * bs * dp)
        r = max(r, 10240) on a device above 60 GiB;  r += 2048 with an EAGLE-family draft
    """
    tp, pp, dp = ranks
    reserved = RESERVED_BASE_MIB + ACTIVATION_MIB_PER_TOKEN * max(chunk_tokens, MIN_ACTIVATION_TOKENS)
    reserved += GRAPH_MIB_PER_BS * graph_bs + tp * pp / 8 * PARALLEL_MIB_PER_8_RANKS
    if dp > 1:
        reserved += DP_ATTENTION_MIB_PER_BS * graph_bs * dp
        if graph_bs > DP_ATTENTION_LARGE_BS:
            reserved += DP_ATTENTION_LARGE_MIB_PER_BS * graph_bs * dp
    if gpu_mib > LARGE_CARD_MIB:
        reserved = max(reserved, LARGE_CARD_FLOOR_MIB)
    return reserved + (DRAFT_MODEL_MIB if drafting else 0)


def mem_fraction_static(gpu_mib: int, *, reserved: float) -> float:
    """SGLang's default --mem-fraction-static ([SA]): round((gpu_mem - reserved) / gpu_mem, 3)."""
    return round((gpu_mib - reserved) / gpu_mib, FRACTION_DECIMALS)


def max_total_num_tokens(rest_bytes: int, *, cell_bytes: int, page_tokens: int) -> int:
    """Tokens of KV the pool holds: rest // cell, whole pages (model_runner profile_max_num_token, then
    `max_total_num_tokens // page_size * page_size`); 0 when rest is negative.

    Formula: N = floor(max(rest, 0) / cell / page) * page;  cell = KV bytes of one token on one rank
    """
    tokens = max(rest_bytes, 0) // cell_bytes
    return tokens // page_tokens * page_tokens


def default_max_running_requests(
    total_tokens: int, *, context_tokens: int, attention_dp: int, drafting: bool
) -> int:
    """max_running_requests per attention-DP worker when the flag is left out ([SPEC], [TPW]).

    Formula: speculative: 48 // dp;  else min(N // 2, clamp(int(N / context * 512), 2048, 4096))
    """
    if drafting:
        return max(SPECULATIVE_MAX_RUNNING // attention_dp, 1)
    pool = min(max(int(total_tokens / context_tokens * REQ_POOL_PER_CONTEXT), REQ_POOL_MIN), REQ_POOL_MAX)
    return max(min(total_tokens // 2, pool), 1)


def is_npu(hardware: HardwareProfile) -> bool:
    """SGLang runs its Ascend NPU backend on Huawei cards (hardware_backend/npu)."""
    return hardware.vendor == "huawei"


def page_tokens(hardware: HardwareProfile) -> int:
    """--page-size default: 128 on Ascend, 1 elsewhere ([NPU], [SA])."""
    return NPU_PAGE_TOKENS if is_npu(hardware) else CUDA_PAGE_TOKENS


def sglang_tp(*, tp: int, dp: int) -> int:
    """SGLang's --tp-size for kvplan's tp x dp (DP attention inside one TP group)."""
    return tp * dp
