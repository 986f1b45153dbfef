"""DeepSeek-V4 compressed sparse attention (attention 'csa'): what one token and one sequence keep, and the
attention's weights, per layer class.

Each layer i has a compress ratio r = compress_ratios[i] (entries past num_hidden_layers are the MTP layers'):
    r = 0    the layer attends only its sliding window (the last sliding_window tokens)
    r = 4    CSA: a compressor writes one K=V record of head_dim per 4 tokens (overlapping windows of 8), a
             lightning indexer keeps one int8 index key of index_head_dim per record and picks the
             index_topk best records for each query; the window is attended too
    r = 128  HCA: one record per 128 tokens, every record attended, plus the window
How vllm-ascend 182b75ea allocates it (vllm_ascend/models/layer/attention/layer.py:34-52, 177-199;
models/deepseek_v4/model.py:566-600; compressor.py:44-71, 146-165; indexer.py:83-113, 290-315):
    compressed records  head_dim elements in the KV-cache dtype (AscendMLAAttentionSpec, 1 head, block
                        128 records = 128 * r tokens): head_dim * b / 8 / r bytes per token and layer
    index keys          index_head_dim int8 + one fp16 scale per record (scale_dim 1): (d_idx + 2) / 4
    sliding window      sliding_window tokens of head_dim in bf16 per sequence and layer (the MTP layer too)
    compressor state    fp32 kv_state + score_state of the last coff * r tokens (2 * coff * head_dim each;
                        coff 2 at r = 4, else 1), per sequence and compressed layer, and the indexer's own
                        compressor's (2 * 2 * index_head_dim of 8 tokens) in the r = 4 layers
Not modelled: the engine's page padding (the r = 4 state page of 65,536 B padded to 131,072; vLLM's one
spare sliding-window block), the A5 (950) layouts (fp8 records of head_dim + 128, fp32 index scales).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal, Protocol

from planner.units import BITS_PER_BYTE

if TYPE_CHECKING:  # annotations only: csa stays a leaf under params and the vLLM pool
    from planner.dtypes import StorageDType

# The ratio whose layers pick their records with a lightning indexer (schema_card.CSA_INDEXED_RATIO).
CSA_INDEXED_RATIO = 4

WINDOW_ELEMENT_BYTES = 2  # the sliding-window cache is bf16 on A2/A3 (model.py:590)
INDEX_KEY_BYTES = 1  # index keys are int8 on A2/A3 (indexer.py:293)
INDEX_SCALE_BYTES = 2  # one fp16 dequant scale per index key (indexer.py:111-112)
STATE_ELEMENT_BYTES = 4  # the compressor state is float32 (compressor.py:146)
STATE_VECTORS = 2  # kv_state + score_state (compressor.py:150, 158)
MIX_VECTORS = 2  # mHC: pre and post weights per stream, plus the hc x hc combination (model.py:695)
MHC_SCALES = 3  # hc_attn_scale / hc_ffn_scale entries (model.py:701-702)


class CompressedCard(Protocol):
    """The model-card fields these formulas read (planner.schema_card.ModelCard has them; a protocol keeps
    this module below the card schema in the import graph)."""

    @property
    def compress_ratios(self) -> list[int] | None: ...
    @property
    def num_hidden_layers(self) -> int: ...
    @property
    def mtp_layers(self) -> int: ...
    @property
    def head_dim(self) -> int | None: ...
    @property
    def index_head_dim(self) -> int | None: ...
    @property
    def index_n_heads(self) -> int | None: ...
    @property
    def sliding_window(self) -> int | None: ...
    @property
    def q_lora_rank(self) -> int | None: ...
    @property
    def o_lora_rank(self) -> int | None: ...
    @property
    def o_groups(self) -> int | None: ...
    @property
    def num_attention_heads(self) -> int: ...
    @property
    def hidden_size(self) -> int: ...
    @property
    def hc_mult(self) -> int: ...


# A weight as params.py builds it: (name, part, in_features, out_features, count) of a matmul (a Linear), or
# out_features 0 for a plain tensor of in_features elements each.
Shape = tuple[str, Literal["attention", "norm"], int, int, int]


def split(size: int, tp: int) -> int:
    """Per-rank share of a dimension split across tp ranks: ceil(size / tp) (params.split)."""
    return math.ceil(size / tp)


def overlap(ratio: int) -> int:
    """coff: 2 where the compressor's windows overlap (ratio 4: each record pools 8 tokens), else 1."""
    return 2 if ratio == CSA_INDEXED_RATIO else 1


def ratio_layers(card: CompressedCard, *, mtp: bool = False, pp: int = 1) -> dict[int, int]:
    """Layers per compress ratio on the fullest pipeline stage, {} for other cards.

    Formula: n_r = ceil(#{i < L : compress_ratios[i] = r} / pp), plus the MTP layers' entries
    (compress_ratios[L : L + m], 0 where the list stops) with MTP on.
    """
    if card.compress_ratios is None:
        return {}
    main = card.compress_ratios[: card.num_hidden_layers]
    counts = {r: math.ceil(main.count(r) / pp) for r in sorted(set(main))}
    if mtp:
        extra = card.compress_ratios[card.num_hidden_layers :] + [0] * card.mtp_layers
        for ratio in extra[: card.mtp_layers]:
            counts[ratio] = counts.get(ratio, 0) + 1
    return counts


def record_bytes(card: CompressedCard, *, kv_dtype: StorageDType) -> int:
    """Bytes of one compressed K=V record in one layer: head_dim * b / 8 (b the KV-cache dtype's bits)."""
    return (card.head_dim or 0) * kv_dtype.bits // BITS_PER_BYTE


def index_record_bytes(card: CompressedCard) -> int:
    """Bytes of one index key (a ratio-4 layer's record): d_idx * 1 (int8) + 2 (fp16 scale)."""
    return (card.index_head_dim or 0) * INDEX_KEY_BYTES + INDEX_SCALE_BYTES


def window_record_bytes(card: CompressedCard) -> int:
    """Bytes of one sliding-window entry in one layer: head_dim * 2 (bf16)."""
    return (card.head_dim or 0) * WINDOW_ELEMENT_BYTES


def cache_bytes_per_token(
    card: CompressedCard, *, kv_dtype: StorageDType, mtp: bool = False, pp: int = 1
) -> int:
    """Compressed-cache bytes one token adds on one rank (replicated on every TP rank), rounded up.

    Formula: ceil( sum over ratios r > 1 of n_r * (R + [r = 4] * X) / r )
        n_r  ratio_layers;  R record_bytes (head_dim * b / 8);  X index_record_bytes (d_idx + 2)
    DeepSeek-V4-Flash, bf16: 21 * (1024 + 130) / 4 + 20 * 1024 / 128 = 6,058.5 + 160 = 6,218.5 -> 6,219 B.
    The window and the compressor state are per sequence: state_bytes_per_sequence.
    """
    record, index = record_bytes(card, kv_dtype=kv_dtype), index_record_bytes(card)
    total = 0.0
    for ratio, layers in ratio_layers(card, mtp=mtp, pp=pp).items():
        if ratio > 1:
            total += layers * (record + (index if ratio == CSA_INDEXED_RATIO else 0)) / ratio
    return math.ceil(total)


def state_bytes_per_sequence(card: CompressedCard, *, mtp: bool = False, pp: int = 1) -> int:
    """Fixed bytes one sequence holds on one rank, whatever its length (window + compressor states).

    Formula: sum over layers of W * d * 2                                        (sliding window, bf16)
           + sum over ratios r > 1 of n_r * (coff * r) * 2 * coff * d * 4       (compressor state, fp32)
           + n_4 * (2 * 4) * 2 * 2 * d_idx * 4                                  (indexer's compressor)
        W sliding_window;  d head_dim;  d_idx index_head_dim;  coff overlap(r)
    DeepSeek-V4-Flash: 43 * 131,072 + 21 * 65,536 + 20 * 524,288 + 21 * 16,384 = 17,842,176 B (17 MiB).
    """
    counts = ratio_layers(card, mtp=mtp, pp=pp)
    head, index = card.head_dim or 0, card.index_head_dim or 0
    window = sum(counts.values()) * (card.sliding_window or 0) * window_record_bytes(card)
    state = 0
    for ratio, layers in counts.items():
        if ratio > 1:
            c = overlap(ratio)
            state += layers * c * ratio * STATE_VECTORS * c * head * STATE_ELEMENT_BYTES
    c4 = overlap(CSA_INDEXED_RATIO)
    indexer = c4 * CSA_INDEXED_RATIO * STATE_VECTORS * c4 * index * STATE_ELEMENT_BYTES
    return window + state + counts.get(CSA_INDEXED_RATIO, 0) * indexer


def attention_tensors(card: CompressedCard, *, tp: int, layers: int) -> list[Shape]:
    """The attention block every one of `layers` layers has, on one rank (model.py:466-520).

    wq_a H -> q_lora (replicated) + q_norm; wq_b q_lora -> heads * d (column); wkv H -> d (one shared K=V
    head, replicated) + kv_norm; wo_a heads * d / G -> G * o_lora (column: G / tp groups per rank); wo_b
    G * o_lora -> H (row); attn_sink (one fp32 per head); mHC (hc = hc_mult streams of H): hc_attn_fn and
    hc_ffn_fn (2 + hc) * hc x hc * H each, their bases and 3 scales (model.py:695-702).
    """
    q_lora, heads, head = card.q_lora_rank or 0, card.num_attention_heads, card.head_dim or 0
    groups, o_lora = card.o_groups or 1, card.o_lora_rank or 0
    mix = (MIX_VECTORS + card.hc_mult) * card.hc_mult
    mhc = 2 * (mix * card.hc_mult * card.hidden_size + mix + MHC_SCALES)
    return [
        ("wq_a", "attention", card.hidden_size, q_lora, layers),
        ("wq_b", "attention", q_lora, split(heads * head, tp), layers),
        ("wkv", "attention", card.hidden_size, head, layers),
        ("q_kv_norms", "norm", q_lora + head, 0, layers),
        ("o_proj", "attention", heads * head // groups, split(groups * o_lora, tp), layers),
        ("o_proj", "attention", split(groups * o_lora, tp), card.hidden_size, layers),
        ("attn_sink", "attention", split(heads, tp), 0, layers),
        ("mhc", "norm", mhc if card.hc_mult > 1 else 0, 0, layers),
    ]


def compressor_tensors(card: CompressedCard, *, ratio: int, head: int, layers: int) -> list[Shape]:
    """One compressor of `layers` layers (replicated): wkv and wgate H -> coff * head, ape ratio x coff *
    head (fp32), norm head (compressor.py:121-144)."""
    width = overlap(ratio) * head
    return [
        ("compressor.wkv_wgate", "attention", card.hidden_size, 2 * width, layers),
        ("compressor.ape_norm", "attention", ratio * width + head, 0, layers),
    ]


def csa_shapes(card: CompressedCard, *, tp: int, counts: dict[int, int]) -> list[Shape]:
    """Every attention weight of the layers in `counts` (ratio_layers) on one rank: attention_tensors for
    all, a compressor of head_dim for r > 1, and for r = 4 the lightning indexer (indexer.py:270-315): wq_b
    q_lora -> H_idx * d_idx, weights_proj H -> H_idx (unquantized) and its own compressor of d_idx (ratio 4).
    """
    tensors = attention_tensors(card, tp=tp, layers=sum(counts.values()))
    head, index = card.head_dim or 0, card.index_head_dim or 0
    for ratio, layers in counts.items():
        if ratio > 1:
            tensors += compressor_tensors(card, ratio=ratio, head=head, layers=layers)
        if ratio == CSA_INDEXED_RATIO:
            heads = card.index_n_heads or 0
            tensors += [
                ("indexer.wq_b", "attention", card.q_lora_rank or 0, heads * index, layers),
                ("indexer.weights_proj", "attention", card.hidden_size * heads, 0, layers),
                *compressor_tensors(card, ratio=ratio, head=index, layers=layers),
            ]
    return tensors
