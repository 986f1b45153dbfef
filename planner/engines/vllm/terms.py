"""The small start-up terms of one vLLM / vllm-ascend rank that come from the model and the layout alone
(bytes): HCCL communicator buffers, vllm-ascend's DP buffer, the rotary cos/sin cache and the dummy sampler's
logits. startup.py adds them to the engine's arithmetic.
"""

from __future__ import annotations

import math

from planner import units
from planner.dtypes import StorageDType
from planner.schema import ModelCard

FP32_BYTES = 4  # the dummy sampler's logits are fp32 (vLLM sampler.py:96)
HCCL_BUFFSIZE_DEFAULT_MIB = 200  # HCCL's default HCCL_BUFFSIZE (MB); [VA] utils.py:70 uses it for its groups
HCCL_BUFFERS_PER_COMMUNICATOR = 2  # S: CANN HCCL env doc: each communicator holds an input and an output
# buffer of HCCL_BUFFSIZE each (not re-read at a commit here)
DP_BUFFER_MIN_MIB = 50  # [VA] 182b75ea utils.py:71 _MIN_DP_BUFFER_SIZE, calculate_dp_buffer_size :994-1005


def hccl_communicators(
    *,
    tp: int,
    dp: int = 1,
    moe: bool = False,
    ep: bool = False,
    moe_groups_need_ep: bool = False,
    pp: int = 1,
) -> int:
    """Communicators that hold HCCL_BUFFSIZE buffers on one rank (D, an assumption from the group list).

    The TP group when tp > 1, and the MoE dispatch group (MC2 / EP, sized by HCCL_BUFFSIZE, [VA] utils.py:
    976-984) for a MoE model spread over more than one rank; with moe_groups_need_ep (vllm-ascend >=
    v0.20, EngineVersion.moe_groups_need_ep) only when expert parallelism is on; the pipeline group's
    send / recv when pp > 1 (the same assumption, no log with pp read). The DP group has its own small
    buffer (dp_buffer_bytes).
    """
    groups = (1 if tp > 1 else 0) + (1 if pp > 1 else 0)
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
