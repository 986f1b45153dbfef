"""Microbenchmarks: one code path for cpu, cuda and npu (device.Backend hides the differences).

Each benchmark warms up, times with device events (host clock on cpu), repeats, and keeps every sample; the
caller (calibration/calibrate.py) turns medians into PerfCoefficients. All rows are plain dicts so they can
be written as raw JSON next to the profile (lab/runs/).

    stream      sum over a large bf16 buffer (read) and a copy (read + write)   -> memory bandwidth
    gemv        one layer's matmuls at decode batches plus a ladder of GEMV sizes (1024^2 .. 8192 x 28672),
                weights past L2; t = latency + bytes / bw -> matmul_latency_us, weight_read_bandwidth_fraction
    gemm        a large square GEMM per dtype, and prefill-shaped GEMMs         -> compute_fraction[dtype]
    attention   decode attention (query length 1, GQA, no repeated KV heads) over batch x kv heads x ctx
                                                               -> attention_table, kv_read_bandwidth_fraction
    kernels     an empty kernel (x.mul_(1) on 1024 elements), eager and from a graph (provenance), and a
                chain of real decode elementwise kernels (RMSNorm pieces, add, SiLU, mul on [batch, hidden])
                replayed from a graph (provenance), and a decode layer's small-kernel mix (norms over
                the hidden state and each q/k head, rotary, cache writes, adds, SiLU * up; kernels counted
                by the device profiler; calibration/small_kernels.py)   -> kernel_overhead_us, _table
    step        graph replay of argmax over the vocabulary + host sync          -> step_overhead_us
    grouped_gemm  MoE grouped expert GEMMs at decode batches (calibration/moe_bench.py)
                                     -> grouped_matmul_latency_us, grouped_weight_read_bandwidth_fraction
    allreduce   all-reduce over every visible device, 8 KiB .. 64 MiB (calibration/allreduce.py)
                                     -> allreduce_latency_us, allreduce_bandwidth_fraction
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from calibration import allreduce, moe_bench, npu_kernels, small_kernels
from calibration.device import Backend, median_and_spread, square_gemm
from calibration.shapes import BenchSizes, ModelShapes

Progress = Callable[[str], None]
BF16_BYTES = 2
# Kernels of one pass of decode_chain(): float cast, pow, mean, + eps, rsqrt, mul, bf16 cast, * weight,
# + residual, SiLU, mul = 11 eager kernels (one each; lab/harness/kernel_counts.py profiles it to check).
CHAIN_KERNELS_PER_PASS = 11
RMS_EPS = 1e-6


@dataclass
class Measurements:
    """Everything the suite measured, as raw rows plus notes on what was skipped and why."""

    device: str
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    def add(self, bench: str, **row: Any) -> None:
        """Append one result row to a benchmark's table."""
        self.rows.setdefault(bench, []).append(row)


def linear_matmul(x: Any, weight: Any) -> Any:
    """x @ weight^T: a linear layer's matmul (its weight stored out x in)."""
    return x @ weight.t()


@dataclass
class Suite:
    """Runs the benchmarks on one backend within a time budget."""

    backend: Backend
    sizes: BenchSizes
    shapes: ModelShapes
    budget_s: float
    progress: Progress = lambda _label: None
    allreduce_world: int = 0  # ranks of the all-reduce benchmark; 0: every visible device when more than one
    out: Measurements = field(init=False)
    _start: float = field(init=False, default=0.0)
    last_timing: str = field(init=False, default="eager")  # how the last _timed call ran: graph | eager

    def __post_init__(self) -> None:
        self.out = Measurements(device=self.backend.spec.text)

    def time_left(self) -> bool:
        """True while the suite is inside its time budget."""
        return time.perf_counter() - self._start < self.budget_s

    def run(self) -> Measurements:
        """Run every benchmark in order (cheapest, most important first); stop early when over budget."""
        self._start = time.perf_counter()
        steps = [
            ("kernel overhead", self.kernels),
            ("step overhead", self.step),
            ("stream bandwidth", self.stream),
            ("decode GEMV", self.gemv),
            ("decode attention", self.attention),
            ("GEMM peak", self.gemm),
            ("prefill GEMM", self.prefill_gemm),
            ("quantized GEMV", self.quant_gemv),
            ("grouped expert GEMM", lambda: moe_bench.grouped_gemm_bench(self)),
            ("all-reduce", lambda: allreduce.allreduce_rows(self)),
        ]
        for label, bench in steps:
            if not self.time_left():
                self.out.notes.append(f"{label}: skipped, time budget of {self.budget_s:.0f} s spent")
                continue
            self.progress(label)
            self.backend.run_guarded(label, bench, self.out.notes)  # fails alone, one note
        self.out.elapsed_s = time.perf_counter() - self._start
        return self.out

    # -- helpers ---------------------------------------------------------------------------------------
    def _randn(self, *shape: int, dtype: Any = None) -> Any:
        torch = self.backend.torch
        return torch.randn(*shape, device=self.backend.device, dtype=dtype or self.backend.compute_dtype)

    def _timed(self, fn: Callable[[], object], *, inner: int = 1, graph: bool = False) -> list[float]:
        """Samples in seconds per call; with graph=True the calls are replayed from a captured graph."""
        call, self.last_timing = fn, "eager"
        if graph:
            replay = self.backend.capture_graph(fn)
            call = replay if replay is not None else fn
            self.last_timing = "eager" if replay is None else "graph"
        return self.backend.samples(call, warmup=self.sizes.warmup, repeats=self.sizes.repeats, inner=inner)

    def _record(self, bench: str, seconds: list[float], **row: Any) -> float:
        middle, spread = median_and_spread(seconds)
        row.setdefault("timing", self.last_timing)
        self.out.add(bench, median_s=middle, spread_fraction=spread, samples_s=seconds, **row)
        return middle

    def _record_gemv(
        self, matmul: Callable[[Any, Any], object], x: Any, weights: list[Any], *, out_f: int, **tags: Any
    ) -> None:
        """Time matmul(x, w) over every rotated weight copy (graphed); record one "gemv" row per weight.

        bytes = one weight (tags["weight_bytes"]) + 16-bit activations in and out; flop = 2 * b * in * out.
        """
        batch, in_f = x.shape
        weight_bytes = tags.pop("weight_bytes")

        def run() -> None:
            for w in weights:
                matmul(x, w)

        self._record(
            "gemv",
            [s / len(weights) for s in self._timed(run, graph=True)],
            in_features=in_f,
            out_features=out_f,
            batch=batch,
            bytes=weight_bytes + batch * (in_f + out_f) * BF16_BYTES,
            flop=2 * batch * in_f * out_f,
            **tags,
        )

    # -- benchmarks ------------------------------------------------------------------------------------
    def kernels(self) -> None:
        """Fixed cost per kernel: an empty kernel (eager and graph) and real decode elementwise kernels."""
        n = self.sizes.small_kernels
        x = self._randn(1024)

        def many() -> None:
            for _ in range(n):
                x.mul_(1.0)

        eager = [s / n for s in self._timed(many)]
        self._record("kernels", eager, mode="eager", kernels=n)
        if self.backend.kind != "cpu":
            graph = [s / n for s in self._timed(many, graph=True)]
            if self.last_timing == "graph":  # never label eager timings graph
                self._record("kernels", graph, mode="graph", kernels=n)
        passes = max(1, n // CHAIN_KERNELS_PER_PASS)
        for batch in self.sizes.small_kernel_batches:
            chain = decode_chain(
                self.backend, batch=batch, hidden=self.sizes.small_kernel_hidden, passes=passes
            )
            kernels = passes * CHAIN_KERNELS_PER_PASS
            seconds = [s / kernels for s in self._timed(chain, graph=self.backend.kind != "cpu")]
            self._record("kernels", seconds, mode="decode_chain", kernels=kernels, batch=batch)
        small_kernels.mix_rows(self)  # a decode layer's mix of small kernels: -> kernel_overhead_table

    def step(self) -> None:
        """Host wall time of one graph replay holding argmax over the vocabulary, plus the host sync."""
        logits = self._randn(1, self.shapes.vocab_size)
        token = logits.argmax(-1)

        def sample() -> None:
            token.copy_(logits.argmax(-1))

        replay = self.backend.capture_graph(sample)
        self.last_timing = "eager" if replay is None else "graph"
        replay = replay or sample
        for _ in range(self.sizes.warmup):
            replay()
        self.backend.synchronize()
        seconds = []
        for _ in range(self.sizes.repeats * 3):
            start = time.perf_counter()
            replay()
            self.backend.synchronize()
            seconds.append(time.perf_counter() - start)
        self._record("step", seconds, vocab=self.shapes.vocab_size)

    def stream(self) -> None:
        """Streaming read (sum into fp32) and copy bandwidth over a buffer far larger than any cache."""
        torch = self.backend.torch
        elements = self.sizes.stream_bytes // BF16_BYTES
        x = self._randn(elements)
        y = torch.empty_like(x)
        read = self._timed(lambda: x.sum(dtype=torch.float32), inner=3)
        self._record("stream", read, op="read", bytes=elements * BF16_BYTES)
        copy = self._timed(lambda: y.copy_(x), inner=3)
        self._record("stream", copy, op="copy", bytes=2 * elements * BF16_BYTES)

    def gemv(self) -> None:
        """Decode-shaped matmuls y = x W^T, cycling through enough weight copies to beat L2: the model's
        matmuls at every decode batch, then a ladder of sizes at a few batches for the latency fit."""
        plan = [(shape, self.sizes.decode_batches, "model") for shape in self.shapes.linears]
        plan += [
            (shape, self.sizes.gemv_latency_batches, "ladder") for shape in self.sizes.gemv_latency_shapes
        ]
        for (in_f, out_f), batches, role in plan:
            weight_bytes = in_f * out_f * BF16_BYTES
            copies = max(1, -(-self.sizes.rotate_bytes // weight_bytes))
            weights = [self._randn(out_f, in_f) for _ in range(copies)]
            tags = {"dtype": "bf16", "role": role}
            for batch in batches:
                if not self.time_left():
                    self.out.notes.append("decode GEMV: stopped early, time budget spent")
                    return
                x = self._randn(batch, in_f)
                self._record_gemv(linear_matmul, x, weights, out_f=out_f, weight_bytes=weight_bytes, **tags)
            del weights

    def attention(self) -> None:
        """Decode attention over batch x kv heads x ctx with GQA: each KV head is read once (no
        repeat_interleave of K/V); one layer per point, points above attn_max_bytes skipped."""
        hq, hd = self.shapes.num_attention_heads, self.shapes.head_dim
        for hkv in self.shapes.kv_heads_grid:
            for ctx in self.sizes.attn_contexts:
                for batch in self.sizes.attn_batches:
                    kv_bytes = 2 * batch * hkv * ctx * hd * BF16_BYTES
                    if kv_bytes > self.sizes.attn_max_bytes or not self.time_left():
                        continue
                    self._attention_point(batch=batch, ctx=ctx, heads=(hq, hkv, hd))

    def _attention_point(self, *, batch: int, ctx: int, heads: tuple[int, int, int]) -> None:
        hq, hkv, hd = heads
        if self.backend.kind == "npu":  # paged KV cache + block table, as the engines call it
            attend = npu_kernels.paged_attention_fn(self.backend, batch=batch, ctx=ctx, heads=heads)
        else:
            q = self._randn(batch, hq, 1, hd)
            k, v = self._randn(batch, hkv, ctx, hd), self._randn(batch, hkv, ctx, hd)
            attend = decode_attention_fn(self.backend, q, k, v)
        seconds = self._timed(attend, graph=True)
        self._record(
            "attention",
            seconds,
            batch=batch,
            ctx=ctx,
            bytes=2 * batch * hkv * ctx * hd * BF16_BYTES,
            heads=hq,
            kv_heads=hkv,
            head_dim=hd,
        )

    def gemm(self) -> None:
        """A large square GEMM per dtype the device offers (bf16, fp16; fp8 and int8 where supported)."""
        n = self.sizes.gemm_n
        for dtype, make in gemm_variants(self.backend, n).items():
            try:
                run = make()
                seconds = self._timed(run, inner=3)
            except (RuntimeError, TypeError, NotImplementedError) as exc:
                self.out.notes.append(f"gemm {dtype}: not run ({str(exc).splitlines()[0][:120]})")
                continue
            self._record("gemm", seconds, dtype=dtype, m=n, n=n, k=n, flop=2 * n**3)

    def prefill_gemm(self) -> None:
        """The model's matmuls at the prefill token count (bf16): what prefill compute actually achieves."""
        tokens = self.sizes.prefill_tokens
        for in_f, out_f in self.shapes.linears:
            if not self.time_left():
                return
            x, w = self._randn(tokens, in_f), self._randn(out_f, in_f)
            seconds = self._timed(lambda x=x, w=w: x @ w.t(), inner=3)
            self._record(
                "prefill_gemm",
                seconds,
                dtype="bf16",
                m=tokens,
                k=in_f,
                n=out_f,
                flop=2 * tokens * in_f * out_f,
            )

    def quant_gemv(self) -> None:
        """W8A16 / W4A16 decode GEMV through torch_npu.npu_weight_quant_batchmatmul (Ascend only)."""
        if self.backend.kind != "npu":
            self.out.notes.append(
                f"quantized GEMV (W8A16/W4A16): Ascend-only kernels, not run on {self.backend.kind}"
            )
            return
        npu_kernels.w8a16_rows(self)  # engine layout (in, out), ND and FRACTAL_NZ, in a graph


def decode_chain(backend: Backend, *, batch: int, hidden: int, passes: int) -> Callable[[], object]:
    """`passes` repetitions of the small kernels of an eager decode layer on [batch, hidden] bf16:
    RMSNorm as transformers writes it (float cast, pow, mean, + eps, rsqrt, mul, cast back, * weight), a
    residual add, SiLU and a mul: CHAIN_KERNELS_PER_PASS kernels per pass, each dependent on the last."""
    torch = backend.torch
    dtype = backend.compute_dtype  # bf16; fp16 on a SoC without bf16 (310P)
    x = torch.randn(batch, hidden, device=backend.device, dtype=dtype)
    weight = torch.randn(hidden, device=backend.device, dtype=dtype)
    residual = torch.randn_like(x)

    def run() -> object:
        h = x
        for _ in range(passes):
            f = h.float()
            var = f.pow(2).mean(-1, keepdim=True)
            f = f * torch.rsqrt(var + RMS_EPS)
            h = weight * f.to(dtype)
            h = h + residual
            h = torch.nn.functional.silu(h) * residual
        return h

    return run


def decode_attention_fn(backend: Backend, q: Any, k: Any, v: Any) -> Callable[[], object]:
    """The decode-attention call for this backend; q (B, Hq, 1, D), k/v (B, Hkv, S, D).

    npu: torch_npu.npu_fused_infer_attention_score (BNSD layout; S=1 runs the incremental kernel).
    cuda/cpu: scaled_dot_product_attention with enable_gqa=True (FlashAttention-2 on CUDA reads each KV head
    once and swaps the GQA group into the query length when the query length is 1).
    """
    torch = backend.torch
    scale = q.shape[-1] ** -0.5
    if backend.kind == "npu":
        import torch_npu

        return lambda: torch_npu.npu_fused_infer_attention_score(
            q, k, v, num_heads=q.shape[1], num_key_value_heads=k.shape[1], input_layout="BNSD", scale=scale
        )
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if backend.kind == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def flash() -> object:
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                return sdpa(q, k, v, scale=scale, enable_gqa=True)

        try:
            flash()
            return flash
        except RuntimeError:
            backend.notes.append("decode attention: FlashAttention backend refused GQA; SDPA default used")
    return lambda: sdpa(q, k, v, scale=scale, enable_gqa=True)


def gemm_variants(backend: Backend, n: int) -> dict[str, Callable[[], Callable[[], object]]]:
    """Factories of n x n x n GEMM closures per dtype; each factory may raise when unsupported."""
    torch, dev = backend.torch, backend.device
    bf16, fp16 = square_gemm(backend, n, torch.bfloat16), square_gemm(backend, n, torch.float16)
    variants = {"bf16": bf16, "fp16": fp16}
    if backend.kind == "cuda":
        variants["fp8"] = lambda: _cuda_fp8(torch, dev, n)
        variants["int8"] = lambda: _cuda_int8(torch, dev, n)
    elif backend.kind == "npu":  # the SoC's dtypes (fp8 on the 950, no bf16 on the 310P)
        return npu_kernels.gemm_variants(backend, n)
    return variants


def _cuda_fp8(torch: Any, dev: Any, n: int) -> Callable[[], object]:
    a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
    one = torch.ones((), device=dev)
    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def _cuda_int8(torch: Any, dev: Any, n: int) -> Callable[[], object]:
    a = torch.randint(-64, 64, (n, n), device=dev, dtype=torch.int8)
    b = torch.randint(-64, 64, (n, n), device=dev, dtype=torch.int8).t()
    return lambda: torch._int_mm(a, b)
