"""The small-kernel mix of one decode layer, timed per kernel: one code path for cuda, npu and cpu.

`microbench.decode_chain` times one kind of small kernel (RMSNorm pieces, add, SiLU, mul) on [batch, hidden].
A decode layer's non-matmul, non-attention kernels are a mix of shapes and kinds: RMSNorm over the hidden
state (input and post-attention), RMSNorm over each query and key head (multi-row reductions), rotary
embedding (rotate_half: neg + cat; two muls and an add per tensor), the KV-cache writes (index_copy_ of one
token into a [batch, kv heads, ctx, head_dim] cache), residual adds and SiLU * up. `layer_mix` runs that
sequence as transformers' Qwen3/Llama decoder layer writes it at query length 1, with buffers standing in for
the matmul and attention outputs (their kernels are timed elsewhere: gemv, attention), so every kernel timed
here is one the roofline charges at kernel_overhead_us.

Kernels per pass are counted on the device where a profiler exists (torch.profiler on cuda; torch_npu.profiler
through npu_kernels.count_device_kernels on npu) and the per-kernel time divides by that count; on cpu (tests,
dry runs) the count is MIX_KERNELS_PER_PASS, the eager kernels this code launches by construction.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

# One pass: 4 RMSNorms x 8 kernels (float cast, pow, mean, + eps, rsqrt, mul, cast back, * weight: input,
# q heads, k heads, post-attention) + rotary 2 x 5 (neg, cat, * cos, * sin, add) + 2 cache writes
# (index_copy_ of k and v) + 2 residual adds + SiLU + mul. (The attention output's transpose(1, 2) is
# contiguous at query length 1: no copy kernel, in transformers either.)
MIX_KERNELS_PER_PASS = 4 * 8 + 2 * 5 + 2 + 2 + 2
MIX_CACHE_TOKENS = 256  # ctx of the stand-in KV cache: index_copy_ writes one token whatever its length
RMS_EPS = 1e-6


def _rms(torch: Any, x: Any, weight: Any) -> Any:
    """transformers' RMSNorm: 8 kernels."""
    f = x.to(torch.float32)
    var = f.pow(2).mean(-1, keepdim=True)
    f = f * torch.rsqrt(var + RMS_EPS)
    return weight * f.to(x.dtype)


def _rotary(torch: Any, x: Any, cos: Any, sin: Any) -> Any:
    """x * cos + rotate_half(x) * sin, rotate_half = cat(-x2, x1): 5 kernels."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def layer_mix(
    backend: Any, *, batch: int, hidden: int, heads: tuple[int, int, int], passes: int
) -> Callable[[], object]:
    """`passes` repetitions of one decode layer's small kernels at query length 1 (MIX_KERNELS_PER_PASS
    eager kernels each); heads = (query heads, kv heads, head_dim)."""
    torch, dev, dtype = backend.torch, backend.device, backend.compute_dtype
    hq, hkv, hd = heads

    def rand(*shape: int) -> Any:
        return torch.randn(*shape, device=dev, dtype=dtype)

    h, o_proj, gate, up = (rand(batch, 1, hidden) for _ in range(4))  # stand-ins for matmul outputs
    q_raw, k_raw, v_raw = rand(batch, 1, hq, hd), rand(batch, 1, hkv, hd), rand(batch, 1, hkv, hd)
    w_hidden, w_head = rand(hidden), rand(hd)
    cos, sin = rand(batch, 1, 1, hd), rand(batch, 1, 1, hd)
    k_cache, v_cache = rand(batch, hkv, MIX_CACHE_TOKENS, hd), rand(batch, hkv, MIX_CACHE_TOKENS, hd)
    position = torch.tensor([MIX_CACHE_TOKENS - 1], device=dev)

    def run() -> object:
        x = h
        for _ in range(passes):
            _rms(torch, x, w_hidden)  # input norm (feeds the q/k/v matmuls, timed by gemv)
            q = _rotary(torch, _rms(torch, q_raw, w_head).transpose(1, 2), cos, sin)
            k = _rotary(torch, _rms(torch, k_raw, w_head).transpose(1, 2), cos, sin)
            k_cache.index_copy_(2, position, k)
            v_cache.index_copy_(2, position, v_raw.transpose(1, 2))
            x = x + o_proj  # residual after attention (attention and o_proj timed elsewhere)
            _rms(torch, x, w_hidden)  # post-attention norm (feeds gate/up, timed by gemv)
            x = x + torch.nn.functional.silu(gate) * up  # SiLU * up, residual (down_proj timed by gemv)
        return q

    return run


def per_batch_rows(rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per-kernel rows by batch: this mix, else (older raw files) microbench's elementwise chain. Rows of
    one batch from several runs (raw files pooled) become one: the median of all their samples."""
    kernels = rows.get("kernels", [])
    chosen = [r for r in kernels if r.get("mode") == "layer_mix"]
    chosen = chosen or [r for r in kernels if r.get("mode") == "decode_chain"]
    by_batch: dict[int, list[dict[str, Any]]] = {}
    for row in chosen:
        by_batch.setdefault(int(row["batch"]), []).append(row)
    return [_pooled(group) for _, group in sorted(by_batch.items())]


def _pooled(group: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of a batch: itself, or the median of every sample of its repeats."""
    if len(group) == 1:
        return group[0]
    samples = [s for row in group for s in row.get("samples_s") or [row["median_s"]]]
    return {**group[0], "median_s": statistics.median(samples), "samples_s": samples, "runs": len(group)}


def count_kernels(backend: Any, fn: Callable[[], object]) -> int | None:
    """Device kernels one call of fn launches: torch.profiler (cuda), torch_npu.profiler (npu); cpu: None."""
    if backend.kind == "npu":
        from calibration import npu_kernels

        return npu_kernels.count_device_kernels(backend, fn)
    if backend.kind != "cuda":
        return None
    torch = backend.torch
    fn()  # warm-up outside the profile
    backend.synchronize()
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        fn()
        backend.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def mix_rows(suite: Any) -> None:
    """Per-kernel time of the decode-layer mix at each small-kernel batch, from a graph (eager on cpu),
    divided by MIX_KERNELS_PER_PASS; recount() corrects the divisor after the whole suite has run."""
    shapes, sizes, backend = suite.shapes, suite.sizes, suite.backend
    heads = (shapes.num_attention_heads, shapes.num_key_value_heads, shapes.head_dim)
    hidden = sizes.small_kernel_hidden
    passes = max(1, sizes.small_kernels // MIX_KERNELS_PER_PASS)
    for batch in sizes.small_kernel_batches:
        mix = layer_mix(backend, batch=batch, hidden=hidden, heads=heads, passes=passes)
        kernels = passes * MIX_KERNELS_PER_PASS
        seconds = [s / kernels for s in suite._timed(mix, graph=backend.kind != "cpu")]
        suite._record(
            "kernels",
            seconds,
            mode="layer_mix",
            kernels=kernels,
            kernels_counted=False,
            batch=batch,
            heads=list(heads),
            hidden=hidden,
        )


def rescale_to_counted(rows: list[dict[str, Any]], *, assumed: int, counted: int) -> None:
    """Rescale timed rows from `assumed` kernels per pass to the `counted` the profiler saw: time per kernel
    x assumed / counted, the kernel count x counted / assumed (rows updated in place)."""
    factor = assumed / counted
    for row in rows:
        row.update(
            median_s=row["median_s"] * factor,
            samples_s=[x * factor for x in row["samples_s"]],
            kernels=row["kernels"] // assumed * counted,
            kernels_counted=True,
        )


def recount(rows: list[dict[str, Any]], backend: Any) -> str | None:
    """Rescale the layer_mix rows to the device kernels the profiler counts in one pass; a note, or None
    when there is nothing to count (cpu, no rows). Runs after every timing: a device profiler can stay
    attached to the process and slow later launches (about 0.6 us per kernel seen on CUDA)."""
    mix = [r for r in rows if r.get("mode") == "layer_mix"]
    if not mix:
        return None
    heads = tuple(int(h) for h in mix[0]["heads"])
    one = layer_mix(backend, batch=1, hidden=int(mix[0]["hidden"]), heads=heads, passes=1)  # type: ignore[arg-type]
    counted = count_kernels(backend, one)
    if not counted:
        return None
    rescale_to_counted(mix, assumed=MIX_KERNELS_PER_PASS, counted=counted)
    return (
        f"layer mix: {counted} device kernels per pass counted by the profiler "
        f"({MIX_KERNELS_PER_PASS} by construction)"
    )
