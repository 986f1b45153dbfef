"""Roofline step times: per-op ledgers for a decode step and a prefill, and a vectorised decode grid.

Time of one op = max(bytes / effective bandwidth, FLOP / effective peak of its dtype) + matmul calls *
matmul latency + other kernels * kernel overhead (the engine's kernel counts, planner/perf/kernels.py); decode
attention reads the KV cache at the measured attention table's rate when the card has one
(planner/perf/attention.py), else at kv_read_bandwidth_fraction; all-reduces cost latency + 2 (tp - 1) / tp *
bytes / effective link bandwidth; every pass pays the step overhead once. Effective = datasheet * the card's
coefficients (measured ones when calibrated). Bytes and FLOP per op come from planner/perf/opcost.py.
"""

from typing import Literal

import numpy as np
import numpy.typing as npt

from planner import layout
from planner.arrays import FloatArray
from planner.deployment import Deployment
from planner.engines import registry
from planner.perf import links, opcost, opgeometry, prefill
from planner.perf.attention import attention_bytes_per_s
from planner.perf.coefficients import is_calibrated as is_calibrated  # re-exported (callers)
from planner.perf.coefficients import request_overhead_s as request_overhead_s  # re-exported (callers)
from planner.perf.kernels import EngineKernels
from planner.perf.opgeometry import Geometry
from planner.perf.prefill import prefill_chunks as prefill_chunks  # re-exported (tests, callers)
from planner.perf.prefill import prefill_step as prefill_step  # re-exported (closed_loop)
from planner.perf.prefix import prefix_hit_tokens
from planner.perf.rates import Rates as Rates  # re-exported (callers)
from planner.perf.rates import kernel_overhead_table as kernel_overhead_table  # re-exported (callers)
from planner.perf.rates import rates as rates  # re-exported (callers)
from planner.perf.rates import resource_bytes_per_s
from planner.perf.rates import small_kernel_s as small_kernel_s  # re-exported (callers)
from planner.perf.terms import Step, Term
from planner.schema import Frozen

Bound = Literal["memory", "compute", "overhead", "interconnect"]


class Op(Frozen):
    """One ledger row: an op over `layers` layers (or passes) on one rank."""

    name: str
    layers: int
    kernels: int
    bytes: float  # over HBM, or over the interconnect for tp.allreduce
    flop: float
    compute_dtype: str
    transfer_s: float
    compute_s: float
    overhead_s: float
    time_s: float
    bound: Bound


class Ledger(Frozen):
    """Every op of a decode step (or of a whole chunked prefill) with totals."""

    phase: Literal["decode", "prefill"]
    batch: int
    ctx_tokens: int  # decode: tokens each sequence holds; prefill: the prompt length
    query_tokens: int  # tokens processed: batch * (1 + draft) per decode step; the prompt in prefill
    chunks: int
    ops: list[Op]
    hbm_bytes: float
    link_bytes: float
    flop: float
    time_s: float
    calibrated: bool


def engine_kernels(dep: Deployment) -> EngineKernels:
    """The kernel facts of dep's engine that the step model needs, from its room (the engine registry)."""
    return EngineKernels(
        fused=registry.fused_kernels(dep.engine),
        state_passes=registry.state_passes(dep.engine),
        gathers_moe_outputs=registry.gathers_moe_outputs(dep.engine, ep=dep.ep),
    )


def geometry(dep: Deployment) -> Geometry:
    """Per-rank geometry of dep with its engine's kernel facts (the op terms' one builder)."""
    return opgeometry.geometry(dep, kernels=engine_kernels(dep))


def term_seconds(
    term: Term, *, rate: Rates, tokens: FloatArray | float = 1.0
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(transfer_s, compute_s, overhead_s) of one term.

    Formula:
        transfer_s = bytes / bw          bw = hbm, kv, experts (grouped GEMM) or (all-reduce) link rate
                     all-reduce: 2 (tp - 1) / tp * bytes / link   (ring: reduce-scatter + all-gather)
                     decode attention with a measured table: cache reads at min(table rate(rows, ctx),
                     datasheet), the new tokens' K/V writes at the HBM rate
        compute_s  = flop / (flop_per_s[compute_dtype] * compute_rate_fraction)   (the term's measured
                     prefill rate when it has one)
        overhead_s = m * matmul_latency + (k - m - a) * kernel_overhead + collectives * allreduce_latency
                     matmul_latency = grouped_matmul_latency for routed experts (grouped GEMMs)
                     k kernels, m of them matmul calls, a attention kernels timed by the table (else 0)
    """
    timed_by_table, collective_latency_s = 0, rate.allreduce_latency_s
    if term.resource in links.COLLECTIVE_RESOURCES:
        transfer, collective_latency_s = links.collective_seconds(rate.link_rates, term, tp=rate.tp)
    elif term.attention is not None and rate.attention is not None:
        table = attention_bytes_per_s(
            rate.attention, rows=term.attention.rows, ctx_tokens=term.attention.ctx_tokens
        )
        read = term.attention.read_bytes
        cache_read_s = read / np.minimum(table, rate.peak_bytes_per_s)
        transfer = cache_read_s + (term.bytes - read) / rate.hbm_bytes_per_s
        timed_by_table = term.attention.kernels
    else:
        transfer = term.bytes / resource_bytes_per_s(rate, resource=term.resource)
    dtype_rate = rate.flop_per_s[term.compute_dtype] * term.compute_rate_fraction
    peak = dtype_rate if term.flop_per_s is None else term.flop_per_s
    compute = term.flop / peak
    other_kernels = term.kernels - term.matmuls - timed_by_table
    matmul_latency_s = rate.grouped_matmul_latency_s if term.resource == "experts" else rate.matmul_latency_s
    overhead = (
        term.matmuls * matmul_latency_s
        + other_kernels * small_kernel_s(rate, tokens=tokens)
        + term.collectives * collective_latency_s
    )
    return transfer, compute, np.broadcast_to(overhead, np.broadcast(transfer, overhead).shape) + 0.0


def term_time_s(term: Term, *, rate: Rates, tokens: FloatArray | float = 1.0) -> FloatArray:
    """Formula: time_s = max(transfer_s, compute_s) + overhead_s."""
    transfer, compute, overhead = term_seconds(term, rate=rate, tokens=tokens)
    return np.maximum(transfer, compute) + overhead


def decode_step(dep: Deployment, *, batch: FloatArray, ctx_tokens: FloatArray) -> Step:
    """The pass of one decode step: each of `batch` sequences holds `ctx_tokens` and verifies 1 + k tokens.

    Formula: q = 1 + k (k = dep.speculative_tokens: MTP head or draft model, 0 when off); tokens = batch * q;
    cached = ceil(ctx / block) * block;
    attended = ctx + (q + 1) / 2; logits rows = tokens; the drafts (draft_passes); q state snapshots
    written per sequence (opcost.gdn_update_term).
    """
    draft = dep.speculative_tokens
    q = 1 + draft
    block = dep.block_size_tokens
    batch = layout.pipeline_microbatch(batch, pp=dep.pp)  # one in-flight microbatch passes every stage
    tokens = batch * q
    runs, draft_tokens, draft_logits = draft_passes(dep, batch=batch)
    return Step(
        tokens=tokens,
        sequences=batch,
        cached_tokens=np.ceil(ctx_tokens / block) * block,
        attended_tokens=ctx_tokens + (q + 1) / 2.0,
        logits_tokens=tokens,
        draft_runs=runs,
        draft_tokens=draft_tokens,
        draft_logits=draft_logits,
        state_writes=q,
    )


def draft_passes(dep: Deployment, *, batch: FloatArray) -> tuple[int, FloatArray, FloatArray]:
    """(passes r, tokens per pass m, lm_head rows per pass l) of the drafter in one decode step of k drafts.

    MTP and eagle3 draft autoregressively: r = k sequential passes of m = batch tokens, l = batch rows
    (vllm-ascend vllm_ascend/spec_decode/llm_base_proposer.py @67b1ac5e7a: `_run_merged_draft` runs the
    model once, lines 1067-1100, then `for draft_index in range(self.num_speculative_tokens - 1)` once per
    further draft, lines 1246-1311; upstream vllm/v1/spec_decode/eagle.py @008603a3 `EagleProposer.propose`:
    one model call over every scheduled target token, then `for token_index in
    range(self.num_speculative_tokens - 1)` calls over `batch_size` tokens, each with compute_logits).
    The first of those passes reads every verified position (batch * (1 + k) tokens) in the engine; it is
    costed at `batch` tokens like the others, which the small draft layer's weight stream dominates.
    dflash drafts in parallel: r = 1 pass of m = batch * (1 + k) query tokens (the bonus token and k masks,
    non-causal), l = batch * k rows (vllm-ascend dflash_proposer.py @2cd683a396, set_inputs_first_pass:
    num_query_total = batch_size * (1 + num_speculative_tokens), cad.causal = False; the proposer returns
    after that one pass, llm_base_proposer.py's `if self.num_speculative_tokens == 1 or
    self.parallel_drafting` exit).
    """
    draft = dep.speculative_tokens
    if dep.draft_method == "dflash":
        return 1, batch * (1 + draft), batch * draft
    return draft, batch, batch


def decode_step_s_grid(dep: Deployment, *, batch: npt.ArrayLike, ctx_tokens: npt.ArrayLike) -> FloatArray:
    """Decode step seconds over broadcast arrays of batch and context (the sweep and dashboard path).

    Formula: step_s = sum over ops of term_time_s + step_overhead_s + batch * sequence_overhead_s
    """
    batch_arr = np.asarray(batch, dtype=np.float64)
    ctx_arr = np.asarray(ctx_tokens, dtype=np.float64)
    rate = rates(dep)
    step = decode_step(dep, batch=batch_arr, ctx_tokens=ctx_arr)
    fixed = rate.step_overhead_s + batch_arr * rate.sequence_overhead_s
    total = np.broadcast_to(fixed, np.broadcast_shapes(batch_arr.shape, ctx_arr.shape)) + 0.0
    for term in opcost.step_terms(geometry(dep), step):
        total = total + term_time_s(term, rate=rate, tokens=step.tokens)
    return total


def decode_step_s(dep: Deployment, *, batch: int, ctx_tokens: int) -> float:
    """Seconds of one decode step (TPOT without speculation) at `batch` sequences of `ctx_tokens` each."""
    return float(decode_step_s_grid(dep, batch=batch, ctx_tokens=ctx_tokens))


def bound_of(*, transfer_s: float, compute_s: float, overhead_s: float, resource: str) -> Bound:
    """Which of the three time components is largest ("interconnect" for a link-bound all-reduce)."""
    if overhead_s > max(transfer_s, compute_s):
        return "overhead"
    if compute_s > transfer_s:
        return "compute"
    return "interconnect" if resource == "link" else "memory"


def ledger_op(term: Term, *, rate: Rates, chunks: int, tokens: FloatArray) -> Op:
    """Sum one term over the passes (prefill chunks, or the single decode step) into a ledger row."""
    transfer, compute, overhead = term_seconds(term, rate=rate, tokens=tokens)
    parts = zip(("transfer_s", "compute_s", "overhead_s"), (transfer, compute, overhead), strict=True)
    seconds = {name: float(np.sum(part)) for name, part in parts}
    return Op(
        name=term.name,
        layers=term.layers,
        kernels=term.kernels * chunks,
        bytes=float(np.sum(term.bytes)),
        flop=float(np.sum(term.flop)),
        compute_dtype=term.compute_dtype,
        **seconds,
        time_s=float(np.sum(np.maximum(transfer, compute) + overhead)),
        bound=bound_of(**seconds, resource=term.resource),
    )


def overhead_op(name: str, seconds: float) -> Op:
    """A ledger row of pure overhead (no bytes, no FLOP)."""
    return Op(
        name=name,
        layers=0,
        kernels=0,
        bytes=0.0,
        flop=0.0,
        compute_dtype="-",
        transfer_s=0.0,
        compute_s=0.0,
        overhead_s=seconds,
        time_s=seconds,
        bound="overhead",
    )


def step_overhead_op(rate: Rates, *, passes: int, sequences: float = 0.0, prefill: bool = False) -> Op:
    """The fixed per-pass cost (sampling, scheduling, host sync; a prefill pass's own on top) and the
    per-sequence cost.

    Formula: passes * (step_overhead_s [+ prefill_pass_overhead_s]) + sequences * sequence_overhead_s
    """
    per_pass = rate.step_overhead_s + (rate.prefill_pass_overhead_s if prefill else 0.0)
    return overhead_op("step.overhead", passes * per_pass + sequences * rate.sequence_overhead_s)


def host_wait_op(terms: list[Term], *, rate: Rates, step: Step, floor_s: FloatArray) -> Op:
    """Time the engine's eager launches run longer than the device work, summed over the passes.

    Formula: wait = sum over passes of max(0, floor_s - (step_overhead_s + sum of term_time_s)).
    """
    device = rate.step_overhead_s + sum(term_time_s(t, rate=rate, tokens=step.tokens) for t in terms)
    return overhead_op("host.wait", float(np.sum(np.maximum(floor_s - device, 0.0))))


def assemble_ledger(
    dep: Deployment,
    *,
    step: Step,
    chunks: int,
    phase: Literal["decode", "prefill"],
    lengths: tuple[int, int, int],
) -> Ledger:
    """Build a Ledger from a (possibly multi-chunk) pass; lengths = (batch, ctx_tokens, query_tokens)."""
    rate = rates(dep)
    geo = geometry(dep)
    terms = opcost.step_terms(geo, step)
    if phase == "prefill":
        terms = prefill.measured_prefill_terms(dep, geo, terms, tokens=step.tokens)
    ops = [ledger_op(t, rate=rate, chunks=chunks, tokens=step.tokens) for t in terms]
    sequences = float(np.sum(step.sequences))
    ops.append(step_overhead_op(rate, passes=chunks, sequences=sequences, prefill=phase == "prefill"))
    floor = prefill.host_floor_s(dep, geo, tokens=step.tokens) if phase == "prefill" else None
    if floor is not None:
        ops.append(host_wait_op(terms, rate=rate, step=step, floor_s=floor))
    link = [t.name for t in terms if t.resource in links.COLLECTIVE_RESOURCES]
    return Ledger(
        phase=phase,
        batch=lengths[0],
        ctx_tokens=lengths[1],
        query_tokens=lengths[2],
        chunks=chunks,
        ops=ops,
        hbm_bytes=sum(o.bytes for o in ops if o.name not in link),
        link_bytes=sum(o.bytes for o in ops if o.name in link),
        flop=sum(o.flop for o in ops),
        time_s=sum(o.time_s for o in ops),
        calibrated=is_calibrated(dep),
    )


def decode_ledger(dep: Deployment, *, batch: int, ctx_tokens: int) -> Ledger:
    """Per-op ledger of one decode step; its time_s equals decode_step_s (same formulas)."""
    step = decode_step(dep, batch=np.asarray(float(batch)), ctx_tokens=np.asarray(float(ctx_tokens)))
    return assemble_ledger(
        dep, step=step, chunks=1, phase="decode", lengths=(batch, ctx_tokens, int(step.tokens))
    )


def cached_prompt_tokens(dep: Deployment, *, prompt_tokens: int) -> int:
    """Tokens of one prompt the deployment's prefix cache already holds, so prefill computes only the rest.

    Formula: h = prefix.prefix_hit_tokens(I, f, B): f = dep.prefix_cached_fraction, B = the engine's cache
    block (registry.prefix_cache_block_tokens); whole blocks only, at most I - 1 tokens. 0 when f = 0.
    The one place every prefill (closed loop, open loop, fit, load knee) takes its cached share from.
    """
    if dep.prefix_cached_fraction <= 0:
        return 0
    block_tokens = registry.prefix_cache_block_tokens(dep)
    fraction = dep.prefix_cached_fraction
    return prefix_hit_tokens(prompt_tokens, cached_fraction=fraction, block_tokens=block_tokens)


def uncached_prompt_tokens(dep: Deployment, *, prompt_tokens: int) -> int:
    """Formula: I - h (cached_prompt_tokens): the prompt tokens a prefill computes (and counts against
    max_prefill_tokens, vLLM's token budget counting only a request's new tokens)."""
    return prompt_tokens - cached_prompt_tokens(dep, prompt_tokens=prompt_tokens)


class PromptAccounting:
    """What a serving Timer (planner/serving/estimate.py) reads about prompts off its deployment `dep`: the
    tokens a prefill computes and the engine's cap on prompts per pass."""

    dep: Deployment

    def uncached_prompt_tokens(self, *, prompt_tokens: int) -> int:
        return uncached_prompt_tokens(self.dep, prompt_tokens=prompt_tokens)

    @property
    def max_prompts_per_pass(self) -> int | None:
        return registry.max_prompts_per_pass(self.dep.engine)


def prefill_ledger(dep: Deployment, *, prompt_tokens: int) -> Ledger:
    """Per-op ledger of the whole chunked prefill of one prompt (ops summed over chunks), its cached prefix
    (cached_prompt_tokens) read, not computed."""
    cached = cached_prompt_tokens(dep, prompt_tokens=prompt_tokens)
    step = prefill_step(dep, prompt_tokens=prompt_tokens, cached_tokens=cached)
    chunks = int(step.tokens.size)
    return assemble_ledger(
        dep, step=step, chunks=chunks, phase="prefill", lengths=(1, prompt_tokens, prompt_tokens - cached)
    )


def prefill_pass_s_grid(dep: Deployment, *, step: Step) -> FloatArray:
    """Seconds of each pass of a prefill Step, one array element per pass (a chunk of a prompt, a batch of
    prompts, a grid point): the one implementation of "seconds of one prefill pass" (the load knee and the
    simulator's step table read it; assemble_ledger itemises the same sum).

    Formula per pass: device = step_overhead_s + sum over the measured prefill terms of term_time_s;
    pass_s = device + prefill_pass_overhead_s + sequences * sequence_overhead_s + max(host floor - device, 0)
    """
    rate, geo = rates(dep), geometry(dep)
    terms = prefill.measured_prefill_terms(dep, geo, opcost.step_terms(geo, step), tokens=step.tokens)
    device = rate.step_overhead_s + sum(term_time_s(t, rate=rate, tokens=step.tokens) for t in terms)
    floor = prefill.host_floor_s(dep, geo, tokens=step.tokens)
    wait = 0.0 if floor is None else np.maximum(floor - device, 0.0)
    fixed_s = rate.prefill_pass_overhead_s + step.sequences * rate.sequence_overhead_s
    return np.asarray(device + fixed_s + wait, dtype=np.float64)


def batched_prefill_s_grid(dep: Deployment, *, prompts: FloatArray, prompt_tokens: int) -> FloatArray:
    """Seconds of one prefill pass of n prompts of I tokens, per element n >= 2 of `prompts` (one prompt alone
    is ttft_s: chunked when longer than max_prefill_tokens). The closed loop's pass reads it at one n, the
    load knee at every n.

    Formula: prefill_pass_s_grid of prefill.batched_prefill_step, the prompts' prefix-cached share read, not
    computed (cached_prompt_tokens).
    """
    cached = cached_prompt_tokens(dep, prompt_tokens=prompt_tokens)
    step = prefill.batched_prefill_step(
        dep, prompts=prompts, prompt_tokens=prompt_tokens, cached_tokens=cached
    )
    return prefill_pass_s_grid(dep, step=step)


def ttft_s(dep: Deployment, *, prompt_tokens: int) -> float:
    """Time to first token of one prompt on an idle engine: the chunked prefill (it ends with the logits).

    Formula: sum over chunks of (sum over ops of term_time_s + step_overhead_s). Queueing behind other
    requests' decode steps is added by serving.py, not here.
    """
    return prefill_ledger(dep, prompt_tokens=prompt_tokens).time_s
