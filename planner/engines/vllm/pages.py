"""Gated DeltaNet state bytes of one layer on one rank, as vLLM's mamba specs count them (the conv and the
recurrent state a hybrid model's page must hold), and the concurrency and token figures vLLM logs for a pool
(pure). planner/engines/vllm/pool.py cuts the pool with them and re-exports them.
"""

from __future__ import annotations

import math
from typing import Protocol

from planner.dtypes import StorageDType, storage_dtype
from planner.units import BITS_PER_BYTE


class GdnCard(Protocol):
    """The Gated DeltaNet fields of a model card these formulas read (planner.schema.ModelCard has them; a
    protocol keeps this module off the schema's import chain)."""

    @property
    def linear_num_key_heads(self) -> int | None: ...
    @property
    def linear_num_value_heads(self) -> int | None: ...
    @property
    def linear_key_head_dim(self) -> int | None: ...
    @property
    def linear_value_head_dim(self) -> int | None: ...
    @property
    def linear_conv_kernel_dim(self) -> int | None: ...
    @property
    def mamba_ssm_dtype(self) -> str | None: ...


def conv_state_bytes(card: GdnCard, *, conv_dtype: StorageDType, tp: int, num_spec: int) -> int:
    """Gated DeltaNet conv state of one layer on one rank (mamba_utils.py:247-268; qwen3_5.py:381-400).

    Formula: (K - 1 + n_spec) * ceil(C / tp) * b / 8,  C = 2 * nk * dk + nv * dv, b the activation dtype
    """
    nk, nv = card.linear_num_key_heads or 0, card.linear_num_value_heads or 0
    conv_dim = 2 * nk * (card.linear_key_head_dim or 0) + nv * (card.linear_value_head_dim or 0)
    rows = (card.linear_conv_kernel_dim or 1) - 1 + num_spec
    return rows * math.ceil(conv_dim / tp) * conv_dtype.bits // BITS_PER_BYTE


def ssm_state_bytes(card: GdnCard, *, conv_dtype: StorageDType, tp: int) -> int:
    """Gated DeltaNet recurrent (temporal) state of one layer on one rank (mamba_utils.py:247-268).

    Formula: ceil(nv / tp) * dv * dk * b_ssm / 8, b_ssm = mamba_ssm_dtype (float32 for Qwen3.5,
    models/config.py:799-823), else the activation dtype
    """
    ssm_dtype = storage_dtype(card.mamba_ssm_dtype) if card.mamba_ssm_dtype else conv_dtype
    nv = card.linear_num_value_heads or 0
    dims = (card.linear_value_head_dim or 0) * (card.linear_key_head_dim or 0)
    return math.ceil(nv / tp) * dims * ssm_dtype.bits // BITS_PER_BYTE


def max_concurrency(num_blocks: int, *, per_request_blocks: int) -> float:
    """ "Maximum concurrency" vLLM logs (kv_cache_utils.py:937-959): num_blocks / blocks_per_request."""
    return num_blocks / per_request_blocks


def kv_cache_size_tokens(concurrency: float, *, max_model_len: int) -> int:
    """ "GPU KV cache size: N tokens" (kv_cache_utils.py:1877-1887): int(concurrency * max_model_len)."""
    return int(concurrency * max_model_len)


def kv_cache_size_tokens_by_blocks(num_blocks: int, *, groups: int, block_tokens: int) -> int:
    """ "GPU KV cache size: N tokens" as older vLLM logs it: num_blocks // groups * block_size.

    vLLM before the concurrency-based line (still in 0.19.0, vllm-project/vllm issue #40691, which
    quotes kv_cache_utils.py:1319); reproduces vllm-ascend v0.12.0rc1's Qwen3-Next log exactly
    (vllm-ascend issue #5020: 2941 // 4 * 384 = 282,240 tokens).
    """
    return num_blocks // groups * block_tokens
