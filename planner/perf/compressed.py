"""DeepSeek-V4 compressed sparse attention in the step model: what the attention of one pass reads and
computes when every layer attends its sliding window plus its compressed records (planner/csa.py), and the
view of the pass its lightning indexers see. planner/perf/opcost.py builds attn.core / attn.indexer (and
the MTP twins) from these; other cards never reach this module.

How vllm-ascend runs it (vllm-project/vllm-ascend 182b75ea vllm_ascend/models/deepseek_v4/model.py:566-600,
indexer.py:243-315): per layer of compress ratio r a query attends the last sliding_window tokens' entries
(bf16) and r's compressed records: at r = 4 the index_topk the indexer picks from every cached record, at
r = 128 every record, at r = 0 none. A record and a window entry are both head_dim wide (one shared K=V head,
d_qk = d_v = head_dim), so each attended entry costs the same FLOP as a key of a GQA head of head_dim.
"""

from __future__ import annotations

import numpy as np

from planner.arrays import FloatArray
from planner.perf.terms import Step
from planner.records import record, replace

INDEXED_RATIO = 4  # planner.schema_card.CSA_INDEXED_RATIO: the layers whose indexer picks top-k records


@record
class CompressedLayers:
    """One rank's compressed-attention layers and the bytes of what they cache (Geometry carries two: the
    model's and the MTP layers').

    counts        layers per compress ratio (csa.ratio_layers)
    window        sliding_window (tokens);  topk  index_topk (records a ratio-4 layer attends at most)
    window_bytes  one window entry of one layer (head_dim * 2, bf16)
    record_bytes  one compressed record of one layer (head_dim * b / 8, the KV-cache dtype)
    """

    counts: dict[int, int]
    window: int
    topk: int
    window_bytes: int
    record_bytes: int

    @property
    def layers(self) -> int:
        """Attention layers of every ratio: sum of counts."""
        return sum(self.counts.values())


def records(tokens: FloatArray, layers: CompressedLayers) -> FloatArray:
    """Compressed records the layers attend over `tokens` cached (or attended) tokens, summed over layers.

    Formula: sum over r > 1 of n_r * (min(t / 4, K) if r = 4 else t / r)      (records, fractional means)
    """
    total = np.zeros_like(np.asarray(tokens, dtype=np.float64))
    for ratio, count in layers.counts.items():
        if ratio > 1:
            per_layer = tokens / ratio
            total = total + count * (
                np.minimum(per_layer, layers.topk) if ratio == INDEXED_RATIO else per_layer
            )
    return total


def attention_cost(
    step: Step, layers: CompressedLayers, new_tokens: FloatArray, *, flop_per_entry: float
) -> tuple[Step, tuple[FloatArray, FloatArray, FloatArray]]:
    """(the pass as the attention table sees it, (bytes, FLOP, bytes the kernel reads)) of one pass.

    Formula (s sequences, c cached and a attended tokens each, n new tokens, L layers, W window):
        read  = s * (L * min(c, W) * B_w + records(c) * B_r)
        bytes = read + n * (L * B_w + sum over r > 1 of n_r * B_r / r)   (the new tokens' window entries and
                                                                          their share of a record)
        flop  = n * (L * min(a, W) + records(a)) * F                     F FLOP per attended entry and layer
        the table's pass: cached = min(c, W) + records(c) / L, attended likewise (entries per layer)
    """
    c, a, count = step.cached_tokens, step.attended_tokens, layers.layers
    window_c, window_a = np.minimum(c, layers.window), np.minimum(a, layers.window)
    records_c, records_a = records(c, layers), records(a, layers)
    read = step.sequences * (count * window_c * layers.window_bytes + records_c * layers.record_bytes)
    per_new = count * layers.window_bytes + sum(
        n * layers.record_bytes / r for r, n in layers.counts.items() if r > 1
    )
    hbm = np.asarray(read + new_tokens * per_new, dtype=np.float64)
    flop = np.asarray(new_tokens * (count * window_a + records_a) * flop_per_entry, dtype=np.float64)
    mean = max(count, 1)
    kept = replace(
        step, cached_tokens=window_c + records_c / mean, attended_tokens=window_a + records_a / mean
    )
    return kept, (hbm, flop, np.asarray(read, dtype=np.float64))


def indexed_step(step: Step, *, ratio: int) -> Step:
    """The pass as a lightning indexer over compressed records sees it: cached and attended tokens / ratio
    (records; ratio 1, every other card's indexer, leaves the step as it is)."""
    if ratio == 1:
        return step
    return replace(
        step, cached_tokens=step.cached_tokens / ratio, attended_tokens=step.attended_tokens / ratio
    )
