"""Bytes and FLOP of every operation of one forward step on one tensor-parallel rank.

A *term* aggregates one op over every layer that has it: `attn.qkv_proj` is the fused Q/K/V projection of
all full-attention layers, `gdn.update` the conv + delta-rule state update of all Gated DeltaNet layers.
Quantities are numpy arrays, so the same formulas serve one point (0-d arrays), the chunks of a prefill
(1-d) and a 10^5-point sweep (broadcast 2-d). planner/perf/roofline.py turns terms into seconds.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from planner import records
from planner.arrays import FloatArray
from planner.perf import compressed, sparse
from planner.perf.kernels import OpKernels, OpName, op_kernels
from planner.perf.opgeometry import GDN_FLOP_PER_STATE_ELEMENT, Geometry, matmul_dtype
from planner.perf.terms import AttentionLookup, Resource, Step, Term, expected_experts_touched

__all__ = [  # re-exported
    "GDN_FLOP_PER_STATE_ELEMENT", "AttentionLookup", "FloatArray", "Geometry", "Resource", "Step", "Term",
    "expected_experts_touched", "matmul_dtype",
]  # fmt: skip

# Hidden-vector passes per layer outside the matmuls: two RMSNorms (read + write = 2 each) and two
# residual adds (2 reads + 1 write each): 2*2 + 2*3 = 10. Each touched element costs about one FLOP.
NORM_RESIDUAL_PASSES_PER_LAYER = 10
# All-reduces per layer under tensor parallelism: after the attention output and after the MLP output.
ALLREDUCES_PER_LAYER = 2


class Launches(TypedDict):
    """Term keyword arguments: kernel launches and, of those, matmul calls."""

    kernels: int
    matmuls: int


def launches(geo: Geometry, op: OpName, *, layers: int) -> Launches:
    """Term keyword arguments kernels= and matmuls= for `op` over `layers` layers (or passes)."""
    count: OpKernels = op_kernels(geo.kernels, op)
    return {"kernels": count.launches * layers, "matmuls": count.matmuls * layers}


def term(
    geo: Geometry,
    op: OpName,
    *,
    layers: int,
    hbm: FloatArray,
    flop: FloatArray,
    dtype: str,
    resource: Resource = "hbm",
    attention: AttentionLookup | None = None,
) -> Term:
    """A Term for `op` with the engine's launches over `layers` layers (or passes); with `attention` (the
    measured-table lookup of an attention op) the launches are attention_launches'."""
    counts = (
        launches(geo, op, layers=layers) if attention is None else attention_launches(geo, op, layers=layers)
    )
    return Term(
        op,
        layers,
        bytes=hbm,
        flop=flop,
        compute_dtype=dtype,
        resource=resource,
        attention=attention,
        **counts,
    )


def attention_launches(geo: Geometry, op: OpName, *, layers: int) -> Launches:
    """launches() of an attention op plus the attention kernel and, on qk-norm models, the q/k norms."""
    extra: list[OpName] = ["attn.kernel", "attn.qk_norm"] if geo.qk_norm else ["attn.kernel"]
    kernels = op_kernels(geo.kernels, op).launches + sum(op_kernels(geo.kernels, e).launches for e in extra)
    return {"kernels": kernels * layers, "matmuls": 0}


def linear_term(geo: Geometry, step: Step, *, op: OpName, layers: int) -> Term:
    """A matmul op: stream its weights once, read and write the activations of every token.

    Formula:
        bytes = W_op + n * A_op * b_act     W_op weight bytes (quantized, scales included)
        flop  = 2 * n * E_op                A_op in+out activation elements per token, E_op weight elements
    Computes in the scheme's dtype, unquantized ops (router) in the activation dtype.
    """
    w = geo.weights
    hbm = w.weight_bytes[op] + step.tokens * w.activation_elements_per_token[op] * geo.activation_bytes
    flop = 2.0 * step.tokens * w.matmul_elements[op]
    dtype = geo.activation_dtype if op in w.unquantized else geo.matmul_dtype
    return term(geo, op, layers=layers, hbm=hbm, flop=flop, dtype=dtype)


def moe_experts_term(geo: Geometry, step: Step) -> Term:
    """Routed experts: read the rank's experts the instance's tokens touch; compute the rank's rows.

    Resource "experts": the roofline times its bytes and its matmul calls (the grouped GEMMs) with the
    measured grouped-GEMM coefficients when the card has them, else as dense decode GEMV.

    Formula:
        bytes = W_exp * D(n * dp) / E + n * f * u * A_exp * b_act   D expected_experts_touched (E experts)
        flop  = 2 * n * k * f * u * E_exp / E_rank
        W_exp, E_exp  bytes and elements of the rank's E_rank experts;  A_exp its k rows' in+out per token
        f = moe_tp / tp  the rank's share of a token's rows (1 under TP, 1/tp when experts are whole);
        u  expert_imbalance (the busiest EP rank; 1 without EP);  dp groups' tokens all reach the experts
    """
    w, e = geo.weights, geo.experts
    touched = expected_experts_touched(e, top_k=geo.top_k, tokens=step.tokens * geo.dp)
    rows_scale = geo.expert_row_fraction * geo.expert_imbalance
    hbm = w.weight_bytes["moe.experts"] * touched / e + (
        step.tokens * rows_scale * w.activation_elements_per_token["moe.experts"] * geo.activation_bytes
    )
    flop = (
        2.0 * step.tokens * rows_scale * w.matmul_elements["moe.experts"] * geo.top_k / geo.experts_per_rank
    )
    layers = geo.layers["moe"]
    return term(
        geo, "moe.experts", layers=layers, hbm=hbm, flop=flop, dtype=geo.matmul_dtype, resource="experts"
    )


def attention_term(geo: Geometry, step: Step) -> Term:
    """Attention over the cache of every full-attention layer (KV or MLA latent).

    Formula:
        bytes = s * c * kv + n * kv        s sequences, c paged cached tokens each, kv cache bytes per token
                                           (all layers); the second term writes the new tokens' K/V
        flop  = n * a * F                  a attended keys per query token, F attention_flop_per_key
    Sparse attention: c and a are capped at index_topk in the sparse layers (sparse.selected_step; MiniMax's
    dense layers uncapped) and kv is the MLA latent or K/V alone; the index keys are attn.indexer's.
    DeepSeek-V4: each layer's window and compressed records instead (compressed.attention_cost).
    """
    dense_share = geo.index_dense_layers / max(geo.layers["full"], 1)
    kept = sparse.selected_step(step, topk_tokens=geo.index_topk_tokens, dense_share=dense_share)
    kv = geo.kv_bytes_per_token - geo.index_bytes_per_token
    read = kept.sequences * kept.cached_tokens * kv
    cost = (read + step.tokens * kv, step.tokens * kept.attended_tokens * geo.attention_flop_per_key, read)
    if geo.compressed is not None:
        per_entry = geo.attention_flop_per_key / geo.layers["full"]
        kept, cost = compressed.attention_cost(step, geo.compressed, step.tokens, flop_per_entry=per_entry)
    return cache_attention_term(geo, kept, "attn.core", layers=geo.layers["full"], cost=cost)


def indexer_term(geo: Geometry, step: Step) -> Term:
    """The indexers of the sparse layers (every full-attention layer of DeepSeek-V3.2 / GLM-5; MiniMax-M3's 57
    of 60; DeepSeek-V4's ratio-4 layers): sparse.indexer_cost (bytes = s * c * x + n * x, flop = n * a *
    F_idx) over the index-key cache, at the cache read rate; DeepSeek-V4's over one key per 4 tokens
    (compressed.indexed_step)."""
    seen = compressed.indexed_step(step, ratio=geo.index_ratio)
    hbm, flop = sparse.indexer_cost(
        seen, index_bytes=geo.index_bytes_per_token, flop_per_key=geo.indexer_flop_per_key
    )
    return term(
        geo, "attn.indexer", layers=geo.layers["full"] - geo.index_dense_layers, hbm=hbm, flop=flop,
        dtype=geo.activation_dtype, resource="kv",
    )  # fmt: skip


def cache_attention_term(
    geo: Geometry, step: Step, op: OpName, *, layers: int, cost: tuple[FloatArray, FloatArray, FloatArray]
) -> Term:
    """A Term for attention over a paged cache: cost = (bytes, FLOP, bytes the attention kernel reads) on the
    KV resource, the measured-table lookup (rows = sequences x KV heads) and the attention launches."""
    hbm, flop, read = cost
    lookup = AttentionLookup(
        rows=step.sequences * geo.kv_heads_per_rank,
        ctx_tokens=step.cached_tokens,
        kernels=layers,
        read_bytes=read,
    )
    return term(
        geo,
        op,
        layers=layers,
        hbm=hbm,
        flop=flop,
        dtype=geo.activation_dtype,
        resource="kv",
        attention=lookup,
    )


def gdn_update_term(geo: Geometry, step: Step) -> Term:
    """Gated DeltaNet state update: every sequence reads its fixed conv + recurrent state and writes it back,
    once per verified position in a speculative decode step.

    Formula:
        bytes = (P + w - 1) * s * S + W_gdn   S state bytes per sequence (all linear layers), W_gdn conv/dt
                                              weights, P state passes of the engine (2 fused: one read, one
                                              write; 4 for transformers + fla), w state snapshots written per
                                              sequence (1 + k with k draft tokens, else 1)
        flop  = n * G                         G gdn_flop_per_token
    """
    passes = geo.kernels.state_passes + step.state_writes - 1
    hbm = passes * step.sequences * geo.state_bytes_per_sequence + geo.weights.weight_bytes["gdn.update"]
    flop = step.tokens * geo.gdn_flop_per_token
    layers = geo.layers["linear"]
    return term(
        geo, "gdn.update", layers=layers, hbm=hbm, flop=flop, dtype=geo.activation_dtype, resource="state"
    )


def norms_term(geo: Geometry, step: Step) -> Term:
    """Norms, residual adds and other elementwise work on the hidden vector.

    Formula:
        bytes = W_norm + n * H * P * L * b_act     P NORM_RESIDUAL_PASSES_PER_LAYER, L layers
        flop  = n * H * P * L                      about one FLOP per element touched
    """
    elements = step.tokens * geo.hidden_size * NORM_RESIDUAL_PASSES_PER_LAYER * geo.layers["all"]
    hbm = geo.weights.weight_bytes["norms"] + elements * geo.activation_bytes
    layers = geo.layers["all"]
    return term(geo, "norms", layers=layers, hbm=hbm, flop=elements, dtype=geo.activation_dtype)


def embedding_term(geo: Geometry, step: Step) -> Term:
    """Embedding gather: one row of H activations per token (the table itself is not streamed).

    Formula: bytes = 2 * n * H * b_act (read the row, write the hidden state);  flop = 0
    """
    hbm = 2.0 * step.tokens * geo.hidden_size * geo.activation_bytes
    return term(geo, "embedding", layers=1, hbm=hbm, flop=np.zeros_like(hbm), dtype=geo.activation_dtype)


def lm_head_term(geo: Geometry, step: Step) -> Term:
    """Vocabulary projection for `logits_tokens` rows: reads ceil(V / tp) * H weights.

    Formula: bytes = W_head + r * (H + V_rank) * b_act;  flop = 2 * r * V_rank * H   (r logits rows)
    """
    w = geo.weights
    rows = step.logits_tokens
    hbm = w.weight_bytes["lm_head"] + rows * w.activation_elements_per_token["lm_head"] * geo.activation_bytes
    flop = 2.0 * rows * w.matmul_elements["lm_head"]
    return term(geo, "lm_head", layers=1, hbm=hbm, flop=flop, dtype=geo.activation_dtype)


def link_term(
    geo: Geometry, name: str, *, link: FloatArray, resource: Resource, counts: tuple[int, int]
) -> Term:
    """A weightless communication Term: `link` bytes over `resource`; counts = (layers, collectives)."""
    zero = np.zeros_like(link)
    return Term(name, counts[0], 0, link, zero, geo.activation_dtype, resource, collectives=counts[1])


def allreduce_term(geo: Geometry, step: Step) -> Term:
    """Tensor-parallel collectives of the hidden activations of every token: two all-reduces per layer (after
    the mixer, after the MLP or MoE block), except that under vllm-ascend an expert-parallel MoE block ends in
    a TP all-gather of each rank's token slice (its dispatch and combine are moe.dispatch), half the bytes.

    Formula: bytes = (R + G / 2) * n * H * b_act over the interconnect; collectives = R + G (0 when tp = 1)
        G = L_moe when engine = vllm and ep > 1, else 0;  R = 2 * L - G
    roofline applies latency + 2 (tp - 1) / tp * bytes / link bandwidth (ring all-reduce; a ring all-gather
    moves half of that).  [source: vllm-ascend 182b75ea vllm_ascend/ops/fused_moe/prepare_finalize.py,
    PrepareAndFinalizeWithAll2All / WithMC2: prepare splits the tokens over the TP ranks, finalize
    all-gathers them; assumed for prefill, whose MoE may take the all-gather path instead]
    """
    split_ranks = geo.tp > 1
    gathers = geo.layers["moe"] if split_ranks and geo.kernels.gathers_moe_outputs else 0
    reduces = ALLREDUCES_PER_LAYER * geo.layers["all"] - gathers if split_ranks else 0
    link = (reduces + gathers / 2.0) * step.tokens * geo.hidden_size * geo.activation_bytes
    return link_term(
        geo, "tp.allreduce", link=link, resource="link", counts=(geo.layers["all"], reduces + gathers)
    )


def moe_dispatch_term(geo: Geometry, step: Step) -> Term:
    """Token dispatch to the experts and combine back, per MoE layer (MC2 / all-to-all, or all-gather).

    Formula: EP: bytes = 2 * L_moe * (n / tp) * k * H * b_act * (ep - 1) / ep * u  (tokens split over tp
    ranks, k rows each, the off-rank share, u expert_imbalance); all-gather (ep = 1, dp > 1): bytes =
    2 * L_moe * (dp - 1) * n * H * b_act; collectives 2 * L_moe at the roofline's a2a rate and latency.
    """
    layers = geo.layers["moe"]
    hidden_bytes = step.tokens * geo.hidden_size * geo.activation_bytes
    if geo.ep > 1:
        share = (geo.ep - 1) / geo.ep * geo.expert_imbalance
        link = 2.0 * layers * hidden_bytes / geo.tp * geo.top_k * share
    else:
        link = 2.0 * layers * (geo.dp - 1) * hidden_bytes
    return link_term(geo, "moe.dispatch", link=link, resource="a2a", counts=(layers, 2 * layers))


def pipeline_send_term(geo: Geometry, step: Step) -> Term:
    """Pipeline hand-offs. Formula: bytes = (pp - 1) * n * H * b_act over the stage link, pp - 1 sends."""
    hops = geo.pp - 1
    link = hops * step.tokens * geo.hidden_size * geo.activation_bytes
    return link_term(geo, "pp.send", link=link, resource="stage", counts=(hops, hops))


def mtp_layer_term(geo: Geometry, step: Step) -> Term:
    """MTP draft passes through the MTP decoder layer(s) (weights streamed once per pass).

    Formula (r passes of m tokens):
        bytes = r * (W_mtp + W_mtp_exp * D(m) / E + m * A_mtp * b_act)
        flop  = r * 2 * m * (E_mtp + E_mtp_exp * k / E)
    """
    w, runs, m = geo.weights, step.draft_runs, step.draft_tokens
    expert_bytes: FloatArray | float = 0.0
    expert_flop = 0.0
    if geo.experts and w.weight_bytes["mtp.experts"]:
        touched = expected_experts_touched(geo.experts, top_k=geo.top_k, tokens=m)
        expert_bytes = w.weight_bytes["mtp.experts"] * touched / geo.experts
        expert_flop = w.matmul_elements["mtp.experts"] * geo.top_k / geo.experts
    act = m * (w.activation_elements_per_token["mtp.layer"] + w.activation_elements_per_token["mtp.experts"])
    hbm = runs * (w.weight_bytes["mtp.layer"] + expert_bytes + act * geo.activation_bytes)
    flop = runs * 2.0 * m * (w.matmul_elements["mtp.layer"] + expert_flop)
    layers = runs * geo.layers["mtp"]
    dtype = geo.activation_dtype if geo.draft_model else geo.matmul_dtype  # a draft model is 16-bit
    return term(geo, "mtp.layer", layers=layers, hbm=hbm, flop=flop, dtype=dtype)


def mtp_attention_term(geo: Geometry, step: Step) -> Term:
    """Attention of the MTP layer(s) over their own KV cache, once per draft pass.

    Formula: bytes = r * (s * c + m) * kv_mtp;  flop = r * m * a * F_mtp   (as attention_term, per pass;
    with sparse attention c and a capped and kv_mtp the latent alone, the indexer in mtp_indexer_term)
    """
    kept = sparse.selected_step(step, topk_tokens=0 if geo.draft_model else geo.index_topk_tokens)
    kv, runs = geo.mtp_kv_bytes_per_token - geo.mtp_index_bytes_per_token, step.draft_runs
    hbm = runs * (kept.sequences * kept.cached_tokens + step.draft_tokens) * kv
    flop = runs * step.draft_tokens * kept.attended_tokens * geo.mtp_attention_flop_per_key
    layers = runs * geo.layers["mtp"]
    read = runs * kept.sequences * kept.cached_tokens * kv
    if geo.mtp_compressed is not None:  # DeepSeek-V4's MTP layer: its window (compress ratio 0)
        per_entry = geo.mtp_attention_flop_per_key / max(geo.layers["mtp"], 1)
        kept, cost = compressed.attention_cost(
            step, geo.mtp_compressed, step.draft_tokens, flop_per_entry=per_entry
        )
        hbm, flop, read = (runs * part for part in cost)
    return cache_attention_term(geo, kept, "mtp.attention", layers=layers, cost=(hbm, flop, read))


def mtp_indexer_term(geo: Geometry, step: Step) -> Term:
    """The MTP layer(s)' lightning indexer, once per draft pass of m tokens: r * sparse.indexer_cost."""
    draft = records.replace(step, tokens=step.draft_tokens)
    hbm, flop = sparse.indexer_cost(
        draft, index_bytes=geo.mtp_index_bytes_per_token, flop_per_key=geo.mtp_indexer_flop_per_key
    )
    layers, runs = step.draft_runs * geo.layers["mtp"], step.draft_runs
    return term(
        geo, "mtp.indexer", layers=layers, hbm=runs * hbm, flop=runs * flop, dtype=geo.activation_dtype,
        resource="kv",
    )  # fmt: skip


def mtp_lm_head_term(geo: Geometry, step: Step) -> Term:
    """The lm_head the drafts are sampled from, run once per draft pass: the target's shared head (MTP,
    dflash), or the draft model's own reduced-vocabulary head (eagle3: op "mtp.lm_head" holds weights).

    Formula: bytes = r * (W_head + l * (H + V_rank) * b_act);  flop = r * 2 * l * V_rank * H  (l draft_logits)
    """
    w, runs, rows = geo.weights, step.draft_runs, step.draft_logits
    head = "mtp.lm_head" if w.weight_bytes["mtp.lm_head"] else "lm_head"
    hbm = runs * (w.weight_bytes[head] + rows * w.activation_elements_per_token[head] * geo.activation_bytes)
    flop = runs * 2.0 * rows * w.matmul_elements[head]
    return term(geo, "mtp.lm_head", layers=runs, hbm=hbm, flop=flop, dtype=geo.activation_dtype)


def step_terms(geo: Geometry, step: Step) -> list[Term]:
    """Every term of one forward pass, in execution order; ops the model lacks are left out."""
    lay = geo.layers
    terms = [embedding_term(geo, step)]
    if lay["full"]:
        terms += [
            linear_term(geo, step, op="attn.qkv_proj", layers=lay["full"]),
            *([indexer_term(geo, step)] if geo.index_topk_tokens else []),
            attention_term(geo, step),
            linear_term(geo, step, op="attn.o_proj", layers=lay["full"]),
        ]
    if lay["linear"]:
        terms += [
            linear_term(geo, step, op="gdn.in_proj", layers=lay["linear"]),
            gdn_update_term(geo, step),
            linear_term(geo, step, op="gdn.out_proj", layers=lay["linear"]),
        ]
    if lay["dense"]:
        terms += [
            linear_term(geo, step, op="mlp.gate_up", layers=lay["dense"]),
            linear_term(geo, step, op="mlp.down", layers=lay["dense"]),
        ]
    if lay["moe"]:
        terms += [linear_term(geo, step, op="moe.router", layers=lay["moe"]), moe_experts_term(geo, step)]
        if geo.ep > 1 or geo.dp > 1:
            terms.append(moe_dispatch_term(geo, step))
        if geo.weights.weight_bytes["moe.shared"]:
            terms.append(linear_term(geo, step, op="moe.shared", layers=lay["moe"]))
    terms += [norms_term(geo, step), lm_head_term(geo, step)]
    if geo.tp > 1:
        terms.append(allreduce_term(geo, step))
    if geo.pp > 1:
        terms.append(pipeline_send_term(geo, step))
    if lay["mtp"] and step.draft_runs:
        terms += [mtp_layer_term(geo, step), mtp_attention_term(geo, step), mtp_lm_head_term(geo, step)]
        terms += [mtp_indexer_term(geo, step)] if geo.mtp_index_bytes_per_token else []
    return terms
