"""Benchmark shapes and sizes: taken from a model card when --model is given, else a standard set.

Pure (no torch): the shapes come from planner.params, so the microbenchmarks time exactly the matrices the
planner counts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from planner import units
from planner.params import Linear, decoder_tensors
from planner.schema import ModelCard


@dataclass(frozen=True)
class ModelShapes:
    """What the benchmarks need from a model: its matmul shapes (in, out) and its attention geometry."""

    name: str
    linears: tuple[tuple[int, int], ...]  # (in_features, out_features) of one layer's matmuls
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    # KV-head counts of the decode-attention grid (each with num_attention_heads query heads): the model's
    # own and a second GQA shape, so the table spans batch x kv heads, not batch alone
    attention_kv_heads: tuple[int, ...] = ()
    # routed experts of the grouped-GEMM benchmark: (experts, top_k, hidden_size, moe_intermediate_size);
    # None: not benchmarked (a dense --model)
    moe: tuple[int, int, int, int] | None = None

    @property
    def kv_heads_grid(self) -> tuple[int, ...]:
        """KV-head counts to benchmark: attention_kv_heads, else the model's own."""
        return self.attention_kv_heads or (self.num_key_value_heads,)


@dataclass(frozen=True)
class BenchSizes:
    """How big and how many: FULL on accelerators, TINY for CPU dry runs and tests."""

    stream_bytes: int  # buffer streamed by the bandwidth test
    rotate_bytes: int  # weights cycled through per GEMV timing, several times the last-level cache
    gemm_n: int  # square GEMM edge for the compute peak
    decode_batches: tuple[int, ...]
    prefill_tokens: int
    attn_batches: tuple[int, ...]
    attn_contexts: tuple[int, ...]
    attn_max_bytes: int  # skip attention points whose KV exceeds this
    attn_min_fit_bytes: int  # points at or above this KV size set kv_read_bandwidth_fraction
    small_kernels: int  # kernels per overhead timing
    gemv_latency_shapes: tuple[tuple[int, int], ...]  # extra (in, out) GEMV shapes for the latency fit
    gemv_latency_batches: tuple[int, ...]
    small_kernel_batches: tuple[int, ...]  # rows of the [batch, hidden] small-kernel benchmarks
    small_kernel_hidden: int
    moe_batches: tuple[
        int, ...
    ]  # decode batches of the grouped expert GEMM benchmark (tokens * top_k routed)
    allreduce_bytes: tuple[int, ...]  # all-reduce message sizes (batch x hidden bf16 at decode)
    warmup: int
    repeats: int


FULL = BenchSizes(
    stream_bytes=4 * units.GIB_BYTES,
    rotate_bytes=1 * units.GIB_BYTES,
    gemm_n=8192,
    decode_batches=(1, 2, 4, 8, 16, 32, 64, 128),
    prefill_tokens=4096,
    attn_batches=(1, 2, 4, 8, 16, 32, 64, 128, 256),
    attn_contexts=(256, 512, 1024, 2048, 4096, 8192, 16384, 32768),
    attn_max_bytes=20 * units.GIB_BYTES,
    attn_min_fit_bytes=256 * units.MIB_BYTES,
    small_kernels=200,
    gemv_latency_shapes=(
        (1024, 1024),
        (2048, 2048),
        (4096, 1024),
        (5120, 5120),
        (8192, 8192),
        (5120, 25600),
        (8192, 28672),
    ),
    gemv_latency_batches=(1, 8),
    small_kernel_batches=(1, 8, 64, 256),
    small_kernel_hidden=4096,
    moe_batches=(1, 2, 4, 8, 16, 32, 64, 128),
    allreduce_bytes=tuple(8 * units.KIB_BYTES * 2**i for i in range(14)),  # 8 KiB .. 64 MiB
    warmup=3,
    repeats=7,
)
TINY = BenchSizes(
    stream_bytes=8 * units.MIB_BYTES,
    rotate_bytes=4 * units.MIB_BYTES,
    gemm_n=128,
    decode_batches=(1, 4),
    prefill_tokens=32,
    attn_batches=(1, 2),
    attn_contexts=(64, 256),
    attn_max_bytes=64 * units.MIB_BYTES,
    attn_min_fit_bytes=0,
    small_kernels=20,
    gemv_latency_shapes=((32, 32), (128, 256)),
    gemv_latency_batches=(1,),
    small_kernel_batches=(1,),
    small_kernel_hidden=64,
    moe_batches=(1, 4),
    allreduce_bytes=(8 * units.KIB_BYTES, 64 * units.KIB_BYTES),
    warmup=1,
    repeats=3,
)

SIZES_ENV = "KVPLAN_CALIBRATE_SIZES"


def tiny_sizes(kind: str) -> bool:
    """TINY sizes on cpu, or anywhere when KVPLAN_CALIBRATE_SIZES=tiny (a seconds-long smoke run that calls
    every kernel once on a new machine before the full run; the tests' fake NPU uses it too)."""
    return kind == "cpu" or os.environ.get(SIZES_ENV, "").lower() == "tiny"


# A Llama/Qwen3-8B-class layer: the standard set when no --model is given.  [assumed: typical 8B geometry]
STANDARD_SHAPES = ModelShapes(
    name="standard-8b-class",
    linears=((4096, 6144), (4096, 4096), (4096, 24576), (12288, 4096)),
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=151936,
    attention_kv_heads=(8, 4),
    moe=(128, 8, 2048, 768),  # [assumed: the reference MoE, qwen3-30b-a3b (modelcards/qwen3-30b-a3b.yaml)]
)
TINY_SHAPES = ModelShapes(
    name="tiny",
    linears=((64, 96), (64, 64), (64, 256), (128, 64)),
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    vocab_size=512,
    attention_kv_heads=(2, 1),
    moe=(8, 2, 64, 32),
)


def shapes_from_card(card: ModelCard) -> ModelShapes:
    """One layer's distinct matmul shapes (tp=1) and the attention geometry of a model card.

    q/k/v projections are fused into one (H, q + 2 kv) matmul, as serving engines run them.
    """
    linears = [t for t in decoder_tensors(card, tp=1) if isinstance(t, Linear)]
    qkv = [t for t in linears if t.name in ("q_proj", "k_proj", "v_proj")]
    others = [(t.in_features, t.out_features) for t in linears if t not in qkv]
    fused = [(qkv[0].in_features, sum(t.out_features for t in qkv))] if qkv else []
    unique = list(dict.fromkeys(fused + others))
    return ModelShapes(
        name=card.id,
        linears=tuple(unique),
        num_attention_heads=card.num_attention_heads,
        num_key_value_heads=card.num_key_value_heads,
        head_dim=card.head_dim or 128,
        vocab_size=card.vocab_size,
        attention_kv_heads=tuple(
            dict.fromkeys([card.num_key_value_heads, max(1, card.num_key_value_heads // 2)])
        ),
        moe=(
            card.routed_expert_count,
            card.num_experts_per_tok or 0,
            card.hidden_size,
            card.moe_intermediate_size or 0,
        )
        if card.is_moe
        else None,
    )
