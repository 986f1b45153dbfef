"""Measured prefill rates: matmul shape efficiency, causal prefill attention, each layer's non-matmul rest.

Applied by planner/perf/roofline.py to the terms of a prefill pass when the card's (calibrated) coefficients
hold the tables; every table is optional and a term without one keeps the roofline of decode (dtype peak *
compute_fraction, HBM bytes, kernel overheads). Three measured parts:
- gemm_efficiency_table: a dense bf16/fp16 matmul of M tokens through N x K weights runs at
  peak * f(M, N*K) (cuBLAS microbenchmark of the models' projection shapes).
- prefill_attention_table: causal prefill attention at the table's TFLOP/s for the layer's heads / head_dim.
- prefill_layer_table: the rest of one decoder layer (norms, rotary, activations, copies; in Gated DeltaNet
  layers also the conv, gating and chunked delta rule) per token, measured on one layer of the engine and
  scaled by the layer's activation elements per token. It replaces the norms term (full-attention layers)
  and the gdn.update term (linear-attention layers); since its kernels are timed, the measured terms of
  that deployment carry no per-kernel launch overhead (long prefill kernels hide the launches).
The tables apply only to the engines named in prefill_layer_table (the kernels timed are that engine's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from planner import records
from planner.arrays import FloatArray
from planner.deployment import Deployment
from planner.params import split
from planner.perf.opgeometry import Geometry
from planner.perf.terms import Step, Term
from planner.schema import GemmEfficiency, PerfCoefficients, PrefillAttentionRate, PrefillLayerCost
from planner.units import ns_to_s, tflop_per_s_to_flop_per_s, us_to_s

TABLE_DTYPES = ("bf16", "fp16")  # the GEMM table is bf16; fp16 has the same datasheet peak on these cards
ONE_ROW_MATMULS = ("lm_head", "mtp.lm_head")  # logits of the last token only: not a prefill-sized GEMM
# Terms the layer table replaces, with the layer kind whose rows time them and the geometry's layer key.
REMAINDER_TERMS = {"norms": ("attention", "full"), "gdn.update": ("linear_attention", "linear")}
MIXER_OPS = {
    "attention": ("attn.qkv_proj", "attn.o_proj"),
    "linear_attention": ("gdn.in_proj", "gdn.out_proj"),
}
MIXER_LAYERS = {"attention": "full", "linear_attention": "linear"}
MLP_OPS = ("mlp.gate_up", "mlp.down")


def log_interp(x: FloatArray | float, points: Sequence[tuple[float, float]]) -> FloatArray:
    """Formula: y = interp(log x) over (log x_i, y_i), sorted by x, clamped at the ends (no extrapolation)."""
    ordered = sorted(points)
    log_x = np.log(np.maximum(np.asarray(x, dtype=np.float64), 1.0))
    return np.asarray(
        np.interp(log_x, np.log([p[0] for p in ordered]), [p[1] for p in ordered]), dtype=np.float64
    )


def gemm_fraction(
    table: list[GemmEfficiency], *, tokens: FloatArray | float, weight_elements: float
) -> FloatArray:
    """Achieved / peak of a matmul of `tokens` rows through `weight_elements` (N*K) weights.

    Formula: at each measured M, f_M = interp(log NK) over that M's shapes (mean of equal NK); then
    f = interp(log M) of f_M at log(tokens); both clamped at the table's ends (never extrapolated).
    """
    by_tokens: dict[int, dict[float, list[float]]] = {}
    for row in table:
        by_tokens.setdefault(row.tokens, {}).setdefault(row.weight_elements, []).append(row.fraction)
    at_m = [
        (float(m), float(log_interp(weight_elements, [(nk, float(np.mean(f))) for nk, f in sizes.items()])))
        for m, sizes in by_tokens.items()
    ]
    return log_interp(tokens, at_m)


def prefill_attention_flop_per_s(
    table: list[PrefillAttentionRate], *, q_heads: int, head_dim: int, tokens: FloatArray | float
) -> FloatArray:
    """Causal prefill attention FLOP/s at `tokens` prompt tokens.

    Formula: rows of the nearest head_dim, then of the nearest q_heads (ties: the smaller); rate =
    interp(log tokens) of their TFLOP/s, clamped at the table's ends, converted by planner.units.
    """
    dim = min({r.head_dim for r in table}, key=lambda d: (abs(d - head_dim), d))
    rows = [r for r in table if r.head_dim == dim]
    heads = min({r.q_heads for r in rows}, key=lambda h: (abs(h - q_heads), h))
    rate = log_interp(tokens, [(r.tokens, r.tflop_per_s) for r in rows if r.q_heads == heads])
    return rate * tflop_per_s_to_flop_per_s(1.0)


def layer_elements_per_token(geo: Geometry, *, kind: str) -> float:
    """Matmul input + output activation elements per token of ONE layer of `kind` on this rank.

    Formula: E = sum over the mixer's matmuls of A_op / L_kind + sum over the MLP's of A_op / L_dense
    (A_op activation elements per token of all layers of op, planner/perf/opweights.py); 0 without layers.
    """
    act, lay = geo.weights.activation_elements_per_token, geo.layers
    mixer_layers = lay[MIXER_LAYERS[kind]]
    if not mixer_layers:
        return 0.0
    mixer = sum(act[op] for op in MIXER_OPS[kind]) / mixer_layers
    mlp = sum(act[op] for op in MLP_OPS) / lay["dense"] if lay["dense"] else 0.0
    return float(mixer + mlp)


def layer_rest_s(
    table: list[PrefillLayerCost], *, kind: str, elements_per_token: float, tokens: FloatArray
) -> FloatArray:
    """Seconds of one layer's non-matmul, non-attention kernels for a pass of `tokens` tokens.

    Formula: rows of `kind` for the measured shape nearest in log E (E elements_per_token);
    r(T) = interp(log T) of us_i / (T_i * E_i) (clamped); seconds = r(T) * T * E. Zero without rows.
    """
    rows = [r for r in table if r.kind == kind]
    if not rows or elements_per_token <= 0:
        return np.zeros_like(tokens)
    log_e = np.log(elements_per_token)
    shape = min({r.elements_per_token for r in rows}, key=lambda e: (abs(np.log(e) - log_e), e))
    per_element = [
        (r.tokens, us_to_s(r.us) / (r.tokens * shape)) for r in rows if r.elements_per_token == shape
    ]
    return log_interp(tokens, per_element) * tokens * elements_per_token


def layer_table_for(dep: Deployment, coeff: PerfCoefficients, geo: Geometry) -> list[PrefillLayerCost]:
    """Rows of the prefill layer table measured on the deployment's engine; none for MoE models (their
    routed layers were never measured) or without a table."""
    if geo.layers["moe"] or not coeff.prefill_layer_table:
        return []
    return [r for r in coeff.prefill_layer_table if r.engine == dep.engine]


def measured_prefill_terms(
    dep: Deployment, geo: Geometry, terms: list[Term], *, tokens: FloatArray
) -> list[Term]:
    """The prefill terms with measured rates (flop_per_s) where the card has the tables; others unchanged.

    Formula per term: attention (attn.core, mtp.attention): compute_rate_fraction =
    prefill_attention_fraction (prefill_attention_term); dense matmul (bf16/fp16, N*K = matmul elements /
    layers): flop_per_s = peak * f(tokens, N*K); attention with a table: prefill_attention_flop_per_s(q heads
    per rank, head_dim, tokens); norms / gdn.update with a layer table: flop_per_s = flop / (L_kind *
    layer_rest_s), i.e. the term takes the measured time.
    With a layer table every measured term has no launch overhead (kernels = matmuls = 0). All three tables
    apply only to engines the layer table names (they timed that engine's kernels: torch matmul, SDPA).
    """
    coeff = dep.hardware.coefficients(calibrated=dep.calibrated)
    terms = [chunked_gdn_term(dep, coeff, prefill_attention_term(coeff, t), tokens=tokens) for t in terms]
    if dep.engine not in {r.engine for r in coeff.prefill_layer_table or []}:
        return terms
    layer_table = layer_table_for(dep, coeff, geo)
    out = []
    for term in terms:
        if term.name in REMAINDER_TERMS:
            rate = remainder_flop_per_s(term, geo, table=layer_table, tokens=tokens)
        else:
            rate = kernel_flop_per_s(dep, coeff, term, geo=geo, tokens=tokens)
        if rate is None:
            out.append(term)
            continue
        kernels, matmuls = (0, 0) if layer_table else (term.kernels, term.matmuls)
        out.append(records.replace(term, flop_per_s=rate, kernels=kernels, matmuls=matmuls))
    return out


# The head size the chunked-GDN time was measured at (every Qwen3.5 / Qwen3.6 / Qwen3-Next GDN layer:
# linear_key_head_dim = linear_value_head_dim = 128); other sizes scale by dk * dv / REFERENCE_STATE_ELEMENTS.
REFERENCE_STATE_ELEMENTS = 128 * 128
CHUNKED_GDN_TERM = "gdn.update"  # the prefill term the chunked-GDN time replaces (opcost's linear layers)


def chunked_gdn_s(dep: Deployment, coeff: PerfCoefficients, *, tokens: FloatArray) -> FloatArray | None:
    """Seconds of the chunked Gated DeltaNet kernels of every linear layer for a pass of `tokens` prompt
    tokens (None: the profile holds no measured rate, or the model has no linear layers).

    Formula: t = T * ceil(nv / tp) * L_lin * ns_per_head_token * 1e-9 * dk * dv / 128^2 / f_lin
        T prompt tokens of the pass, nv linear value heads, L_lin linear-attention layers,
        f_lin prefill_linear_attention_fraction: the served kernels' rate over the measured one (<= 1: the
        measurement ran 16 sequences x 16-48 heads, a served pass often one prompt at 4-24 heads per die,
        and the chunk recurrence runs in parallel over sequences x heads only)
    """
    card = dep.model
    per_head_ns = coeff.chunked_gdn_ns_per_head_token
    if per_head_ns is None or not card.linear_attention_layers:
        return None
    heads = split(card.linear_num_value_heads or 0, dep.tp)
    size = (card.linear_key_head_dim or 0) * (card.linear_value_head_dim or 0) / REFERENCE_STATE_ELEMENTS
    seconds = tokens * heads * card.linear_attention_layers * ns_to_s(per_head_ns) * size
    seconds = seconds / coeff.prefill_linear_attention_fraction
    return np.asarray(seconds, dtype=np.float64)


def chunked_gdn_term(dep: Deployment, coeff: PerfCoefficients, term: Term, *, tokens: FloatArray) -> Term:
    """The gdn.update term of a prefill pass at the profile's measured chunked-GDN time (others unchanged).

    Formula: flop_per_s = flop / chunked_gdn_s (the term then takes the measured time; its state bytes and
    launches are charged as before).
    """
    if term.name != CHUNKED_GDN_TERM:
        return term
    seconds = chunked_gdn_s(dep, coeff, tokens=tokens)
    if seconds is None or not np.all(seconds > 0) or not np.all(term.flop > 0):
        return term
    return records.replace(term, flop_per_s=np.asarray(term.flop / seconds, dtype=np.float64))


def prefill_attention_term(coeff: PerfCoefficients, term: Term) -> Term:
    """An attention term of a prefill pass at the profile's prefill_attention_fraction (others unchanged).

    Formula: compute_s = flop / (peak * compute_fraction * f_attn), f_attn = prefill_attention_fraction:
    a causal flash-attention kernel keeps its cube units busier than a GEMM of the same dtype at most
    (QK^T reduces over head_dim only, softmax runs on the vector units between the two matmuls, the causal
    mask idles part of each diagonal tile), so f_attn <= 1. A measured prefill_attention_table overrides.
    """
    if term.attention is None or coeff.prefill_attention_fraction == 1.0:
        return term
    return records.replace(term, compute_rate_fraction=coeff.prefill_attention_fraction)


def remainder_flop_per_s(
    term: Term, geo: Geometry, *, table: list[PrefillLayerCost], tokens: FloatArray
) -> FloatArray | None:
    """The rate that makes a norms / gdn.update term take its layers' measured rest (None: no rows, no FLOP).

    Formula: flop_per_s = flop / (L_kind * layer_rest_s(kind, E_kind, tokens)).
    """
    kind, layer_key = REMAINDER_TERMS[term.name]
    elements = layer_elements_per_token(geo, kind=kind)
    seconds = geo.layers[layer_key] * layer_rest_s(
        table, kind=kind, elements_per_token=elements, tokens=tokens
    )
    if not table or not np.all(seconds > 0) or not np.all(term.flop > 0):
        return None
    return np.asarray(term.flop / seconds, dtype=np.float64)


def kernel_flop_per_s(
    dep: Deployment, coeff: PerfCoefficients, term: Term, *, geo: Geometry, tokens: FloatArray
) -> FloatArray | None:
    """Measured FLOP/s of a prefill attention or dense matmul term (None: no table applies)."""
    if term.attention is not None and coeff.prefill_attention_table:
        heads = -(-dep.model.num_attention_heads // dep.tp)
        return prefill_attention_flop_per_s(
            coeff.prefill_attention_table, q_heads=heads, head_dim=dep.model.head_dim or 0, tokens=tokens
        )
    elements = geo.weights.matmul_elements
    if coeff.gemm_efficiency_table and is_table_matmul(term, elements):
        fraction = gemm_fraction(
            coeff.gemm_efficiency_table,
            tokens=tokens,
            weight_elements=elements[term.name] / max(term.layers, 1),
        )
        return dep.hardware.peak_flop_per_s(term.compute_dtype) * fraction
    return None


def is_table_matmul(term: Term, elements: dict[str, int]) -> bool:
    """A dense (not routed-expert), prefill-sized matmul term in a dtype the GEMM table measured."""
    return (
        term.matmuls > 0
        and term.resource == "hbm"
        and term.compute_dtype in TABLE_DTYPES
        and term.name not in ONE_ROW_MATMULS
        and elements.get(term.name, 0) > 0
    )


def host_floor_s(dep: Deployment, geo: Geometry, *, tokens: FloatArray) -> FloatArray | None:
    """Least wall time of one pass's layers when launched eagerly (None: no layer table with eager times).

    Formula: floor = sum over layer kinds of L_kind * min of eager_us over that kind's rows (any shape, any
    length): the host's launches and Python per op do not shrink with the layer's size or the prompt, so the
    fastest any measured layer of a kind ran is a floor for every layer of that kind. roofline charges
    max(0, floor - device time) per pass.
    """
    coeff = dep.hardware.coefficients(calibrated=dep.calibrated)
    rows = [r for r in layer_table_for(dep, coeff, geo) if r.eager_us is not None]
    if not rows:
        return None
    floor_s = 0.0
    for kind, layer_key in MIXER_LAYERS.items():
        eager = [r.eager_us or 0.0 for r in rows if r.kind == kind]
        if eager and geo.layers[layer_key]:
            floor_s += geo.layers[layer_key] * us_to_s(min(eager))
    return np.full_like(tokens, floor_s)


def prefill_chunks(prompt_tokens: int, *, max_prefill_tokens: int) -> tuple[list[int], list[int]]:
    """(chunk lengths, prefix before each chunk) of a prompt split by max_prefill_tokens.

    Formula: ceil(T / C) chunks of C tokens, the last one T - (chunks - 1) * C; prefix_i = i * C.
    """
    chunks = math.ceil(prompt_tokens / max_prefill_tokens)
    lengths = [max_prefill_tokens] * (chunks - 1) + [prompt_tokens - (chunks - 1) * max_prefill_tokens]
    prefixes = [i * max_prefill_tokens for i in range(chunks)]
    return lengths, prefixes


def prefill_step(dep: Deployment, *, prompt_tokens: int, cached_tokens: int) -> Step:
    """The passes of a chunked prefill of one prompt, one array element per chunk.

    Formula: h = cached_tokens (roofline.cached_prompt_tokens; 0 without a prefix cache); the I - h uncached
    tokens are chunked by max_prefill_tokens; per chunk i of c_i tokens after p_i computed tokens: tokens =
    c_i, 1 sequence,
    cached = h + p_i (KV read from the cache), attended = h + p_i + (c_i + 1) / 2 (causal over the whole
    prompt so far), logits only for the last token; one MTP pass per chunk when on.
    """
    hit = cached_tokens
    lengths, prefixes = prefill_chunks(prompt_tokens - hit, max_prefill_tokens=dep.max_prefill_tokens)
    tokens = np.asarray(lengths, dtype=np.float64)
    prefix = np.asarray(prefixes, dtype=np.float64) + hit
    last = np.zeros_like(tokens)
    last[-1] = 1.0
    return Step(
        tokens=tokens,
        sequences=np.ones_like(tokens),
        cached_tokens=prefix,
        attended_tokens=prefix + (tokens + 1.0) / 2.0,
        logits_tokens=last,
        draft_runs=1 if dep.speculative_tokens else 0,
        draft_tokens=tokens,
        draft_logits=last,
    )


def prefill_pass_step(dep: Deployment, *, prompts: int, prompt_tokens: int, cached_tokens: int) -> Step:
    """One prefill pass of n prompts of I tokens, h of each cached (n * (I - h) <= max_prefill_tokens; n = 1:
    prefill_step's chunks; n >= 2: batched_prefill_step, its formula)."""
    if prompts == 1:
        return prefill_step(dep, prompt_tokens=prompt_tokens, cached_tokens=cached_tokens)
    many = np.asarray([float(prompts)])
    return batched_prefill_step(dep, prompts=many, prompt_tokens=prompt_tokens, cached_tokens=cached_tokens)


def batched_prefill_step(
    dep: Deployment, *, prompts: FloatArray, prompt_tokens: int, cached_tokens: int
) -> Step:
    """One prefill pass of n prompts of I tokens per element of `prompts`, h of each cached
    (n * (I - h) <= max_prefill_tokens).

    Formula: h = cached_tokens (roofline.cached_prompt_tokens; 0 without a prefix cache); tokens = n (I - h),
    n sequences, each reading h cached keys and attending h + (I - h + 1) / 2 keys on average (causal),
    n logits rows; one MTP draft pass when MTP is on.
    """
    hit = cached_tokens
    tokens = prompts * float(prompt_tokens - hit)
    return Step(
        tokens=tokens,
        sequences=prompts,
        cached_tokens=np.full_like(prompts, float(hit)),
        attended_tokens=np.full_like(prompts, hit + (prompt_tokens - hit + 1.0) / 2.0),
        logits_tokens=prompts,
        draft_runs=1 if dep.speculative_tokens else 0,
        draft_tokens=tokens,
        draft_logits=prompts,
    )
