"""DeepSeek sparse attention (DSA) in the step model: which cached keys the attention kernel reads, and what
the lightning indexer that picks them costs. planner/perf/opcost.py builds the attn.core / attn.indexer terms
(and their MTP twins) from these formulas; a dense card passes through unchanged.

How vllm-ascend runs it (vllm-project/vllm-ascend 182b75ea): per layer, the lightning indexer scores every
cached token of the sequence for every query token (index_n_heads heads of index_head_dim over the index-key
cache) and returns the 2048 best (device/device_op.py:495-520 npu_lightning_indexer, sparse_count=2048,
sparse_mode=3 causal); the MLA attention then gathers only those tokens' latents
(device_op.py:566-584 npu_sparse_flash_attention, sparse_block_size=1, attention_mode=2; called from
attention/sfa_v1.py:1666-1692). Short sequences (fewer cached tokens than index_topk) attend everything.
"""

from __future__ import annotations

import numpy as np

from planner.perf.terms import FloatArray, Step
from planner.records import replace


def capped_mean_attended(step: Step, *, topk_tokens: int) -> FloatArray:
    """Mean keys one query token attends when it attends at most topk_tokens of its causal prefix.

    Each sequence's q = tokens / sequences query tokens sit at positions p + 1 .. p + q, where
    p = attended - (q + 1) / 2 is the prefix before them (Step.attended_tokens is p + (q + 1) / 2); query i
    attends min(p + i, K) keys. With m = clip(K - p, 0, q) queries below the cap:
        mean = (m * p + m * (m + 1) / 2 + (q - m) * K) / q      (tokens)
    It equals attended when p + q <= K and K when p >= K.
    """
    per_sequence = step.tokens / np.maximum(step.sequences, 1.0)
    prefix = np.maximum(step.attended_tokens - (per_sequence + 1.0) / 2.0, 0.0)
    below = np.clip(topk_tokens - prefix, 0.0, per_sequence)
    total = below * prefix + below * (below + 1.0) / 2.0 + (per_sequence - below) * topk_tokens
    return np.asarray(total / np.maximum(per_sequence, 1.0), dtype=np.float64)


def selected_step(step: Step, *, topk_tokens: int) -> Step:
    """The pass as the sparse attention kernel sees it: each sequence reads at most index_topk cached tokens
    and each query attends at most index_topk keys; the step itself for a dense card (topk_tokens 0).

    Formula: cached' = min(cached, K);  attended' = capped_mean_attended(step, K);  K = index_topk
    Cached tokens count once per sequence, not once per query token: the verified positions of one decode
    step (1 + draft tokens) and the queries of one prefill chunk select largely the same tokens, which the
    kernel's gathers then find on chip.  [assumed: the overlap of neighbouring queries' top-k sets is not
    published; per query token the read would be up to (1 + draft) x larger in a speculative decode step]
    """
    if not topk_tokens:
        return step
    return replace(
        step,
        cached_tokens=np.minimum(step.cached_tokens, float(topk_tokens)),
        attended_tokens=capped_mean_attended(step, topk_tokens=topk_tokens),
    )


def indexer_cost(step: Step, *, index_bytes: int, flop_per_key: int) -> tuple[FloatArray, FloatArray]:
    """(bytes, FLOP) of the lightning indexer over one pass: it scans every cached index key, however many
    tokens the attention then keeps, and its scores are causal (O(n^2) over a prompt).

    Formula:
        bytes = s * c * x + n * x     s sequences, c paged cached tokens each, x index-key bytes per token
                                      (all layers); the second term writes the new tokens' index keys
        flop  = n * a * F_idx         a keys one query scores (Step.attended_tokens), F_idx
                                      indexer_flop_per_key (opgeometry)
    The top-k selection over the scores is fused into the indexer kernel and not charged apart.
    """
    hbm = step.sequences * step.cached_tokens * index_bytes + step.tokens * index_bytes
    flop = step.tokens * step.attended_tokens * flop_per_key
    return np.asarray(hbm, dtype=np.float64), np.asarray(flop, dtype=np.float64)
