"""Bytes and FLOP of every operation of one forward step on one tensor-parallel rank.

A *term* aggregates one op over every layer that has it: `attn.qkv_proj` is the fused Q/K/V projection of
all full-attention layers, `gdn.update` the conv + delta-rule state update of all Gated DeltaNet layers.
Quantities are numpy arrays, so the same formulas serve one point (0-d arrays), the chunks of a prefill
(1-d) and a 10^5-point sweep (broadcast 2-d). planner/roofline.py turns terms into seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from planner.deployment import Deployment
from planner.memory import kv_cache_bytes_per_token, linear_state_bytes_per_sequence
from planner.opweights import OpWeights, op_weights
from planner.params import split
from planner.units import BITS_PER_BYTE

FloatArray = npt.NDArray[np.float64]
Resource = Literal["hbm", "kv", "link", "none"]

# Kernel launches per layer (or per run) of each op in graph mode.  [assumed: MindIE/ATB decode graph with
# fused QKV, fused qk-norm+rope, reshape-and-cache + paged attention, gate_up + SwiGLU, fused add+RMSNorm;
# calibration's kernel_overhead_us absorbs the error]
KERNELS_PER_OP: dict[str, int] = {
    "embedding": 1,
    "attn.qkv_proj": 1,
    "attn.core": 3,  # qk-norm+rope, reshape_and_cache, paged attention
    "attn.o_proj": 1,
    "gdn.in_proj": 2,  # in_proj_qkvz and in_proj_ba
    "gdn.update": 3,  # causal conv1d update, recurrent delta-rule update, gated RMSNorm
    "gdn.out_proj": 1,
    "mlp.gate_up": 2,  # matmul + SwiGLU
    "mlp.down": 1,
    "moe.router": 2,  # gating matmul + top-k
    "moe.experts": 5,  # dispatch, grouped gate_up, SwiGLU, grouped down, combine
    "moe.shared": 3,
    "norms": 2,  # two fused add+RMSNorm per layer
    "lm_head": 2,  # final norm + matmul
    "mtp.layer": 9,  # 3 norms, fc, qkv, o, gate_up, SwiGLU, down
    "mtp.attention": 3,
    "mtp.lm_head": 2,
}
# Hidden-vector passes per layer outside the matmuls: two RMSNorms (read + write = 2 each) and two
# residual adds (2 reads + 1 write each): 2*2 + 2*3 = 10. Each touched element costs about one FLOP.
NORM_RESIDUAL_PASSES_PER_LAYER = 10
# FLOP per state element per token in a delta-rule update: decay (1), S^T k (2), rank-1 update (2),
# readout S^T q (2) = 7.
GDN_FLOP_PER_STATE_ELEMENT = 7
# All-reduces per layer under tensor parallelism: after the attention output and after the MLP output.
ALLREDUCES_PER_LAYER = 2


@dataclass(frozen=True)
class Step:
    """What one forward pass processes, as broadcastable arrays.

    tokens           query tokens: batch * (1 + draft) in decode, the chunk length in prefill
    sequences        sequences in the pass (batch in decode, 1 in prefill)
    cached_tokens    paged KV tokens each sequence's attention reads
    attended_tokens  mean keys one query token attends: prefix + (q + 1) / 2 (causal)
    logits_tokens    rows the lm_head computes
    draft_runs       MTP draft passes (k in decode, 1 in prefill with MTP on, else 0)
    draft_tokens     tokens per draft pass; draft_logits its lm_head rows
    """

    tokens: FloatArray
    sequences: FloatArray
    cached_tokens: FloatArray
    attended_tokens: FloatArray
    logits_tokens: FloatArray
    draft_runs: int
    draft_tokens: FloatArray
    draft_logits: FloatArray


@dataclass(frozen=True)
class Term:
    """One op over `layers` layers: bytes over `resource`, FLOP in `compute_dtype`, launches, collectives."""

    name: str
    layers: int
    kernels: int
    bytes: FloatArray
    flop: FloatArray
    compute_dtype: str
    resource: Resource
    collectives: int = 0


@dataclass(frozen=True)
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
    if card.attention == "mla":
        qk_dim = (card.kv_lora_rank or 0) + (card.qk_rope_head_dim or 0)
        v_dim = card.kv_lora_rank or 0
    else:
        qk_dim = v_dim = card.head_dim or 0
    return 2 * heads_rank * (qk_dim + v_dim) * layers


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


def geometry(dep: Deployment) -> Geometry:
    """Collect per-rank weights, cache sizes and FLOP coefficients of a deployment."""
    card, act = dep.model, dep.activation_dtype
    kv_main = kv_cache_bytes_per_token(card, kv_dtype=dep.kv_dtype, tp=dep.tp)
    kv_mtp = kv_cache_bytes_per_token(card, kv_dtype=dep.kv_dtype, tp=dep.tp, mtp=True) - kv_main
    mtp_layers = card.mtp_layers if dep.include_mtp else 0
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
        mtp_kv_bytes_per_token=kv_mtp if mtp_layers else 0,
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
    )


def expected_experts_touched(experts: int, *, top_k: int, tokens: FloatArray) -> FloatArray:
    """Expected distinct routed experts that `tokens` tokens touch with uniform top-k routing.

    Formula: E * (1 - (1 - k / E) ** n);  E experts, k experts per token, n routed tokens.
    """
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


def linear_term(geo: Geometry, step: Step, *, op: str, layers: int) -> Term:
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
    return Term(op, layers, KERNELS_PER_OP[op] * layers, hbm, flop, dtype, "hbm")


def moe_experts_term(geo: Geometry, step: Step) -> Term:
    """Routed experts: read the experts the batch touches; each token computes k of E experts.

    Formula:
        bytes = W_exp * D(n) / E + n * A_exp * b_act     D(n) expected_experts_touched
        flop  = 2 * n * E_exp * k / E                     E_exp elements of all E experts
    """
    w, e = geo.weights, geo.experts
    touched = expected_experts_touched(e, top_k=geo.top_k, tokens=step.tokens)
    hbm = w.weight_bytes["moe.experts"] * touched / e + (
        step.tokens * w.activation_elements_per_token["moe.experts"] * geo.activation_bytes
    )
    flop = 2.0 * step.tokens * w.matmul_elements["moe.experts"] * geo.top_k / e
    layers = geo.layers["moe"]
    return Term(
        "moe.experts", layers, KERNELS_PER_OP["moe.experts"] * layers, hbm, flop, geo.matmul_dtype, "hbm"
    )


def attention_term(geo: Geometry, step: Step) -> Term:
    """Attention over the cache of every full-attention layer (KV or MLA latent).

    Formula:
        bytes = s * c * kv + n * kv        s sequences, c paged cached tokens each, kv cache bytes per token
                                           (all layers); the second term writes the new tokens' K/V
        flop  = n * a * F                  a attended keys per query token, F attention_flop_per_key
    """
    kv = geo.kv_bytes_per_token
    hbm = step.sequences * step.cached_tokens * kv + step.tokens * kv
    flop = step.tokens * step.attended_tokens * geo.attention_flop_per_key
    layers = geo.layers["full"]
    return Term(
        "attn.core", layers, KERNELS_PER_OP["attn.core"] * layers, hbm, flop, geo.activation_dtype, "kv"
    )


def gdn_update_term(geo: Geometry, step: Step) -> Term:
    """Gated DeltaNet state update: every sequence reads and writes its fixed conv + recurrent state.

    Formula:
        bytes = 2 * s * S + W_gdn       S state bytes per sequence (all linear layers), W_gdn conv/dt weights
        flop  = n * G                   G gdn_flop_per_token
    """
    hbm = 2.0 * step.sequences * geo.state_bytes_per_sequence + geo.weights.weight_bytes["gdn.update"]
    flop = step.tokens * geo.gdn_flop_per_token
    layers = geo.layers["linear"]
    return Term(
        "gdn.update", layers, KERNELS_PER_OP["gdn.update"] * layers, hbm, flop, geo.activation_dtype, "kv"
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
    return Term("norms", layers, KERNELS_PER_OP["norms"] * layers, hbm, elements, geo.activation_dtype, "hbm")


def embedding_term(geo: Geometry, step: Step) -> Term:
    """Embedding gather: one row of H activations per token (the table itself is not streamed).

    Formula: bytes = 2 * n * H * b_act (read the row, write the hidden state);  flop = 0
    """
    hbm = 2.0 * step.tokens * geo.hidden_size * geo.activation_bytes
    return Term(
        "embedding", 1, KERNELS_PER_OP["embedding"], hbm, np.zeros_like(hbm), geo.activation_dtype, "hbm"
    )


def lm_head_term(geo: Geometry, step: Step) -> Term:
    """Vocabulary projection for `logits_tokens` rows: reads ceil(V / tp) * H weights.

    Formula: bytes = W_head + r * (H + V_rank) * b_act;  flop = 2 * r * V_rank * H   (r logits rows)
    """
    w = geo.weights
    rows = step.logits_tokens
    hbm = w.weight_bytes["lm_head"] + rows * w.activation_elements_per_token["lm_head"] * geo.activation_bytes
    flop = 2.0 * rows * w.matmul_elements["lm_head"]
    return Term("lm_head", 1, KERNELS_PER_OP["lm_head"], hbm, flop, geo.activation_dtype, "hbm")


def allreduce_term(geo: Geometry, step: Step) -> Term:
    """Tensor-parallel all-reduces: two per layer of the hidden activations of every token.

    Formula: bytes = 2 * L * n * H * b_act over the interconnect; collectives = 2 * L (0 when tp = 1)
    roofline applies latency + 2 (tp - 1) / tp * bytes / link bandwidth (ring all-reduce).
    """
    count = ALLREDUCES_PER_LAYER * geo.layers["all"] if geo.tp > 1 else 0
    link = count * step.tokens * geo.hidden_size * geo.activation_bytes
    return Term(
        "tp.allreduce", geo.layers["all"], 0, link, np.zeros_like(link), geo.activation_dtype, "link", count
    )


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
    return Term("mtp.layer", layers, KERNELS_PER_OP["mtp.layer"] * layers, hbm, flop, geo.matmul_dtype, "hbm")


def mtp_attention_term(geo: Geometry, step: Step) -> Term:
    """Attention of the MTP layer(s) over their own KV cache, once per draft pass.

    Formula: bytes = r * (s * c + m) * kv_mtp;  flop = r * m * a * F_mtp   (as attention_term, per pass)
    """
    kv, runs = geo.mtp_kv_bytes_per_token, step.draft_runs
    hbm = runs * (step.sequences * step.cached_tokens + step.draft_tokens) * kv
    flop = runs * step.draft_tokens * step.attended_tokens * geo.mtp_attention_flop_per_key
    layers = runs * geo.layers["mtp"]
    kernels = KERNELS_PER_OP["mtp.attention"] * layers
    return Term("mtp.attention", layers, kernels, hbm, flop, geo.activation_dtype, "kv")


def mtp_lm_head_term(geo: Geometry, step: Step) -> Term:
    """The shared lm_head, run once per draft pass to pick the draft token.

    Formula: bytes = r * (W_head + l * (H + V_rank) * b_act);  flop = r * 2 * l * V_rank * H  (l draft_logits)
    """
    w, runs, rows = geo.weights, step.draft_runs, step.draft_logits
    hbm = runs * (
        w.weight_bytes["lm_head"] + rows * w.activation_elements_per_token["lm_head"] * geo.activation_bytes
    )
    flop = runs * 2.0 * rows * w.matmul_elements["lm_head"]
    kernels = KERNELS_PER_OP["mtp.lm_head"] * runs
    return Term("mtp.lm_head", runs, kernels, hbm, flop, geo.activation_dtype, "hbm")


def step_terms(geo: Geometry, step: Step) -> list[Term]:
    """Every term of one forward pass, in execution order; ops the model lacks are left out."""
    lay = geo.layers
    terms = [embedding_term(geo, step)]
    if lay["full"]:
        terms += [
            linear_term(geo, step, op="attn.qkv_proj", layers=lay["full"]),
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
        if geo.weights.weight_bytes["moe.shared"]:
            terms.append(linear_term(geo, step, op="moe.shared", layers=lay["moe"]))
    terms += [norms_term(geo, step), lm_head_term(geo, step)]
    if geo.tp > 1:
        terms.append(allreduce_term(geo, step))
    if lay["mtp"] and step.draft_runs:
        terms += [mtp_layer_term(geo, step), mtp_attention_term(geo, step), mtp_lm_head_term(geo, step)]
    return terms
