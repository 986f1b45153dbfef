"""Kernel structure of a decode step per inference engine: how many kernels each op launches (pure data).

The roofline charges every op max(bytes / bandwidth, FLOP / peak) plus fixed costs that depend on how the
engine splits the op into kernels:
    matmuls   matmul calls (one cuBLAS / aclnn call each, whatever helper kernels it launches, e.g. split-K
              reduce): matmul_latency_us each, the latency of `t = latency + bytes / bw` over GEMV sizes
    kernels   other kernels (norm pieces, rope, adds, activation, cache writes): kernel_overhead_us each
Counts are per layer for layer ops and per pass for embedding / lm_head. Sub-ops that only some models have
(Qwen3's per-head q/k RMSNorm) and the attention kernel itself (timed by the measured attention table when
the card has one) are separate keys, so planner/perf/opcost.py can add them where they apply.

Engines:
    mindie, vllm   fused serving graphs: fused QKV, fused qk-norm+rope, reshape-and-cache + paged attention,
                   gate_up + SwiGLU, fused add+RMSNorm.  [assumed: MindIE/ATB and vLLM graph structure from
                   their model code; NOT measured, no serving engine ran on a device here]
    transformers   Hugging Face transformers 5.17 eager modules captured in a CUDA graph (the ACCURACY.md
                   reference).  [measured: lab/harness/kernel_counts.py on NVIDIA H200, 2026-11-30, torch
                   2.11.0+cu130; raw data lab/runs/h200-kernel-counts.json; per-label counts identical
                   on qwen3-8b, llama-3.1-8b, qwen3-14b, qwen3-32b, qwen3-30b-a3b at batch 1 and 64]
"""

from __future__ import annotations

from typing import Literal, get_args

from planner.records import record

# Every op of the decode/prefill ledger (planner/perf/opcost.py terms are named after these, plus
# "tp.allreduce", which launches no kernels of its own): a misspelt op is a type error.
OpName = Literal[
    "embedding",
    "attn.qkv_proj",
    "attn.qk_norm",
    "attn.indexer",
    "attn.core",
    "attn.kernel",
    "attn.o_proj",
    "gdn.in_proj",
    "gdn.update",
    "gdn.out_proj",
    "mlp.gate_up",
    "mlp.down",
    "moe.router",
    "moe.experts",
    "moe.shared",
    "norms",
    "lm_head",
    "mtp.layer",
    "mtp.attention",
    "mtp.indexer",
    "mtp.lm_head",
]
OP_NAMES: tuple[OpName, ...] = get_args(OpName)


@record
class OpKernels:
    """Kernel launches of one op per layer (or per pass): other kernels and matmul calls."""

    kernels: int
    matmuls: int = 0

    @property
    def launches(self) -> int:
        """Every launch the op makes (matmul calls counted once each)."""
        return self.kernels + self.matmuls


FUSED: dict[OpName, OpKernels] = {
    "embedding": OpKernels(1),
    "attn.qkv_proj": OpKernels(0, 1),
    "attn.qk_norm": OpKernels(0),  # fused into the rope kernel
    # DeepSeek sparse attention's indexer: index-key norm + rope, index-cache scatter, the lightning indexer
    # (scores and top-k in one kernel); its two matmuls are counted in attn.qkv_proj's weights
    "attn.indexer": OpKernels(3),
    "attn.core": OpKernels(2),  # qk-norm+rope, reshape_and_cache
    "attn.kernel": OpKernels(1),  # paged attention
    "attn.o_proj": OpKernels(0, 1),
    "gdn.in_proj": OpKernels(0, 2),  # in_proj_qkvz and in_proj_ba
    "gdn.update": OpKernels(3),  # causal conv1d update, recurrent delta-rule update, gated RMSNorm
    "gdn.out_proj": OpKernels(0, 1),
    "mlp.gate_up": OpKernels(1, 1),  # matmul + SwiGLU
    "mlp.down": OpKernels(0, 1),
    "moe.router": OpKernels(1, 1),  # gating matmul + top-k
    "moe.experts": OpKernels(3, 2),  # dispatch, grouped gate_up, SwiGLU, grouped down, combine
    "moe.shared": OpKernels(1, 2),
    "norms": OpKernels(2),  # two fused add+RMSNorm per layer
    "lm_head": OpKernels(1, 1),  # final norm + matmul
    "mtp.layer": OpKernels(4, 5),  # 3 norms, SwiGLU; fc, qkv, o, gate_up, down
    "mtp.attention": OpKernels(2),  # + the attention kernel ("attn.kernel")
    "mtp.indexer": OpKernels(3),  # as attn.indexer
    "mtp.lm_head": OpKernels(1, 1),
}

# Hugging Face transformers, per decoder layer unless noted (lab/runs/h200-kernel-counts.json):
TRANSFORMERS: dict[OpName, OpKernels] = {
    **FUSED,  # moe.shared and mtp.*: no reference model ran them; fused counts kept [assumed]
    "embedding": OpKernels(1),  # index_select
    "attn.qkv_proj": OpKernels(0, 3),  # separate q, k, v projections
    "attn.qk_norm": OpKernels(16),  # q_norm and k_norm: RMSNorm = 8 kernels each (to fp32, pow, mean, + eps,
    # rsqrt, mul, to bf16, * weight)
    "attn.core": OpKernels(15),  # rotary embedding 10 (mul x4, neg x2, cat x2, add x2), cache update 5
    # (arange, add, index_copy_ of K and V, ...)
    "attn.kernel": OpKernels(1),  # one SDPA decode kernel; which one (cuDNN under torch's default dispatch,
    # FlashAttention when forced) is the profile's attention_kernels choice, timed by its table
    "attn.o_proj": OpKernels(0, 1),
    "mlp.gate_up": OpKernels(2, 2),  # gate and up projections; SiLU, mul
    "mlp.down": OpKernels(0, 1),
    "moe.router": OpKernels(5, 1),  # gate matmul; to fp32, softmax, topk, sort, to bf16
    "moe.experts": OpKernels(29, 2),  # grouped_mm path: sort, histc, scan, gathers, 5 copies, masked ops,
    # 2 prepare_grouped_gemm, SiLU*mul, index_put, reduce (28) + act_fn (1); 2 grouped GEMMs
    "norms": OpKernels(18),  # input and post-attention RMSNorm (8 each), two residual adds
    "lm_head": OpKernels(19, 1),  # per step: final RMSNorm 8, rotary cos/sin 9, argmax 1, token copy 1
    # Gated DeltaNet mixer with flash-linear-attention 0.6 kernels (transformers' Qwen3_5GatedDeltaNet),
    # per layer [measured: lab/runs/h200-run5/gdn_*.json, torch.profiler under a CUDA graph, H200
    # 2026-12-01; derived by `python3 -m lab.derive.attn_tables_from_run5 --gdn`]: 5 matmul calls, 29 others
    # at batch >= 2 (copies 12, torch depthwise conv 1, gating/norm elementwise 15, fused recurrent rule 1)
    "gdn.in_proj": OpKernels(0, 4),  # in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
    "gdn.update": OpKernels(29),
    "gdn.out_proj": OpKernels(0, 1),
}

# Passes over each sequence's linear-attention (conv + recurrent) state per decode step: read + write once
# in a fused update [assumed for mindie, vllm]; transformers + fla reads and writes the fp32 state twice
# (the recurrent kernel returns a new state that the cache then copy_'s) [measured: h200-run5 gdn_*.json,
# 27B shape at batch 64: recurrent kernel 138 us + copies 136 us over a 207 MB state]. A speculative verify
# step writes one more snapshot per draft token (opcost.gdn_update_term): vllm-ascend's recurrent rule stores
# the state after every verified position in its own slot and vLLM keeps 1 + num_speculative_blocks state
# blocks per request [source: vllm-ascend 182b75ea, the golden of tests/e2e/nightly/single_node/ops/
# singlecard_ops/test_recurrent_gated_delta_rule.py and vllm_ascend/patch/worker/patch_mamba_utils.py;
# assumed for mindie].
# Each engine's count (STATE_PASSES) and kernel table (FUSED_KERNELS) live in its room
# (planner/engines/<engine>/); planner/perf/roofline.engine_kernels asks them through
# planner/engines/registry.py and hands them down as an EngineKernels value (in Geometry).
assert set(FUSED) == set(OP_NAMES) and set(TRANSFORMERS) == set(OP_NAMES), "every op needs a count"


@record
class EngineKernels:
    """What the step model needs of the engine's kernels (its room's facts, through the registry).

    fused                fused serving kernels (FUSED) rather than transformers' eager modules (TRANSFORMERS)
    state_passes         reads + writes of the linear-attention state per sequence and decode step
    gathers_moe_outputs  MoE outputs all-gathered over the TP ranks (expert parallel under vLLM)
    """

    fused: bool
    state_passes: int
    gathers_moe_outputs: bool = False


def op_kernels(engine: EngineKernels, op: OpName) -> OpKernels:
    """Kernel launches per layer (or pass) of `op` under the engine's kernels."""
    return (FUSED if engine.fused else TRANSFORMERS)[op]
