"""The vocabulary of the step model: what one forward pass processes (Step) and one op's bytes, FLOP and
launches over its layers (Term). Split from planner/perf/opcost.py (which builds the terms and re-exports
these) so planner/perf/links.py and planner/perf/prefill.py read them without the op formulas.
"""

from __future__ import annotations

from typing import Literal

from planner.arrays import FloatArray
from planner.records import record

Resource = Literal["hbm", "kv", "state", "link", "experts", "none", "a2a", "stage"]


@record
class Step:
    """What one forward pass processes, as broadcastable arrays.

    tokens           query tokens: batch * (1 + draft) in decode, the chunk length in prefill
    sequences        sequences in the pass (batch in decode, 1 in prefill)
    cached_tokens    paged KV tokens each sequence's attention reads
    attended_tokens  mean keys one query token attends: prefix + (q + 1) / 2 (causal)
    logits_tokens    rows the lm_head computes
    draft_runs       MTP draft passes (k in decode, 1 in prefill with MTP on, else 0)
    draft_tokens     tokens per draft pass; draft_logits its lm_head rows
    state_writes     linear-attention state snapshots each sequence writes: 1 + k when a decode step
                     verifies k draft tokens (every position's state is kept for rollback), else 1
    """

    tokens: FloatArray
    sequences: FloatArray
    cached_tokens: FloatArray
    attended_tokens: FloatArray
    logits_tokens: FloatArray
    draft_runs: int
    draft_tokens: FloatArray
    draft_logits: FloatArray
    state_writes: int = 1


@record
class AttentionLookup:
    """Where a decode-attention term sits in the measured attention table (planner/perf/attention.py).

    rows   sequences * KV heads per rank (the kernel's parallel work items), ctx  cached tokens per sequence,
    kernels  attention kernels whose time the table holds (one per layer),
    read_bytes  the cache bytes the table's rate applies to; the rest of the term's bytes (writing the new
                tokens' K/V) moves at HBM rate, so a higher table rate never makes a longer context faster
    """

    rows: FloatArray
    ctx_tokens: FloatArray
    kernels: int
    read_bytes: FloatArray


@record
class Term:
    """One op over `layers` layers: bytes over `resource`, FLOP in `compute_dtype`, launches, collectives.

    kernels counts every launch; matmuls of them are matmul calls (charged matmul latency, the rest kernel
    overhead). attention is set on every cache-attention term, decode and prefill
    (opcost.cache_attention_term), for the measured tables and prefill_attention_term. compute_rate_fraction:
    the share of its dtype's rate (peak x compute_fraction) the term reaches; below 1 only on prefill
    attention (PerfCoefficients.prefill_attention_fraction, planner/perf/prefill.py).
    """

    name: str
    layers: int
    kernels: int
    bytes: FloatArray
    flop: FloatArray
    compute_dtype: str
    resource: Resource
    collectives: int = 0
    matmuls: int = 0
    attention: AttentionLookup | None = None
    flop_per_s: FloatArray | None = None  # measured prefill rate (planner/perf/prefill.py); None: dtype peak
    compute_rate_fraction: float = 1.0


def expected_experts_touched(experts: int, *, top_k: int, tokens: FloatArray) -> FloatArray:
    """Expected distinct routed experts that `tokens` tokens touch with uniform top-k routing.

    Formula: E * (1 - (1 - k / E) ** n);  E experts, k experts per token, n routed tokens.
    """
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)
