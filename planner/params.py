"""Exact tensor shapes of a model card, per tensor-parallel rank.

Every weight is either a `Linear` (a matmul weight that weight quantization applies to) or a `Plain`
tensor (embeddings, norms, router, conv, biases: kept in the 16-bit activation dtype, as the engines do).
Shapes are per rank: column-parallel layers split their outputs, row-parallel layers their inputs,
K/V projections follow MindIE's replicate-then-ceil rule (memory.kv_heads_per_device). At tp=1 the sum
of elements is the model's exact parameter count.
"""

from __future__ import annotations

import math
from typing import Literal

from planner import csa
from planner.dtypes import StorageDType
from planner.records import record
from planner.schema_card import ModelCard
from planner.units import BITS_PER_BYTE

# An 8-bit index-key cache keeps one fp16 dequant scale per token and layer beside it (sparse LI C8 on
# A2/A3: c8_k_cache_dtype int8, c8_k_scale_cache_dtype float16).  [source: vllm-ascend 182b75ea
# vllm_ascend/attention/sfa_v1.py:542-549]
INDEXER_QUANTIZED_BITS = 8
INDEXER_SCALE_BYTES = 2
# MiniMax sparse attention keeps its index keys in bf16 whatever the KV-cache dtype.  [source: vllm-ascend
# 182b75ea vllm_ascend/models/minimax_m3/msa_m3.py:161-185 (AscendMiniMaxM3IndexerCache: dtype bfloat16,
# AscendSFAIndexerCacheSpec num_kv_heads 1, head_size sparse_index_dim)]
MSA_INDEX_KEY_BYTES = 2

Part = Literal[
    "embedding", "attention", "linear_attention", "mlp", "moe_experts", "moe_shared", "norm", "lm_head",
    "mtp", "draft",
]  # fmt: skip


@record
class Linear:
    """A matmul weight of shape (out_features, in_features) on one rank, repeated `count` times."""

    name: str
    part: Part
    in_features: int
    out_features: int
    count: int

    @property
    def elements(self) -> int:
        """Weight elements: count * in * out."""
        return self.count * self.in_features * self.out_features


@record
class Plain:
    """A non-matmul tensor (embedding, norm, bias, conv, router) on one rank, repeated `count` times."""

    name: str
    part: Part
    elements_each: int
    count: int

    @property
    def elements(self) -> int:
        """Elements: count * elements_each."""
        return self.count * self.elements_each


@record
class Shards:
    """How a layout beyond tensor parallelism cuts one rank's weights (planner/layout.py builds it).

    moe_tp            tensor-parallel degree inside each routed expert (tp * dp / ep)
    experts_per_rank  routed experts a rank holds, redundant (EPLB) copies included: (E + R) / ep
    pp                pipeline stages: a rank holds ceil(n / pp) layers of each kind (the fullest stage)
    """

    moe_tp: int
    experts_per_rank: int
    pp: int = 1


def tp_only_shards(card: ModelCard, *, tp: int) -> Shards:
    """The shards of a tensor-parallel-only plan: every expert on every rank, split tp ways; one stage."""
    return Shards(moe_tp=tp, experts_per_rank=card.routed_expert_count, pp=1)


def stage_layers(layers: int, pp: int) -> int:
    """Layers of one kind on the fullest pipeline stage: ceil(layers / pp)."""
    return math.ceil(layers / pp)


def split(size: int, tp: int) -> int:
    """Per-rank share of a dimension split across tp ranks: ceil(size / tp)."""
    return math.ceil(size / tp)


def kv_heads_per_rank(card: ModelCard, *, tp: int) -> int:
    """KV heads each rank holds (MindIE/ATB rule).

    Formula: if H_kv < tp each head is first replicated tp / H_kv times (rounded up), then
    per_rank = ceil(H_kv * repeat / tp); so every rank keeps at least one whole head.
    H_kv = card.num_key_value_heads.
    """
    kv_heads = card.num_key_value_heads
    repeat = math.ceil(tp / kv_heads) if kv_heads < tp else 1
    return math.ceil(kv_heads * repeat / tp)


def indexer_key_bytes_per_layer(card: ModelCard, *, kv_dtype: StorageDType) -> int:
    """Bytes of one token's lightning-indexer key in one layer, on every rank (0 without sparse attention).

    Formula: d_idx * b / 8 + s
        d_idx  card.index_head_dim (one key per token: the indexer's keys are shared by its heads)
        b      kv_dtype.bits: vllm-ascend stores the index key in the KV-cache dtype (DeepSeek); 16 on a GQA
               card (MiniMax: MSA_INDEX_KEY_BYTES, bf16 whatever the KV dtype)
        s      INDEXER_SCALE_BYTES (one fp16 dequant scale per token) when b = 8, else 0
    Replicated on every TP rank like the latent (the indexer is not split over heads).
    [source: vllm-ascend 182b75ea worker/model_runner_v1.py:4736-4746 (AscendSFAIndexerCacheSpec: head_size
    index_head_dim, dtype kv_cache_dtype, or int8 + scale_dim 1 of c8_k_scale_cache_dtype with sparse LI C8)
    and core/kv_cache_interface.py:119-138 (page = block * (head_size * dtype + scale_dim * scale dtype));
    vLLM on CUDA stores fp8 + a 4-byte scale per 128 elements instead (deepseek_v2.py Indexer.k_cache), which
    this does not model]
    """
    if card.index_head_dim is None:
        return 0
    if not card.attention_traits.latent_kv:  # MiniMax sparse attention: bf16 keys, no scale
        return card.index_head_dim * MSA_INDEX_KEY_BYTES
    scale = INDEXER_SCALE_BYTES if kv_dtype.bits == INDEXER_QUANTIZED_BITS else 0
    return card.index_head_dim * kv_dtype.bits // BITS_PER_BYTE + scale


def attention_tensors(card: ModelCard, *, tp: int, layers: int) -> list[Linear | Plain]:
    """Full (GQA/MHA) attention weights of `layers` layers on one rank.

    q_proj H -> q*hd (x2 with an output gate), k/v_proj H -> kv_rank*hd, o_proj q*hd -> H,
    optional q/k/v biases and per-head q/k norms (hd each, replicated).
    """
    hd = card.head_dim or 0
    q_out = card.num_attention_heads * hd * (2 if card.attn_output_gate else 1)
    kv_out = kv_heads_per_rank(card, tp=tp) * hd
    tensors: list[Linear | Plain] = [
        Linear("q_proj", "attention", card.hidden_size, split(q_out, tp), layers),
        Linear("k_proj", "attention", card.hidden_size, kv_out, layers),
        Linear("v_proj", "attention", card.hidden_size, kv_out, layers),
        Linear("o_proj", "attention", split(card.num_attention_heads * hd, tp), card.hidden_size, layers),
    ]
    if card.attention_bias:
        tensors.append(Plain("qkv_bias", "attention", split(q_out, tp) + 2 * kv_out, layers))
    if card.qk_norm:
        tensors.append(Plain("qk_norm", "norm", 2 * hd, layers))
    return tensors


def mla_tensors(card: ModelCard, *, tp: int, layers: int) -> list[Linear | Plain]:
    """Multi-head latent attention (DeepSeek) weights of `layers` layers on one rank.

    q: H -> q_lora (replicated) -> heads*(nope+rope) (column), or H -> heads*(nope+rope) without q_lora;
    kv_a: H -> kv_lora + rope (replicated); kv_b: kv_lora -> heads*(nope+v) (column); o: heads*v -> H (row).
    """
    heads = card.num_attention_heads
    nope, rope = card.qk_nope_head_dim or 0, card.qk_rope_head_dim or 0
    v_dim, kv_lora = card.v_head_dim or 0, card.kv_lora_rank or 0
    tensors: list[Linear | Plain] = []
    if card.q_lora_rank:
        tensors += [
            Linear("q_a_proj", "attention", card.hidden_size, card.q_lora_rank, layers),
            Plain("q_a_layernorm", "norm", card.q_lora_rank, layers),
            Linear("q_b_proj", "attention", card.q_lora_rank, split(heads * (nope + rope), tp), layers),
        ]
    else:
        tensors.append(
            Linear("q_proj", "attention", card.hidden_size, split(heads * (nope + rope), tp), layers)
        )
    tensors += [
        Linear("kv_a_proj_with_mqa", "attention", card.hidden_size, kv_lora + rope, layers),
        Plain("kv_a_layernorm", "norm", kv_lora, layers),
        Linear("kv_b_proj", "attention", kv_lora, split(heads * (nope + v_dim), tp), layers),
        Linear("o_proj", "attention", split(heads * v_dim, tp), card.hidden_size, layers),
    ]
    return tensors + indexer_tensors(card, layers=layers)


def indexer_tensors(card: ModelCard, *, layers: int) -> list[Linear | Plain]:
    """DeepSeek sparse attention's lightning indexer of `layers` layers, replicated on every rank (none for
    dense MLA).

    wq_b: q_lora -> H_idx * d_idx (quantized like the other linears); wk_weights_proj: H -> d_idx + H_idx
    (the key and the per-head weights, one unquantized bf16 GEMM); k_norm: a LayerNorm of d_idx (weight and
    bias). H_idx index_n_heads, d_idx index_head_dim.  [source: vLLM deepseek_v2.py class Indexer
    (ReplicatedLinear wq_b; MergedColumnParallelLinear wk_weights_proj, quant_config None, disable_tp)]
    """
    if not card.is_sparse_attention:
        return []
    heads, dim = card.index_n_heads or 0, card.index_head_dim or 0
    return [
        Linear("indexer.wq_b", "attention", card.q_lora_rank or 0, heads * dim, layers),
        Plain("indexer.wk_weights_proj", "attention", card.hidden_size * (dim + heads), layers),
        Plain("indexer.k_norm", "norm", 2 * dim, layers),
    ]


def csa_tensors(card: ModelCard, *, tp: int, counts: dict[int, int]) -> list[Linear | Plain]:
    """DeepSeek-V4's attention weights of the layers in `counts` (layers per compress ratio) on one rank:
    csa.csa_shapes as Linear (a matmul, out_features > 0) and Plain tensors."""
    return [
        Linear(name, part, fan_in, fan_out, count) if fan_out else Plain(name, part, fan_in, count)
        for name, part, fan_in, fan_out, count in csa.csa_shapes(card, tp=tp, counts=counts)
    ]


def msa_indexer_tensors(card: ModelCard, *, tp: int, layers: int) -> list[Linear | Plain]:
    """MiniMax sparse attention's indexer of `layers` sparse layers on one rank (none for other cards).

    index_q_proj: H -> H_idx_rank * d_idx (index heads = KV heads, split like them); index_k_proj: H -> d_idx
    (one key per token, replicated); index_q_norm and index_k_norm: d_idx each.  [source: vllm-ascend 182b75ea
    vllm_ascend/models/minimax_m3/minimax_m3.py:181-240 (num_idx_heads = num_kv_heads per rank; fused
    qkv+index projection); checkpoint shapes index_q_proj [512, 6144], index_k_proj [128, 6144] (MiniMax-M3)]
    """
    if not card.is_sparse_attention or card.attention_traits.latent_kv:
        return []
    dim = card.index_head_dim or 0
    return [
        Linear("index_q_proj", "attention", card.hidden_size, kv_heads_per_rank(card, tp=tp) * dim, layers),
        Linear("index_k_proj", "attention", card.hidden_size, dim, layers),
        Plain("index_qk_norm", "norm", 2 * dim, layers),
    ]


def linear_attention_tensors(card: ModelCard, *, tp: int, layers: int) -> list[Linear | Plain]:
    """Gated DeltaNet (Qwen3-Next / Qwen3.5) weights of `layers` layers on one rank.

    in_proj_qkvz: H -> 2*nk*dk + 2*nv*dv; in_proj_ba: H -> 2*nv; out_proj: nv*dv -> H (row);
    depthwise conv1d over conv_dim = 2*nk*dk + nv*dv channels with kernel K; dt_bias and A_log (nv each);
    gated RMSNorm weight (dv, replicated). nk, nv = linear_num_key/value_heads; dk, dv = head dims.
    """
    nk, nv = card.linear_num_key_heads or 0, card.linear_num_value_heads or 0
    dk, dv = card.linear_key_head_dim or 0, card.linear_value_head_dim or 0
    kernel = card.linear_conv_kernel_dim or 0
    conv_dim = 2 * nk * dk + nv * dv
    return [
        Linear(
            "in_proj_qkvz", "linear_attention", card.hidden_size, split(2 * nk * dk + 2 * nv * dv, tp), layers
        ),
        Linear("in_proj_ba", "linear_attention", card.hidden_size, split(2 * nv, tp), layers),
        Linear("out_proj", "linear_attention", split(nv * dv, tp), card.hidden_size, layers),
        Plain("conv1d", "linear_attention", split(conv_dim, tp) * kernel, layers),
        Plain("dt_bias_A_log", "linear_attention", 2 * split(nv, tp), layers),
        Plain("gated_norm", "norm", dv, layers),
    ]


def dense_mlp_tensors(
    card: ModelCard, *, tp: int, layers: int, width: int, part: Part = "mlp"
) -> list[Linear]:
    """Gated MLP (SwiGLU) of `layers` layers: gate_up H -> 2*width (column), down width -> H (row)."""
    return [
        Linear("gate_up_proj", part, card.hidden_size, 2 * split(width, tp), layers),
        Linear("down_proj", part, split(width, tp), card.hidden_size, layers),
    ]


def moe_tensors(
    card: ModelCard, *, tp: int, layers: int, shards: Shards | None = None
) -> list[Linear | Plain]:
    """MoE MLP of `layers` layers: the rank's routed experts (shards.experts_per_rank of E, each a gated MLP
    of moe_intermediate_size split shards.moe_tp ways; all E split tp ways without shards), a replicated
    router H -> E (plus DeepSeek's E score-correction biases), and shared experts split tp ways
    (shared_expert_intermediate_size, or n_shared_experts * moe_intermediate_size) with Qwen's 1-wide gate.
    """
    experts = card.routed_expert_count
    cut = shards or tp_only_shards(card, tp=tp)
    width = card.moe_intermediate_size or 0
    held = layers * cut.experts_per_rank
    tensors: list[Linear | Plain] = [
        Linear("experts.gate_up_proj", "moe_experts", card.hidden_size, 2 * split(width, cut.moe_tp), held),
        Linear("experts.down_proj", "moe_experts", split(width, cut.moe_tp), card.hidden_size, held),
        Plain("router", "moe_experts", card.hidden_size * experts, layers),
    ]
    if card.n_routed_experts:
        tensors.append(Plain("e_score_correction_bias", "moe_experts", experts, layers))
    shared = card.shared_expert_intermediate_size or (card.n_shared_experts or 0) * width
    if shared:
        tensors += dense_mlp_tensors(card, tp=tp, layers=layers, width=shared, part="moe_shared")
    if card.shared_expert_intermediate_size:
        tensors.append(Plain("shared_expert_gate", "moe_shared", card.hidden_size, layers))
    return tensors


def decoder_tensors(card: ModelCard, *, tp: int, shards: Shards | None = None) -> list[Linear | Plain]:
    """Every weight of the decoder stack (no embedding, head or MTP) on one rank (of the fullest stage)."""
    pp = shards.pp if shards else 1
    attention = mla_tensors if card.attention_traits.latent_kv else attention_tensors
    if card.attention_traits.compressed_kv:  # DeepSeek-V4: per-ratio compressors and indexers
        tensors = csa_tensors(card, tp=tp, counts=csa.ratio_layers(card, pp=pp))
    else:
        tensors = attention(card, tp=tp, layers=stage_layers(card.full_attention_layers, pp))
        tensors += msa_indexer_tensors(card, tp=tp, layers=stage_layers(card.sparse_attention_layers, pp))
    if card.linear_attention_layers:
        linear_layers = stage_layers(card.linear_attention_layers, pp)
        tensors += linear_attention_tensors(card, tp=tp, layers=linear_layers)
    dense_layers = stage_layers(card.num_hidden_layers - card.moe_layers, pp)
    if dense_layers:
        tensors += dense_mlp_tensors(card, tp=tp, layers=dense_layers, width=card.intermediate_size)
    if card.moe_layers:
        tensors += moe_tensors(card, tp=tp, layers=stage_layers(card.moe_layers, pp), shards=shards)
    norm_layers = stage_layers(card.num_hidden_layers, pp)
    tensors.append(Plain("layer_norms", "norm", 2 * card.hidden_size, norm_layers))
    return tensors


def mtp_tensors(card: ModelCard, *, tp: int, shards: Shards | None = None) -> list[Linear | Plain]:
    """Multi-token-prediction modules: per MTP layer two input norms, an fc/eh_proj 2H -> H, one full
    decoder layer (the model's attention kind and MLP of its last layer) and a final norm; embedding and
    head are shared with the main model. Counted only when speculative decoding with MTP is on.
    """
    n = card.mtp_layers
    if n == 0:
        return []
    attention = mla_tensors if card.attention_traits.latent_kv else attention_tensors
    tensors: list[Linear | Plain] = [
        Plain("mtp_norms", "mtp", 4 * card.hidden_size, n),
        Linear("mtp_fc", "mtp", 2 * card.hidden_size, card.hidden_size, n),
    ]
    if card.attention_traits.compressed_kv:  # the MTP layers' own compress ratios (0: the window only)
        main, with_mtp = csa.ratio_layers(card), csa.ratio_layers(card, mtp=True)
        tensors += csa_tensors(card, tp=tp, counts={r: c - main.get(r, 0) for r, c in with_mtp.items()})
    else:
        tensors += attention(card, tp=tp, layers=n)
    if card.is_moe:
        tensors += moe_tensors(card, tp=tp, layers=n, shards=shards)
    else:
        tensors += dense_mlp_tensors(card, tp=tp, layers=n, width=card.intermediate_size)
    return [_as_mtp(t) for t in tensors]


def _as_mtp(tensor: Linear | Plain) -> Linear | Plain:
    if isinstance(tensor, Linear):
        return Linear(f"mtp.{tensor.name}", "mtp", tensor.in_features, tensor.out_features, tensor.count)
    return Plain(f"mtp.{tensor.name}", "mtp", tensor.elements_each, tensor.count)


def model_tensors(
    card: ModelCard, *, tp: int, include_mtp: bool = False, shards: Shards | None = None
) -> list[Linear | Plain]:
    """All weights on one rank: vocab-parallel embedding (ceil(V/tp) rows), the decoder, the final norm,
    and the column-parallel lm_head unless tied to the embedding; plus MTP modules when asked.
    With pipeline stages (shards.pp > 1) the fullest stage is counted: ceil(n / pp) layers of each kind and
    one vocabulary matrix (the first stage's embedding or the last stage's lm_head, equal in size).
    """
    vocab_rows = split(card.vocab_size, tp)
    tensors: list[Linear | Plain] = [Plain("embed_tokens", "embedding", vocab_rows * card.hidden_size, 1)]
    tensors += decoder_tensors(card, tp=tp, shards=shards)
    tensors.append(Plain("final_norm", "norm", card.hidden_size, 1))
    staged = shards is not None and shards.pp > 1
    if not card.tie_word_embeddings and not staged:
        tensors.append(Plain("lm_head", "lm_head", vocab_rows * card.hidden_size, 1))
    if include_mtp:
        tensors += mtp_tensors(card, tp=tp, shards=shards)
    return tensors


def parameter_count(card: ModelCard, *, include_mtp: bool = False) -> int:
    """Exact parameter count of the model (tp=1): sum of every tensor's elements."""
    return sum(t.elements for t in model_tensors(card, tp=1, include_mtp=include_mtp))


def active_parameter_count(card: ModelCard) -> int:
    """Parameters one token touches: all non-expert weights plus top-k of E routed experts."""
    total = 0
    for tensor in model_tensors(card, tp=1):
        if tensor.part == "moe_experts" and isinstance(tensor, Linear):
            total += tensor.elements * (card.num_experts_per_tok or 0) // card.routed_expert_count
        else:
            total += tensor.elements
    return total
