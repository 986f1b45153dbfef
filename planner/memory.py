"""Memory formulas: weights, KV cache, linear-attention state, activations, and the KV budget.

All results are bytes per device (one tensor-parallel rank).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from planner import csa
from planner.dtypes import WEIGHT_SCHEMES, StorageDType, WeightScheme, storage_dtype
from planner.params import (
    Linear,
    Plain,
    Shards,
    indexer_key_bytes_per_layer,
    kv_heads_per_rank,
    model_tensors,
    split,
    stage_layers,
)
from planner.schema import ModelCard
from planner.units import BITS_PER_BYTE

Tokens = TypeVar("Tokens", int, npt.NDArray[np.int64])  # one token count, or an array of them

# kvplan's own estimate of live activation vectors per prefill token besides the widest op's output:
# the residual stream and its normed copy.  [assumed: eager prefill keeps ~2 hidden-size buffers live]
RESIDUAL_BUFFERS_PER_TOKEN = 2


# A separate draft model's matmuls (params part "draft", planner/drafts.py) are stored in 16 bits.
# [assumed: vLLM loads a draft with its own checkpoint's quantization; EAGLE3 / DFlash heads ship unquantized]
DRAFT_WEIGHT_SCHEME = "bf16"


def linear_scheme(linear: Linear, *, scheme: WeightScheme) -> WeightScheme:
    """The scheme a matmul is stored in: `scheme`, or its other_linears scheme outside the routed experts;
    DRAFT_WEIGHT_SCHEME for a draft model's."""
    if linear.part == "draft":
        return WEIGHT_SCHEMES[DRAFT_WEIGHT_SCHEME]
    if scheme.other_linears is None or linear.part == "moe_experts":
        return scheme
    return WEIGHT_SCHEMES[scheme.other_linears]


def linear_weight_bytes(linear: Linear, *, scheme: WeightScheme) -> int:
    """Bytes of one quantized matmul weight on one rank, scales included, in linear_scheme(linear, scheme).

    Formula:
        bytes = count * [ceil(in * out * bits / 8) + out * s_ch + out * ceil(in / g) * s_g]
        bits  scheme.weight_bits;  s_ch scheme.scale_bytes_per_channel
        g     scheme.group_size (term dropped when 0);  s_g scheme.scale_bytes_per_group
    """
    scheme = linear_scheme(linear, scheme=scheme)
    data_bytes = math.ceil(linear.in_features * linear.out_features * scheme.weight_bits / BITS_PER_BYTE)
    channel_scale_bytes = linear.out_features * scheme.scale_bytes_per_channel
    group_scale_bytes = 0
    if scheme.group_size:
        group_scale_bytes = (
            linear.out_features
            * math.ceil(linear.in_features / scheme.group_size)
            * (scheme.scale_bytes_per_group)
        )
    return linear.count * (data_bytes + channel_scale_bytes + group_scale_bytes)


def weight_bytes_per_device(
    card: ModelCard,
    *,
    scheme: WeightScheme,
    activation_dtype: StorageDType,
    tp: int,
    include_mtp: bool = False,
    shards: Shards | None = None,
) -> int:
    """Weight bytes held by one rank (one tensor-parallel rank; `shards` for EP/DP/PP layouts).

    Formula:
        bytes = sum over matmul weights of linear_weight_bytes(scheme)
              + sum over plain tensors (embedding, lm_head, norms, router, conv, biases)
                of elements * b_act / 8
    Matmul weights are quantized by the scheme; plain tensors stay in the 16-bit activation dtype, as
    MindIE and vLLM keep embeddings, lm_head and norms unquantized. Shapes per rank from params.model_tensors.
    """
    tensors = model_tensors(card, tp=tp, include_mtp=include_mtp, shards=shards)
    return sum(weight_bytes_by_part(tensors, scheme=scheme, activation_dtype=activation_dtype).values())


def weight_bytes_by_part(
    tensors: Iterable[Linear | Plain], *, scheme: WeightScheme, activation_dtype: StorageDType
) -> dict[str, int]:
    """Weight bytes of one rank's tensors (params.model_tensors) per part (embedding, attention, mlp,
    moe_experts, moe_shared, norm, ...).

    Formula: per part, sum of linear_weight_bytes (matmuls) + elements * b_act / 8 (plain tensors).
    """
    parts: dict[str, int] = {}
    for tensor in tensors:
        if isinstance(tensor, Linear):
            size = linear_weight_bytes(tensor, scheme=scheme)
        else:
            size = plain_tensor_bytes(tensor, dtype=activation_dtype)
        parts[tensor.part] = parts.get(tensor.part, 0) + size
    return parts


def plain_tensor_bytes(tensor: Plain, *, dtype: StorageDType) -> int:
    """Bytes of an unquantized tensor: elements * bits / 8."""
    return tensor.elements * dtype.bits // BITS_PER_BYTE


def kv_cached_layers(card: ModelCard, *, mtp: bool = False, pp: int = 1) -> int:
    """Layers whose KV cache one token fills on one rank: the full-attention layers of the fullest
    pipeline stage, plus one with MTP on.

    Formula:  L_kv = ceil(L / pp) + m
        L   card.full_attention_layers (linear-attention layers keep a state, not a KV cache)
        m   1 with MTP on, else 0: MindIE's KV allocator adds one layer to its block when
            num_speculative_tokens >= 1, whatever the count (MindIE-LLM
            mindie_llm/text_generator/utils/kvcache_settings.py:119-120 @8b4871ad); vLLM's MTP module
            keeps its own attention layer's cache
    """
    return stage_layers(card.full_attention_layers, pp) + (1 if mtp else 0)


def kv_cache_bytes_per_token(
    card: ModelCard, *, kv_dtype: StorageDType, tp: int, mtp: bool = False, pp: int = 1
) -> int:
    """KV-cache bytes one token occupies on one rank (only layers that keep a cache).

    Formula (GQA/MHA):  2 * L_kv * H_kv_rank * d * b / 8 + L_idx * x
    Formula (MLA):      L_kv * ((kv_lora_rank + qk_rope_head_dim) * b / 8 + x)   (replicated on each rank)
        L_kv       kv_cached_layers: ceil(L / pp) full-attention layers, +1 with MTP on
        H_kv_rank  params.kv_heads_per_rank (replicate when tp > H_kv, then ceil)
        d          card.head_dim;  b  kv_dtype.bits
        x          indexer_key_bytes_per_layer: the sparse-attention index key beside the latent or K/V
                   (0 for dense attention), replicated on each rank
        L_idx      MiniMax sparse attention: ceil(card.sparse_attention_layers / pp), +1 with MTP on (the
                   dense layers keep no index keys); 0 for dense GQA
    Linear-attention (GDN) layers keep no KV cache: see linear_state_bytes_per_sequence.
    DeepSeek-V4 (attention 'csa'): csa.cache_bytes_per_token, the compressed records and index keys of the
    ratio-4 and ratio-128 layers (its sliding window and compressor state are per sequence).
    """
    if card.attention_traits.compressed_kv:
        return csa.cache_bytes_per_token(card, kv_dtype=kv_dtype, mtp=mtp, pp=pp)
    layers = kv_cached_layers(card, mtp=mtp, pp=pp)
    if card.attention_traits.latent_kv:
        latent_width = (card.kv_lora_rank or 0) + (card.qk_rope_head_dim or 0)
        per_layer = latent_width * kv_dtype.bits // BITS_PER_BYTE
        return layers * (per_layer + indexer_key_bytes_per_layer(card, kv_dtype=kv_dtype))
    head_dim = card.head_dim or 0
    kv = 2 * layers * kv_heads_per_rank(card, tp=tp) * head_dim * kv_dtype.bits // BITS_PER_BYTE
    if not card.is_sparse_attention:
        return kv
    index_layers = stage_layers(card.sparse_attention_layers, pp) + (1 if mtp else 0)
    return kv + index_layers * indexer_key_bytes_per_layer(card, kv_dtype=kv_dtype)


def linear_state_bytes_per_sequence(
    card: ModelCard, *, conv_dtype: StorageDType, tp: int, pp: int = 1, mtp: bool = False
) -> int:
    """Fixed state one sequence holds on one rank, whatever its length: Gated DeltaNet's conv + recurrent
    state, or DeepSeek-V4's sliding windows and compressor states (csa.state_bytes_per_sequence; `mtp` adds
    the MTP layer's window).

    Formula:
        per layer = (K - 1) * ceil(C / tp) * b_conv / 8  +  ceil(nv / tp) * dk * dv * b_ssm / 8
        C       conv channels = 2 * nk * dk + nv * dv
        K       linear_conv_kernel_dim (the conv state keeps K - 1 past steps, as vLLM allocates it)
        b_ssm   bits of mamba_ssm_dtype (float32 in Qwen3.5 configs), else of the activation dtype
        total   = per layer * linear-attention layers (of the fullest pipeline stage: ceil(L_lin / pp))
    """
    if card.attention_traits.compressed_kv:
        return csa.state_bytes_per_sequence(card, mtp=mtp, pp=pp)
    if card.linear_attention_layers == 0:
        return 0
    nk, nv = card.linear_num_key_heads or 0, card.linear_num_value_heads or 0
    dk, dv = card.linear_key_head_dim or 0, card.linear_value_head_dim or 0
    kernel = card.linear_conv_kernel_dim or 0
    ssm_dtype = storage_dtype(card.mamba_ssm_dtype) if card.mamba_ssm_dtype else conv_dtype
    conv_bits = (kernel - 1) * split(2 * nk * dk + nv * dv, tp) * conv_dtype.bits
    recurrent_bits = split(nv, tp) * dk * dv * ssm_dtype.bits
    layers = stage_layers(card.linear_attention_layers, pp)
    return layers * (conv_bits + recurrent_bits) // BITS_PER_BYTE


def widest_activation_per_token(card: ModelCard, *, tp: int, moe_tp: int | None = None) -> int:
    """Elements per token of the widest intermediate output of any layer on one rank.

    Formula: max(3 * I_rank (gate_up output + activated half), q + 2 * kv widths, GDN in_proj width,
    rows * (H + 3 * I_moe_rank) for MoE token permutation), I_moe_rank = ceil(I_moe / moe_tp) and
    rows = ceil(top_k * moe_tp / tp) routed rows per prefill token of the DP group: moe_tp defaults to tp
    (every rank permutes all top_k rows); under EP a DP group's tokens are split over its tp ranks before
    dispatch and each of the ep ranks receives its balanced share (vllm-ascend's MC2 and
    all-to-all paths; load imbalance left to the speed model).
    """
    widths = [3 * split(card.intermediate_size, tp)]
    if card.head_dim:
        q_width = split(card.num_attention_heads * card.head_dim * (2 if card.attn_output_gate else 1), tp)
        widths.append(q_width + 2 * kv_heads_per_rank(card, tp=tp) * card.head_dim)
    if card.linear_attention_layers:
        nk, nv = card.linear_num_key_heads or 0, card.linear_num_value_heads or 0
        widths.append(
            split(
                2 * nk * (card.linear_key_head_dim or 0)
                + 2 * nv * (card.linear_value_head_dim or 0)
                + 2 * nv,
                tp,
            )
        )
    if card.is_moe:
        expert_tp = moe_tp or tp
        moe_width = split(card.moe_intermediate_size or 0, expert_tp)
        rows = math.ceil((card.num_experts_per_tok or 0) * expert_tp / tp)
        widths.append(rows * (card.hidden_size + 3 * moe_width))
    return max(widths)


def activation_bytes_per_device(
    card: ModelCard,
    *,
    max_prefill_tokens: int,
    activation_dtype: StorageDType,
    tp: int,
    moe_tp: int | None = None,
) -> int:
    """Peak activation memory of the largest prefill batch on one rank (the warm-up MindIE sizes KV after).

    Formula: T * (R * H + W) * b / 8
        T  max_prefill_tokens;  H hidden_size;  R RESIDUAL_BUFFERS_PER_TOKEN
        W  widest_activation_per_token;  b activation_dtype.bits
    An estimate: engines free per-op buffers eagerly, so the peak is one op's output plus the residuals.
    """
    widest = widest_activation_per_token(card, tp=tp, moe_tp=moe_tp)
    per_token = RESIDUAL_BUFFERS_PER_TOKEN * card.hidden_size + widest
    return max_prefill_tokens * per_token * activation_dtype.bits // BITS_PER_BYTE


def usable_bytes(capacity_bytes: int, *, memory_fraction: float) -> int:
    """Bytes the engine may use: floor(capacity * fraction) (MindIE NPU_MEMORY_FRACTION semantics)."""
    return math.floor(capacity_bytes * memory_fraction)


def kv_budget_bytes(usable: int, *, weights: int, activation: int, runtime: int) -> int:
    """Bytes left for KV cache and states: usable - weights - activation - runtime (may be negative).

    This is MindIE's npuMemSize=-1 rule: KV = total * fraction - (memory in use after warm-up).
    """
    return usable - weights - activation - runtime


def paged_tokens(seq_tokens: Tokens, *, block_size_tokens: int) -> Tokens:
    """Tokens of KV actually allocated for a sequence: ceil(seq / block) * block (paged attention).

    Integer ceiling division, so it holds for one count or an int64 array of them.
    """
    return -(-seq_tokens // block_size_tokens) * block_size_tokens


def sequence_bytes(
    seq_tokens: Tokens, *, kv_bytes_per_token: int, state_bytes: int, block_size_tokens: int
) -> Tokens:
    """Bytes one sequence of seq_tokens holds: paged_tokens * kv_bytes_per_token + fixed state (int or
    int64 array)."""
    return paged_tokens(seq_tokens, block_size_tokens=block_size_tokens) * kv_bytes_per_token + state_bytes


def max_concurrent_sequences(budget_bytes: int, *, per_sequence_bytes: int) -> int:
    """Largest n with n * per_sequence <= budget: floor(budget / per_sequence); 0 for a negative budget."""
    if budget_bytes <= 0:
        return 0
    return budget_bytes // per_sequence_bytes


def max_seq_len_at_batch(
    budget_bytes: int, *, batch: int, kv_bytes_per_token: int, state_bytes: int, block_size_tokens: int
) -> int:
    """Longest sequence (a whole number of blocks) that `batch` sequences can each hold.

    Formula: floor((budget / batch - state) / (block * kv_per_token)) * block; 0 if nothing fits.
    """
    per_sequence_budget = budget_bytes // batch - state_bytes
    if per_sequence_budget <= 0 or kv_bytes_per_token == 0:
        return 0
    blocks = per_sequence_budget // (block_size_tokens * kv_bytes_per_token)
    return blocks * block_size_tokens
