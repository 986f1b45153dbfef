"""Per-rank geometry of a deployment that the op terms need: weights, cache sizes, FLOP coefficients, engine.

Split from planner/perf/opcost.py (which re-exports Geometry and matmul_dtype); pure, integers per rank.
planner/perf/roofline.geometry builds it with the engine's kernel facts.
"""

from __future__ import annotations

from typing import Any

from planner import csa, layout
from planner.deployment import Deployment
from planner.drafts import draft_kv_bytes_per_token, draft_layers
from planner.kinds import EngineName
from planner.memory import kv_cache_bytes_per_token, linear_state_bytes_per_sequence
from planner.params import indexer_key_bytes_per_layer, kv_heads_per_rank, split
from planner.perf.compressed import CompressedLayers
from planner.perf.kernels import EngineKernels
from planner.perf.opweights import OpWeights, op_weights
from planner.records import record
from planner.schema_card import CSA_INDEXED_RATIO
from planner.units import BITS_PER_BYTE

# Rows the busiest expert-parallel rank receives over the mean when the profile has no measured factor.
# [assumed: top-k routing at decode batch sizes leaves the busiest of ep ranks ~20 % above the mean; not
# measured here (DeepSeek's EPLB exists because of this skew); calibrate expert_imbalance_factor]
EXPERT_IMBALANCE_ASSUMED = 1.2

# FLOP per state element per token in a delta-rule update: decay (1), S^T k (2), rank-1 update (2),
# readout S^T q (2) = 7.
GDN_FLOP_PER_STATE_ELEMENT = 7

# FLOP per index head per scored key beside the dot product: ReLU (1), then the head's weight, multiply-add
# into the token's score (2) (the lightning indexer: score = sum over heads of w_h * relu(q_h . k)).
INDEXER_FLOP_PER_HEAD_BESIDE_DOT = 3
# MiniMax sparse attention scores a block by the max over its keys of q . k (sparse_score_type "max"): one
# compare per head and scored key beside the dot product.
MSA_FLOP_PER_HEAD_BESIDE_DOT = 1


@record
class Geometry:
    """Everything the terms need from a deployment, computed once (integers, per rank)."""

    weights: OpWeights
    kv_bytes_per_token: int
    mtp_kv_bytes_per_token: int
    state_bytes_per_sequence: int
    attention_flop_per_key: int
    mtp_attention_flop_per_key: int
    gdn_flop_per_token: int
    hidden_size: int
    activation_bytes: int
    layers: dict[str, int]
    experts: int
    top_k: int
    tp: int
    matmul_dtype: str
    activation_dtype: str
    engine: EngineName
    kernels: EngineKernels  # the engine's kernel facts (planner/perf/roofline.engine_kernels)
    qk_norm: bool
    kv_heads_per_rank: int  # KV heads (GQA/MHA) or 1 latent (MLA) per rank: attention table rows per sequence
    dp: int = 1  # attention data-parallel groups: the experts see dp groups' tokens (planner/layout.py)
    ep: int = 1
    pp: int = 1
    experts_per_rank: int = 0  # routed experts this rank holds (E when ep = 1)
    expert_row_fraction: float = 1.0  # moe_tp / tp: this rank's share of a group token's k expert rows
    expert_imbalance: float = 1.0  # busiest EP rank's rows / the mean (1 without EP)
    draft_model: bool = False  # the mtp.* ops are a separate 16-bit draft model's (planner/drafts.py)
    # DeepSeek sparse attention (planner/perf/sparse.py); all 0 for dense attention
    index_topk_tokens: int = 0  # keys each query attends at most (card.index_topk)
    index_bytes_per_token: int = 0  # index-key cache bytes per token, all layers (inside kv_bytes_per_token)
    mtp_index_bytes_per_token: int = 0  # the same for the MTP layer(s) (inside mtp_kv_bytes_per_token)
    indexer_flop_per_key: int = 0  # FLOP one query spends scoring one cached key, all layers
    mtp_indexer_flop_per_key: int = 0
    index_dense_layers: int = 0  # full-attention layers of a sparse card that attend densely (MiniMax-M3)
    # DeepSeek-V4 compressed attention (planner/perf/compressed.py); None for other cards
    compressed: CompressedLayers | None = None
    mtp_compressed: CompressedLayers | None = None
    index_ratio: int = 1  # tokens per index key (4 for DeepSeek-V4's indexers over compressed records)


def attention_flop_per_key(dep: Deployment, *, layers: int) -> int:
    """FLOP one query token spends on one cached key, summed over `layers` attention layers on a rank.

    Formula: 2 * heads_rank * (d_qk + d_v) * layers
        2        multiply + add
        GQA/MHA  d_qk = d_v = head_dim (Q.K^T then P.V)
        MLA      absorbed form: d_qk = kv_lora_rank + qk_rope_head_dim, d_v = kv_lora_rank
        heads_rank = ceil(num_attention_heads / tp)
    """
    card = dep.model
    heads_rank = split(card.num_attention_heads, dep.tp)
    if card.attention_traits.latent_kv:
        qk_dim = (card.kv_lora_rank or 0) + (card.qk_rope_head_dim or 0)
        v_dim = card.kv_lora_rank or 0
    else:
        qk_dim = v_dim = card.head_dim or 0
    return 2 * heads_rank * (qk_dim + v_dim) * layers


def indexer_flop_per_key(dep: Deployment, *, layers: int) -> int:
    """FLOP one query token spends scoring one cached key in the lightning indexers of `layers` layers on a
    rank (0 for dense attention). The indexer is replicated, not split over tensor-parallel ranks.

    Formula: H_idx * (2 * d_idx + e) * layers
        H_idx  card.index_n_heads (DeepSeek, replicated); on a GQA card (MiniMax) the rank's index heads,
               params.kv_heads_per_rank (they are split like the KV heads)
        d_idx  card.index_head_dim;  2 * d_idx  the q_h . k dot product
        e      INDEXER_FLOP_PER_HEAD_BESIDE_DOT 3 (ReLU, weighted sum);
               MSA_FLOP_PER_HEAD_BESIDE_DOT 1 (MiniMax: the block max)
    """
    card = dep.model
    if not card.is_sparse_attention:
        return 0
    dim = card.index_head_dim or 0
    if not card.attention_traits.latent_kv:
        heads = kv_heads_per_rank(card, tp=dep.tp)
        return heads * (2 * dim + MSA_FLOP_PER_HEAD_BESIDE_DOT) * layers
    heads = card.index_n_heads or 0
    return heads * (2 * dim + INDEXER_FLOP_PER_HEAD_BESIDE_DOT) * layers


def attention_fields(dep: Deployment, *, mtp_layers: int) -> dict[str, Any]:
    """Geometry's attention-kind fields: csa_fields for DeepSeek-V4, else sparse_fields (none when dense)."""
    if dep.model.attention_traits.compressed_kv:
        return csa_fields(dep)
    return sparse_fields(dep, mtp_layers=mtp_layers)


def csa_fields(dep: Deployment) -> dict[str, Any]:
    """Geometry's DeepSeek-V4 fields: the model's and the MTP layers' CompressedLayers, and the indexers of
    the ratio-4 layers over their compressed records.

    index_bytes_per_token  n_4 * (d_idx + 2)            bytes per index record (int8 key + fp16 scale)
    indexer_flop_per_key   n_4 * H_idx * (2 * d_idx + 3)   FLOP per scored record (the DSA indexer's)
    """
    card = dep.model
    main = csa.ratio_layers(card)
    mtp = csa.ratio_layers(card, mtp=True) if dep.include_mtp and not dep.draft_method else main
    indexed = main.get(CSA_INDEXED_RATIO, 0)
    heads, dim = card.index_n_heads or 0, card.index_head_dim or 0

    def layers(counts: dict[int, int]) -> CompressedLayers:
        return CompressedLayers(
            counts=counts,
            window=card.sliding_window or 0,
            topk=card.index_topk or 0,
            window_bytes=csa.window_record_bytes(card),
            record_bytes=csa.record_bytes(card, kv_dtype=dep.kv_dtype),
        )

    return {
        "compressed": layers(main),
        "mtp_compressed": layers({r: n - main.get(r, 0) for r, n in mtp.items() if n > main.get(r, 0)}),
        "index_topk_tokens": card.index_topk or 0,
        "index_bytes_per_token": indexed * csa.index_record_bytes(card),
        "indexer_flop_per_key": indexed * heads * (2 * dim + INDEXER_FLOP_PER_HEAD_BESIDE_DOT),
        "index_ratio": CSA_INDEXED_RATIO,
        "index_dense_layers": card.full_attention_layers - indexed,  # layers without an indexer
    }


def sparse_fields(dep: Deployment, *, mtp_layers: int) -> dict[str, int]:
    """Geometry's sparse-attention fields (all 0 for dense attention); only the sparse layers keep index keys
    (card.sparse_attention_layers: every full-attention layer for DeepSeek, 57 of 60 for MiniMax-M3)."""
    card = dep.model
    if not card.is_sparse_attention:
        return {}
    index_bytes = indexer_key_bytes_per_layer(card, kv_dtype=dep.kv_dtype)
    mtp_layers = 0 if dep.draft_method else mtp_layers  # a separate draft model attends densely
    sparse_layers = card.sparse_attention_layers
    return {
        "index_topk_tokens": card.index_topk or 0,
        "index_bytes_per_token": index_bytes * sparse_layers,
        "mtp_index_bytes_per_token": index_bytes * mtp_layers,
        "indexer_flop_per_key": indexer_flop_per_key(dep, layers=sparse_layers),
        "mtp_indexer_flop_per_key": indexer_flop_per_key(dep, layers=mtp_layers),
        "index_dense_layers": card.full_attention_layers - sparse_layers,
    }


def gdn_flop_per_token(dep: Deployment) -> int:
    """FLOP one token spends in the state updates of all Gated DeltaNet layers on a rank.

    Formula: L_lin * (7 * ceil(nv / tp) * dk * dv + 2 * K * ceil(C / tp))
        7   GDN_FLOP_PER_STATE_ELEMENT (decay, S^T k, rank-1 update, readout)
        C   conv channels 2 * nk * dk + nv * dv;  K linear_conv_kernel_dim (multiply-add per tap)
    """
    card = dep.model
    nk, nv = card.linear_num_key_heads or 0, card.linear_num_value_heads or 0
    dk, dv = card.linear_key_head_dim or 0, card.linear_value_head_dim or 0
    state_flop = GDN_FLOP_PER_STATE_ELEMENT * split(nv, dep.tp) * dk * dv
    conv_flop = 2 * (card.linear_conv_kernel_dim or 0) * split(2 * nk * dk + nv * dv, dep.tp)
    return card.linear_attention_layers * (state_flop + conv_flop)


def matmul_dtype(dep: Deployment) -> str:
    """Peak key of the weight matmuls: the scheme's compute dtype, except that 16-bit compute (bf16, fp16,
    w8a16, w4a16) runs in the card's activation dtype (fp16 on cards without bf16, such as the 310P)."""
    compute = dep.weight_scheme.compute_dtype
    return dep.activation_dtype.value if compute in ("bf16", "fp16") else compute


def geometry(dep: Deployment, *, kernels: EngineKernels) -> Geometry:
    """Collect per-rank weights, cache sizes and FLOP coefficients of a deployment; `kernels` are its
    engine's kernel facts (planner/perf/roofline.geometry asks the engine registry for them)."""
    card, act = dep.model, dep.activation_dtype
    kv_main = kv_cache_bytes_per_token(card, kv_dtype=dep.kv_dtype, tp=dep.tp)
    mtp_layers, kv_mtp = drafter_layers_and_kv(dep, kv_main=kv_main)
    layers = {
        "full": card.full_attention_layers,
        "linear": card.linear_attention_layers,
        "dense": card.num_hidden_layers - card.moe_layers,
        "moe": card.moe_layers,
        "all": card.num_hidden_layers,
        "mtp": mtp_layers,
    }
    return Geometry(
        weights=op_weights(dep),
        kv_bytes_per_token=kv_main,
        mtp_kv_bytes_per_token=kv_mtp,
        state_bytes_per_sequence=linear_state_bytes_per_sequence(card, conv_dtype=act, tp=dep.tp),
        attention_flop_per_key=attention_flop_per_key(dep, layers=card.full_attention_layers),
        mtp_attention_flop_per_key=attention_flop_per_key(dep, layers=mtp_layers),
        gdn_flop_per_token=gdn_flop_per_token(dep),
        hidden_size=card.hidden_size,
        activation_bytes=act.bits // BITS_PER_BYTE,
        layers=layers,
        experts=card.routed_expert_count,
        top_k=card.num_experts_per_tok or 0,
        tp=dep.tp,
        matmul_dtype=matmul_dtype(dep),
        activation_dtype=act.value,
        engine=dep.engine,
        kernels=kernels,
        qk_norm=card.qk_norm,
        kv_heads_per_rank=1 if card.attention_traits.latent_kv else split(card.num_key_value_heads, dep.tp),
        dp=dep.dp,
        ep=dep.ep,
        pp=dep.pp,
        experts_per_rank=layout.experts_per_rank(dep),
        expert_row_fraction=layout.moe_tp(dep) / dep.tp,
        expert_imbalance=expert_imbalance(dep),
        draft_model=dep.draft_method is not None,
        **attention_fields(dep, mtp_layers=mtp_layers),
    )


def drafter_layers_and_kv(dep: Deployment, *, kv_main: int) -> tuple[int, int]:
    """(layers, KV bytes per token per rank) of whatever drafts: the card's MTP layers when MTP is on, a
    separate draft model's (planner/drafts.py) in their place, else (0, 0)."""
    card = dep.model
    if dep.draft_method:
        kv = draft_kv_bytes_per_token(card, method=dep.draft_method, kv_dtype=dep.kv_dtype, tp=dep.tp)
        return draft_layers(dep.draft_method), kv
    if not dep.include_mtp:
        return 0, 0
    kv_mtp = kv_cache_bytes_per_token(card, kv_dtype=dep.kv_dtype, tp=dep.tp, mtp=True) - kv_main
    return card.mtp_layers, kv_mtp


def expert_imbalance(dep: Deployment) -> float:
    """Busiest expert-parallel rank's routed rows / the mean: the profile's expert_imbalance_factor, else
    EXPERT_IMBALANCE_ASSUMED; 1 without expert parallelism (every rank computes every expert's share)."""
    if dep.ep == 1:
        return 1.0
    measured = dep.hardware.coefficients(calibrated=dep.calibrated).expert_imbalance_factor
    return EXPERT_IMBALANCE_ASSUMED if measured is None else measured
