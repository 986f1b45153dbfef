"""`vllm serve` arguments (vllm-ascend) equivalent to the MindIE config of the same plan (pure).

Mapping (ascend-mindie-facts.md 1.6):
  --max-model-len           MindIE maxSeqLen (--ctx)
  --max-num-seqs            maxBatchSize (the plan's max_batch_size)
  --max-num-batched-tokens  maxPrefillTokens (>= the longest prompt; with chunked prefill a per-step budget)
  --gpu-memory-utilization  NPU_MEMORY_FRACTION, not npuMemSize: vLLM lets weights + activations + KV use
                            util x HBM and gives the KV cache what is left after profiling (MindIE's -1 rule),
                            while npuMemSize is an absolute KV size in GB
  --block-size              cacheBlockSize (vllm-ascend sets 128 when it is not given)
  --kv-cache-dtype          auto (16-bit) or fp8; vllm-ascend's INT8 KV comes with a quantized checkpoint
  --tensor-parallel-size    worldSize (--tp)
"""

from __future__ import annotations

import math
import shlex

from planner import units
from planner.engines.common import Lengths, ServingOptions
from planner.errors import PlanInputError
from planner.results import Plan
from planner.schema import Frozen

VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128)  # vLLM CacheConfig block_size literal choices (0.9-0.10)
KV_CACHE_DTYPES = {"bf16": "auto", "fp16": "auto", "fp8": "fp8", "int8": "auto"}


class VllmArgs(Frozen):
    """`vllm serve <model> <args>`; value None is a bare flag."""

    model: str
    args: list[tuple[str, str | None]]
    min_gpu_memory_utilization: float
    notes: list[str]


def min_memory_utilization(plan: Plan) -> float:
    """Smallest --gpu-memory-utilization (2 decimals, rounded up) that still holds maxBatchSize sequences.

    Formula: (weights + activation + runtime + batch * kv_bytes_per_sequence) / capacity
    """
    mem = plan.memory
    needed = (
        mem.weights_bytes
        + mem.activation_bytes
        + mem.runtime_bytes
        + plan.recommendation.max_batch_size * mem.kv_bytes_per_sequence
    )
    return math.ceil(needed / mem.device_capacity_bytes * units.PERCENT) / units.PERCENT


def vllm_args(plan: Plan, *, lengths: Lengths, options: ServingOptions) -> VllmArgs:
    """The vllm serve arguments of the plan, with notes where vLLM and MindIE differ."""
    if plan.block_size_tokens not in VLLM_BLOCK_SIZES:
        choices = ", ".join(map(str, VLLM_BLOCK_SIZES))
        raise PlanInputError(
            f"--block-size: vLLM has no such block size "
            f"(got {plan.block_size_tokens}, expected one of {choices})"
        )
    args: list[tuple[str, str | None]] = [
        ("--max-model-len", str(lengths.max_seq_len_tokens)),
        ("--max-num-seqs", str(plan.recommendation.max_batch_size)),
        ("--max-num-batched-tokens", str(lengths.max_prefill_tokens)),
        ("--gpu-memory-utilization", f"{plan.memory_fraction:g}"),
        ("--block-size", str(plan.block_size_tokens)),
        ("--kv-cache-dtype", KV_CACHE_DTYPES[plan.kv_dtype]),
        ("--tensor-parallel-size", str(plan.tp)),
    ]
    if options.model_name:
        args.append(("--served-model-name", options.model_name))
    if options.prefix_cache:
        args.append(("--enable-prefix-caching", None))
    return VllmArgs(
        model=options.weights_path or plan.model,
        args=args,
        min_gpu_memory_utilization=min_memory_utilization(plan),
        notes=vllm_notes(plan, options),
    )


def vllm_notes(plan: Plan, options: ServingOptions) -> list[str]:
    """Where the vLLM command differs from the MindIE config in meaning."""
    notes = [
        f"--gpu-memory-utilization {plan.memory_fraction:g} is NPU_MEMORY_FRACTION (a share of all "
        f"memory), not npuMemSize; the plan's batch needs at least {min_memory_utilization(plan):g}"
    ]
    if plan.kv_dtype == "int8":
        notes.append(
            "--kv-cache-dtype: vLLM has no int8 choice; vllm-ascend's INT8 KV cache (C8) comes with "
            "an msModelSlim-quantized checkpoint, so auto is printed"
        )
    if options.mtp:
        notes.append(
            f"--mtp {options.mtp}: add vllm-ascend's --speculative-config for MTP; its method name "
            f"depends on the vLLM version, so kvplan does not print it"
        )
    if not options.prefix_cache:
        notes.append(
            "vLLM V1 enables prefix caching by default (MindIE does not); add "
            "--no-enable-prefix-caching to match the MindIE config"
        )
    return notes


def render_command(result: VllmArgs) -> str:
    """A copy-pasteable shell command, one argument per line."""
    lines = [f"vllm serve {shlex.quote(result.model)}"]
    for flag, value in result.args:
        lines.append(f"  {flag}" + (f" {shlex.quote(value)}" if value is not None else ""))
    return " \\\n".join(lines)
