"""Top-k sparse attention in the step model (DeepSeek's DSA; MiniMax-M3's MSA through the same formulas):
which cached keys the attention kernel reads, and what the indexer that picks them costs.
planner/perf/opcost.py builds the attn.core / attn.indexer terms (and their MTP twins) from these formulas;
a dense card passes through unchanged.

How vllm-ascend runs it (vllm-project/vllm-ascend 182b75ea): per layer, the lightning indexer scores every
cached token of the sequence for every query token (index_n_heads heads of index_head_dim over the index-key
cache) and returns the 2048 best (device/device_op.py:495-520 npu_lightning_indexer, sparse_count=2048,
sparse_mode=3 causal); the MLA attention then gathers only those tokens' latents
(device_op.py:566-584 npu_sparse_flash_attention, sparse_block_size=1, attention_mode=2; called from
attention/sfa_v1.py:1666-1692). Short sequences (fewer cached tokens than index_topk) attend everything.
MiniMax-M3 (vllm_ascend/models/minimax_m3/msa_m3.py:315-476, minimax_m3.py:138-436): in each sparse layer
the indexer scores every cached 128-token block per KV head (max over the block of q . k, one bf16 index
key per token) and keeps the 16 best (local block included); the GQA attention then reads those blocks:
at most index_topk = 16 x 128 = 2048 tokens per KV head. Its first three layers attend densely.
"""

from __future__ import annotations

import numpy as np

from planner.arrays import FloatArray
from planner.perf.terms import Step
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


def selected_step(step: Step, *, topk_tokens: int, dense_share: float = 0.0) -> Step:
    """The pass as the sparse attention kernel sees it: each sequence reads at most index_topk cached tokens
    and each query attends at most index_topk keys; the step itself for a dense card (topk_tokens 0).

    Formula: cached' = min(cached, K);  attended' = capped_mean_attended(step, K);  K = index_topk
    Cached tokens count once per sequence, not once per query token: the verified positions of one decode
    step (1 + draft tokens) and the queries of one prefill chunk select largely the same tokens, which the
    kernel's gathers then find on chip.  [assumed: the overlap of neighbouring queries' top-k sets is not
    published; per query token the read would be up to (1 + draft) x larger in a speculative decode step]
    dense_share u: the share of the attention layers that attend densely (MiniMax-M3's first 3 of 60, with
    the same K/V bytes per token as its sparse layers): cached and attended become layer-weighted means,
        cached'' = u * cached + (1 - u) * cached',   attended'' likewise      (tokens)
    so the bytes and FLOP, linear in them, are the sums over the dense and the sparse layers.
    """
    if not topk_tokens:
        return step
    u = dense_share
    capped = np.minimum(step.cached_tokens, float(topk_tokens))
    attended = capped_mean_attended(step, topk_tokens=topk_tokens)
    return replace(
        step,
        cached_tokens=u * step.cached_tokens + (1.0 - u) * capped,
        attended_tokens=u * step.attended_tokens + (1.0 - u) * attended,
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
