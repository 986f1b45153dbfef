"""Data shaping for the dashboard (app.py): memory segments, sweep axes, feasibility grids, comparisons.

Pure: no streamlit, no plotly. The formulas stay in memory.py, roofline.py and performance.py; this module
only calls them over arrays and arranges the results into what a chart draws.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dashboard.words import dashboard_message as dashboard_message
from dashboard.words import dashboard_words as dashboard_words
from planner import capacity, csa, inputs, memory, params, units
from planner.deployment import Deployment
from planner.engines import registry
from planner.plan import compose as perf_plan
from planner.results import MemoryBreakdown, Performance, Plan
from planner.schema import Frozen

# Context lengths the TPOT curve and the heatmap sweep: powers of two from 1k (k = 1024 tokens).
MIN_SWEEP_CTX_TOKENS = 1024
BATCH_SWEEP_POINTS = 48


class MemorySegment(Frozen):
    """One slice of the device-memory bar."""

    label: str
    size_bytes: int
    note: str


@dataclasses.dataclass(frozen=True)
class SpeedCurve:
    """Decode speed over a batch axis at one context length (arrays of equal length)."""

    batch: np.ndarray
    decode_step_s: np.ndarray
    per_user_tokens_per_s: np.ndarray
    tokens_per_s: np.ndarray
    # the range of each rate (planner/perf/ranges.py): rate x the band's low and high factors
    per_user_tokens_per_s_low: np.ndarray
    per_user_tokens_per_s_high: np.ndarray
    tokens_per_s_low: np.ndarray
    tokens_per_s_high: np.ndarray


@dataclasses.dataclass(frozen=True)
class FeasibilityGrid:
    """Batch x context grid: does it fit in the KV budget, and the TPOT where it does (NaN elsewhere)."""

    batch: np.ndarray
    ctx_tokens: np.ndarray
    fits: np.ndarray
    tpot_s: np.ndarray
    tpot_s_low: np.ndarray  # the range of tpot_s (perf.ranges): tpot / the band's high and low factors
    tpot_s_high: np.ndarray


def memory_segments(mem: MemoryBreakdown, *, batch: int, held_bytes: int) -> list[MemorySegment]:
    """One device's memory split at `batch` sequences of ctx tokens (one DP group's batch: the plan's
    batch_per_dp_group); the segments sum to the capacity.

    Formula: held = held_bytes (the engine's pool: pages or blocks, state, MindIE's MTP lookahead);
    state = batch * state per sequence; KV = min(held, KV budget) - state; free = KV budget - min(held,
    KV budget). The min is a guard: each engine's batch fits its budget at full length (else the note says
    so).
    """
    state_bytes = batch * mem.state_bytes_per_sequence
    shown_bytes = min(held_bytes, mem.kv_budget_bytes)
    over = "; over the budget at full length" if held_bytes > mem.kv_budget_bytes else ""
    return [
        MemorySegment(label="weights", size_bytes=mem.weights_bytes, note="model weights on this device"),
        MemorySegment(
            label="KV cache", size_bytes=shown_bytes - state_bytes, note=f"{batch} sequences, paged{over}"
        ),
        MemorySegment(
            label="linear-attention state", size_bytes=state_bytes, note=f"{batch} sequences, fixed size"
        ),
        MemorySegment(
            label="activation headroom", size_bytes=mem.activation_bytes, note="largest prefill batch"
        ),
        MemorySegment(label="runtime", size_bytes=mem.runtime_bytes, note="runtime context, comm buffers"),
        MemorySegment(
            label="free (KV budget left)",
            size_bytes=mem.kv_budget_bytes - shown_bytes,
            note="room for more sequences",
        ),
        MemorySegment(label="reserve", size_bytes=mem.reserved_bytes, note="1 - memory fraction, held back"),
    ]


def plan_memory_segments(plan: Plan) -> list[MemorySegment]:
    """memory_segments at the plan's recommended batch (one DP group's): Plan.kv_bytes_at_batch."""
    return memory_segments(plan.memory, batch=plan.batch_per_dp_group, held_bytes=plan.kv_bytes_at_batch)


def kv_fraction_of_capacity(plan: Plan) -> float:
    """Share of one device's memory the KV cache and states take at the plan's recommended batch (one DP
    group's): Plan.kv_bytes_at_batch / capacity, the plan's 30-40 % note's figure."""
    return plan.kv_bytes_at_batch / plan.memory.device_capacity_bytes


def kv_guideline_fraction() -> tuple[float, float]:
    """The seed article's 30-40 % KV share rule of thumb, as (low, high) fractions."""
    return capacity.KV_GUIDELINE_FRACTION


def batch_axis(max_batch: int, *, points: int = BATCH_SWEEP_POINTS) -> np.ndarray:
    """Distinct whole batch sizes from 1 to max_batch, log-spaced (dense where the curve bends)."""
    top = max(int(max_batch), 1)
    return np.unique(np.round(np.geomspace(1, top, num=min(points, top))).astype(np.int64))


def ctx_axis(max_ctx_tokens: int, *, include: int | None = None) -> np.ndarray:
    """Powers of two from 1k up to max_ctx_tokens (and that maximum), plus `include` when given."""
    top = max(int(max_ctx_tokens), MIN_SWEEP_CTX_TOKENS)
    steps = int(np.floor(np.log2(top / MIN_SWEEP_CTX_TOKENS)))
    values = {MIN_SWEEP_CTX_TOKENS * 2**k for k in range(steps + 1)} | {top}
    if include is not None:
        values.add(int(include))
    return np.array(sorted(values), dtype=np.int64)


def decode_step_grid_s(dep: Deployment, *, batch: np.ndarray, ctx_tokens: np.ndarray) -> np.ndarray:
    """Decode step seconds over a batch x context grid, shape (len(batch), len(ctx_tokens)), vectorised."""
    from planner.perf import roofline

    batch_2d, ctx_2d = np.meshgrid(batch.astype(np.int64), ctx_tokens.astype(np.int64), indexing="ij")
    step = roofline.decode_step_s_grid(dep, batch=batch_2d, ctx_tokens=ctx_2d)
    return np.broadcast_to(np.asarray(step, dtype=float), batch_2d.shape)


def short_tokens(tokens: int) -> str:
    """A token count short enough for a metric box: "32k" when a whole number of k (1024), else digits."""
    whole_k, rest = divmod(int(tokens), units.TOKENS_PER_K)
    return f"{whole_k}k" if whole_k and not rest else f"{tokens:,}"


def tpot_s(perf: Performance) -> float:
    """Time per output token of one user (MTP included): the plan's own Performance.tpot_s (mtp.tpot_s)."""
    return perf.tpot_s


def per_user_tokens_per_s_at(tpot_s: float) -> float:
    """The per-user decode rate a TPOT target means: one token every tpot_s seconds."""
    return 1.0 / tpot_s


def speed_curve(dep: Deployment, *, batch: np.ndarray, ctx_tokens: int) -> SpeedCurve:
    """Per-user and aggregate tokens/s over a batch axis at ctx_tokens (one vectorised roofline call)."""
    from planner.perf import mtp
    from planner.perf import ranges as speed_ranges

    step_s = decode_step_grid_s(dep, batch=batch, ctx_tokens=np.array([ctx_tokens]))[:, 0]
    per_user = 1.0 / mtp.tpot_s(step_s, tokens_per_step=mtp.tokens_per_step(dep))
    factors = speed_ranges.factor_grid(dep, batch=batch.tolist(), ctx_tokens=[ctx_tokens])
    low, high = (f[:, 0] for f in factors)
    rates = {"per_user_tokens_per_s": per_user, "tokens_per_s": per_user * batch}
    ranges = {
        f"{name}_{end}": rate * f for name, rate in rates.items() for end, f in (("low", low), ("high", high))
    }
    return SpeedCurve(batch=batch, decode_step_s=step_s, **rates, **ranges)


def feasibility_grid(dep: Deployment, *, batch: np.ndarray, ctx_tokens: np.ndarray) -> FeasibilityGrid:
    """Which (batch, ctx) pairs fit the KV budget, and their TPOT
    (mtp.tpot_s: step / tokens per step; NaN where not)."""
    from planner.perf import mtp
    from planner.perf import ranges as speed_ranges
    from planner.serving import sweep

    fits = sweep.fits_memory_grid(
        dep, batch=batch.astype(np.int64)[:, None], ctx_tokens=ctx_tokens.astype(np.int64)[None, :]
    )
    step_s = decode_step_grid_s(dep, batch=batch, ctx_tokens=ctx_tokens)
    tpot_s = np.where(fits, mtp.tpot_s(step_s, tokens_per_step=mtp.tokens_per_step(dep)), np.nan)
    low, high = speed_ranges.factor_grid(dep, batch=batch.tolist(), ctx_tokens=ctx_tokens.tolist())
    return FeasibilityGrid(
        batch=batch,
        ctx_tokens=ctx_tokens,
        fits=fits,
        tpot_s=tpot_s,
        tpot_s_low=tpot_s / high,
        tpot_s_high=tpot_s / low,
    )


def fit_warnings(dep: Deployment, plan: Plan) -> list[str]:
    """What a --from-bench profile warns about at this plan (fitted.profile_warnings at its batch)."""
    from planner.perf import fitted

    batch = plan.performance.batch if plan.performance else plan.recommendation.max_batch_size
    return fitted.profile_warnings(dep, batch=batch, ctx_tokens=plan.ctx_tokens)


def max_batch_at(dep: Deployment, mem: MemoryBreakdown) -> int:
    """Most sequences of ctx tokens that fit the KV budget (capacity.max_batch_size)."""
    return capacity.max_batch_size(dep, mem)


def plan_for(req: inputs.PlanRequest, *, prompt_tokens: int | None = None) -> tuple[Deployment, Plan]:
    """Deployment and plan (with speed and the load knee, as `kvplan` plans it) for one request."""
    dep = inputs.to_deployment(req)
    plan = perf_plan.with_load_knee(perf_plan.build_plan(dep, prompt_tokens=prompt_tokens), dep)
    return dep, plan


def powers_of_two_upto(top: int) -> np.ndarray:
    """1, 2, 4, ... up to top (axis ticks)."""
    return 2 ** np.arange(int(np.floor(np.log2(max(int(top), 1)))) + 1, dtype=np.int64)


def heatmap_batch_axis(max_batch: int, *, include: int | None = None) -> np.ndarray:
    """Powers of two from 1 up to max_batch (and max_batch itself), plus `include` when given."""
    top = max(int(max_batch), 1)
    values = {2**k for k in range(int(np.floor(np.log2(top))) + 1)} | {top}
    if include is not None:
        values.add(int(include))
    return np.array(sorted(values), dtype=np.int64)


def heatmap_axes(dep: Deployment, mem: MemoryBreakdown, *, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(batch axis, ctx axis) of the feasibility heatmap: batches up to what fits at the shortest context."""
    ctx = ctx_axis(dep.model.max_position_embeddings, include=dep.ctx_tokens)
    most = int(capacity.max_batch_grid(dep, mem, ctx_tokens=ctx[:1].astype(np.int64))[0])
    return heatmap_batch_axis(most, include=batch), ctx


class LedgerLine(Frozen):
    """One line of the memory arithmetic: the formula, the same with numbers, and the result."""

    quantity: str
    formula: str
    substituted: str
    result: str


def kv_per_token_line(dep: Deployment, mem: MemoryBreakdown) -> LedgerLine:
    """The KV bytes-per-token formula of this card (GQA/MHA, MLA latent, with a sparse-attention index key
    where the card keeps one, or DeepSeek-V4's compressed records) with its numbers."""
    card, bits = dep.model, dep.kv_dtype.bits
    layers = card.full_attention_layers + (1 if dep.include_mtp else 0)
    index = params.indexer_key_bytes_per_layer(card, kv_dtype=dep.kv_dtype)
    if card.attention_traits.compressed_kv:
        formula, substituted = compressed_kv_words(dep)
    elif card.attention_traits.latent_kv:
        formula = "L_kv x ((kv_lora_rank + qk_rope_head_dim) x b / 8" + (" + x_index)" if index else ")")
        substituted = f"{layers} x (({card.kv_lora_rank} + {card.qk_rope_head_dim}) x {bits} / 8" + (
            f" + {index})" if index else ")"
        )
    else:
        heads = params.kv_heads_per_rank(card, tp=dep.tp)
        formula = "2 x L_kv x H_kv per rank x head_dim x b / 8" + (" + L_sparse x x_index" if index else "")
        substituted = f"2 x {layers} x {heads} x {card.head_dim} x {bits} / 8" + (
            f" + {card.sparse_attention_layers} x {index}" if index else ""
        )
    return LedgerLine(
        quantity="KV per token",
        formula=formula,
        substituted=substituted,
        result=units.fmt_bytes(mem.kv_bytes_per_token),
    )


def compressed_kv_words(dep: Deployment) -> tuple[str, str]:
    """DeepSeek-V4's bytes per token (csa.cache_bytes_per_token): per compression ratio r > 1, n_r layers
    add one record R every r tokens, and the indexed ratio's layers an index record X too."""
    card = dep.model
    record, index = csa.record_bytes(card, kv_dtype=dep.kv_dtype), csa.index_record_bytes(card)
    parts = [
        f"{n} x ({record}{f' + {index}' if r == csa.CSA_INDEXED_RATIO else ''}) / {r}"
        for r, n in sorted(csa.ratio_layers(card, mtp=dep.include_mtp).items())
        if r > 1
    ]
    return "sum over ratios r > 1 of n_r x (R [+ X at r = 4]) / r", " + ".join(parts)


def memory_ledger(dep: Deployment, plan: Plan) -> list[LedgerLine]:
    """The memory plan written out: each quantity's formula, the numbers put in, and the planner's result."""
    mem, gib = plan.memory, units.fmt_gib
    paged = memory.paged_tokens(dep.ctx_tokens, block_size_tokens=dep.block_size_tokens)
    return [
        LedgerLine(
            quantity="usable",
            formula=f"capacity x {registry.memory_fraction_name(dep.engine)}",
            substituted=f"{gib(mem.device_capacity_bytes)} x {dep.memory_fraction:g}",
            result=gib(mem.usable_bytes),
        ),
        LedgerLine(
            quantity="KV budget",
            formula="usable - weights - activation peak - runtime",
            substituted=f"{gib(mem.usable_bytes)} - {gib(mem.weights_bytes)} - {gib(mem.activation_bytes)} - "
            f"{gib(mem.runtime_bytes)}",
            result=gib(mem.kv_budget_bytes),
        ),
        kv_per_token_line(dep, mem),
        LedgerLine(
            quantity="per sequence",
            formula="ceil(ctx / block) x block x KV per token + state",
            substituted=f"{paged} x {units.fmt_bytes(mem.kv_bytes_per_token)} + "
            f"{units.fmt_bytes(mem.state_bytes_per_sequence)}",
            result=units.fmt_bytes(mem.kv_bytes_per_sequence),
        ),
        *pool_ledger(dep, plan),
    ]


def pool_ledger(dep: Deployment, plan: Plan) -> list[LedgerLine]:
    """The ledger's lines from the engine's pool: one sequence in it (the plan's KV row), the batch it holds
    and the KV share of the card at the recommended batch (one DP group's)."""
    mem, gib, batch = plan.memory, units.fmt_gib, plan.batch_per_dp_group
    pooled = units.fmt_bytes(plan.pool_sequence_bytes)
    engine_block = plan.engine_block_size_tokens or dep.block_size_tokens
    return [
        LedgerLine(
            quantity="in the engine's pool",
            formula=f"{dep.engine}'s whole blocks for one sequence (its state, the drafts' lookahead)",
            substituted=f"{units.fmt_bytes(mem.kv_bytes_per_sequence)} in blocks of {engine_block} tokens",
            result=pooled,
        ),
        LedgerLine(
            quantity="max batch",
            formula=f"{dep.engine}'s block accounting, at most floor(KV budget / one sequence in its pool)",
            substituted=f"floor({gib(mem.kv_budget_bytes)} / {pooled})",
            result=str(max_batch_at(dep, mem)),
        ),
        LedgerLine(
            quantity="KV share",
            formula=f"batch x one sequence in {dep.engine}'s pool (whole blocks, state) / capacity",
            substituted=f"{batch} x {pooled} / {gib(mem.device_capacity_bytes)}",
            result=units.fmt_fraction(kv_fraction_of_capacity(plan)),
        ),
    ]


def mindie_config_text(dep: Deployment, *, weights_path: str) -> tuple[str, list[str]]:
    """MindIE config.json text and notes for the deployment, as `kvplan mindie` builds them.

    As the CLI does, the plan is re-sized with MindIE's lengths (maxPrefillTokens drives the activation peak),
    with MindIE's block accounting whatever engine the page shows.
    """
    from planner.engines.mindie import config as mindie
    from planner.engines.mindie import rules as mindie_rules

    options = mindie.MindieOptions(
        weights_path=weights_path,
        model_name=registry.served_model_name(dep.model_alias or dep.model.id, card_id=dep.model.id),
        mtp=dep.mtp_tokens,
        trust_remote_code=dep.model.trust_remote_code,
    )
    sized, lengths = registry.sized_deployment(dep.model_copy(update={"engine": "mindie"}), options=options)
    plan = perf_plan.build_plan(sized, prompt_tokens=lengths.max_input_tokens)
    result = mindie.mindie_config(
        plan, base=mindie_rules.load_base(options.mindie_version), lengths=lengths, options=options
    )
    return mindie_rules.render_config(result.config), list(result.notes)


def vllm_command_text(dep: Deployment, *, weights_path: str) -> tuple[str, list[str]]:
    """The `vllm serve` command (vllm-ascend on an Ascend card) and its start-up checks for the deployment,
    as `kvplan vllm` builds them: re-sized with vLLM's lengths and pool, at the page's memory share, whatever
    engine the page shows; the checkpoint is the path typed on the page."""
    from planner.engines import common
    from planner.engines.vllm import args as vllm_args

    as_vllm = dep.model_copy(update={"engine": "vllm"})
    registry.check_draft_model(as_vllm)
    options = common.with_drafts(
        common.ServingOptions(
            weights_path=weights_path,
            model_name=registry.served_model_name(dep.model_alias or dep.model.id, card_id=dep.model.id),
        ),
        as_vllm,
    )
    sized, lengths = registry.sized_deployment(as_vllm, options=options)
    plan = perf_plan.build_plan(sized, prompt_tokens=lengths.max_input_tokens)
    result = vllm_args.vllm_args(plan, sized, lengths=lengths, options=options)
    return vllm_args.render_command(result), [*vllm_args.summary_lines(result), *result.notes]
