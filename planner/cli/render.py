"""Human-readable rendering of the plan for the CLI (rich tables, the shared console). No formulas; the
catalogue listings (`kvplan models`, `kvplan cards`) are planner/cli/listings.py."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from planner import layout, memory, units
from planner.deployment import Deployment
from planner.engines import registry
from planner.results import LoadKnee, Performance, Plan, SloAnswer, SpeedRange
from planner.schema import HardwareProfile

if TYPE_CHECKING:
    from planner.perf.roofline import Ledger

# Wide enough for the tables when output is piped (rich would otherwise wrap at 80 columns). No emoji codes
# (":name:" in a model id or a note stays as typed; rich's emoji table is not loaded).
_probe = Console()
console = Console(highlight=False, emoji=False, width=None if _probe.is_terminal else 140)


PART_LABELS = {
    "moe_experts": "routed experts + router",
    "moe_shared": "shared experts",
    "mlp": "dense MLP",
    "linear_attention": "linear attention",
    "lm_head": "lm_head",
}


def _weight_part_rows(result: Plan) -> list[tuple[str, int, str]]:
    """Itemised per-rank weight rows of a layout plan, largest part first (none without a layout)."""
    report = result.layout
    if report is None:
        return []
    return [
        (f"  {PART_LABELS.get(part, part)}", size, "weights of this rank")
        for part, size in sorted(report.weights_by_part_bytes.items(), key=lambda item: -item[1])
    ]


def _runtime_rows(result: Plan, dep: Deployment) -> list[tuple[str, int, str]]:
    """The runtime row, then the buffers the layout adds to it (MC2 window, ...), each a part of it."""
    buffers = result.layout.comm_buffers_bytes if result.layout else {}
    room = registry.room(dep.engine)
    notes = {name: room.LAYOUT_BUFFER_NOTES.get(name, "part of runtime (layout)") for name in buffers}
    note = f"runtime context, comm buffers ({room.RUNTIME_SOURCE})"
    if any(name not in room.LAYOUT_BUFFER_NOTES for name in buffers):
        note = f"runtime context ({room.RUNTIME_SOURCE}) + the layout's buffers marked so"
    rows = [("runtime", result.memory.runtime_bytes, note)]
    return rows + [(f"  {name}", size, notes[name]) for name, size in buffers.items()]


def _memory_table(result: Plan, dep: Deployment) -> Table:
    mem = result.memory
    group_batch = result.batch_per_dp_group
    kv_at_batch = result.kv_bytes_at_batch  # the engine's pool (pages, state, drafts' lookahead)
    parallel = _layout_text(result)
    table = Table(
        "item", Column("size", justify="right"), "note", title="Memory per device", header_style="bold"
    )
    fraction_name = registry.memory_fraction_name(dep.engine)
    capacity_note = f"x {result.memory_fraction} {fraction_name} = {units.fmt_gib(mem.usable_bytes)} usable"
    rows = [
        ("device capacity", mem.device_capacity_bytes, capacity_note),
        ("weights", mem.weights_bytes, f"{result.dtype}, {parallel}"),
        *_weight_part_rows(result),
        (
            "activation peak",
            mem.activation_bytes,
            f"prefill of {dep.max_prefill_tokens} tokens (--max-prefill-tokens)",
        ),
        *_runtime_rows(result, dep),
        (
            "KV budget",
            mem.kv_budget_bytes,
            f"{units.fmt_fraction(mem.kv_budget_fraction_of_capacity)} of capacity",
        ),
        (
            "KV at recommended batch",
            kv_at_batch,
            f"{group_batch} x {units.fmt_bytes(result.pool_sequence_bytes)} per sequence"
            + (f" (one of {result.layout.dp} DP groups)" if result.layout and result.layout.dp > 1 else "")
            + ("; over the budget at full length" if kv_at_batch > mem.kv_budget_bytes else ""),
        ),
        ("held back", mem.reserved_bytes, "1 - memory fraction"),
    ]
    for name, size, note in rows:
        table.add_row(name, units.fmt_gib(size), note)
    return table


def _layout_text(result: Plan) -> str:
    return f"tp={result.tp}" if result.layout is None else layout.describe(result.layout)


def card_memory_text(hw: HardwareProfile) -> str:
    """The card's memory as the plan assumed it: nominal, and the runtime-visible total it sized from."""
    nominal = units.fmt_gib(hw.memory_capacity_bytes)
    if hw.variants and hw.variant is None:
        return f"{nominal}, a custom size (not a listed variant)"
    if hw.visible_memory_bytes is None:
        return f"{nominal} nominal; runtime-visible total not known, planned on nominal"
    return f"{nominal} nominal, {units.fmt_gib(hw.visible_memory_bytes)} runtime-visible (planned on it)"


def _header(result: Plan, dep: Deployment) -> str:
    alias = f" ('{result.model_alias}' is an alias of {result.model})" if result.model_alias else ""
    calibrated = "calibrated" if dep.hardware.is_calibrated and dep.calibrated else "uncalibrated"
    return (
        f"[bold]{result.model}[/bold]{alias} on [bold]{dep.hardware.variant_id}[/bold] "
        f"({card_memory_text(dep.hardware)}, "
        f"{dep.hardware.memory_bandwidth_gb_per_s:g} GB/s, "
        f"{calibrated}) | weights {result.dtype}, KV {result.kv_dtype}, {_layout_text(result)}, "
        f"ctx {units.fmt_tokens(result.ctx_tokens)}"
    )


def engine_lines(result: Plan, dep: Deployment, *, flags: str) -> list[str]:
    """planner.plan.payload.engine_config as the plan's text prints it: `title: name value, ...` and
    `Next: command`."""
    from planner.plan.payload import engine_config

    config = engine_config(result, dep, flags=flags)
    if config is None:
        return []
    return [
        f"{config['title']}: " + ", ".join(f"{name} {value}" for name, value in config["fields"].items()),
        f"Next: {config['next_command']}",
    ]


def cached_layers_text(dep: Deployment) -> str:
    """The layers the plan's KV bytes per token count (memory.kv_cached_layers), MTP's extra one named."""
    layers = memory.kv_cached_layers(dep.model, mtp=dep.include_mtp, pp=dep.pp)
    stage = f" on the fullest of {dep.pp} pipeline stages" if dep.pp > 1 else ""
    if not dep.include_mtp:
        return f"{layers} cached layers{stage}"
    return f"{layers} cached layers{stage}, incl. 1 MTP layer"


def state_words(dep: Deployment, state_bytes: int) -> str:
    """A sequence's fixed state in words: Gated DeltaNet's, or DeepSeek-V4's windows and compressor states."""
    size = units.fmt_bytes(state_bytes)
    if dep.model.attention_traits.compressed_kv:
        return f"sliding-window and compressor state per sequence: {size}"
    return f"linear-attention state per sequence: {size} ({dep.model.linear_attention_layers} GDN layers)"


def print_plan(result: Plan, dep: Deployment, *, next_lines: list[str] | None = None) -> None:
    """Print the plan: header, memory table, cache sizes, recommendation (then `next_lines`: the engine's
    words for it and the next command), speed, warnings."""
    mem, rec = result.memory, result.recommendation
    console.print(_header(result, dep))
    console.print(_memory_table(result, dep))
    console.print(
        f"KV cache per token: {units.fmt_bytes(mem.kv_bytes_per_token)} ({cached_layers_text(dep)}"
        + (f" + {dep.draft_layers} of the {dep.draft_method} draft model)" if dep.draft_method else ")")
        + (f"; {state_words(dep, mem.state_bytes_per_sequence)}" if mem.state_bytes_per_sequence else "")
    )
    bound = "set by --batch" if rec.binding_constraint == "batch" else f"bound by {rec.binding_constraint}"
    block = result.engine_block_size_tokens or result.block_size_tokens  # the engine's own (Plan)
    console.print(
        f"[bold green]Recommended:[/bold green] max_batch_size = {rec.max_batch_size}, "
        f"max_seq_len = {rec.max_seq_len} ({bound}; block size {block})"
    )
    if result.slo is not None:
        console.print(escape(slo_line(result.slo)))
    for line in next_lines or []:
        console.print(f"  {escape(line)}")

    for line in registry.startup_lines(dep, mem, rec):
        console.print(escape(line))
    print_layout(result)
    perf = result.performance
    if perf is not None:
        console.print(speed_line(perf))
    if result.load_knee is not None:
        console.print(load_knee_line(result.load_knee, dep=dep, max_batch=rec.max_batch_size))
    for note in result.warnings + _range_notes(perf):
        console.print(f"[yellow]note:[/yellow] {plain_note(note)}")


def print_layout(result: Plan) -> None:
    """The layout line (devices, nodes, expert split) and why it was chosen; nothing without a layout."""
    lay = result.layout
    if lay is None:
        return
    console.print(
        f"[bold]Layout:[/bold] {_layout_text(result)} = {lay.world_size} devices on {lay.nodes} "
        f"node(s) of {lay.devices_per_node}"
        + (f"; experts split ep={lay.ep} x moe_tp={lay.moe_tp}" if lay.experts_per_rank else "")
    )
    for line in lay.notes:
        console.print(f"  why: {line}")


FITTED = "speed from a fitted profile: "
ON_BOUND = re.compile(
    r"^(?P<name>\w+) = (?P<value>\S+) sits on its (?P<side>lower|upper) bound \((?P<limit>[^)]*)\)"
)
OUTSIDE = re.compile(
    r"^(?P<axis>batch|ctx) (?P<value>\d+) is outside the fitted range (?P<low>[\d.e+]+)-(?P<high>[\d.e+]+)"
)


def plain_note(note: str) -> str:
    """A fitted profile's warning (perf.fitted: a coefficient on its bound, a point outside the fitted range)
    as what it means for the user's figures and what would make them firmer; other notes as they are. The
    technical form stays in --explain and --json."""
    from planner.perf.fitted_params import FIT_PARAMS

    detail = note.removeprefix(FITTED)
    firmer = "serving benchmarks of this model on this card (kvplan bench import, calibrate --from-bench)"
    bound = ON_BOUND.match(detail)
    if detail != note and bound is not None:
        meaning = {p.name: p.meaning for p in FIT_PARAMS}.get(bound["name"], bound["name"])
        return (
            f"the speed figures are less firm than their range says: the card's fit needed its {meaning} "
            f"at a physical limit to match its measured runs, so something it does not model is at work; "
            f"{firmer} would firm them up (--explain: the fit's terms)"
        )
    outside = OUTSIDE.match(detail)
    if detail == note or outside is None:
        return note
    axis = "contexts" if outside["axis"] == "ctx" else "batches"
    low, high = (f"{float(outside[k]):g}" for k in ("low", "high"))
    measured = low if low == high else f"{low}-{high}"
    return (
        f"the speed figures are extrapolated: the card's fit saw {axis} of {measured} only, this plan is at "
        f"{outside['value']}; read the range, not the figure; {firmer} at this {outside['axis']} would firm "
        "them up (--explain: the fit's terms)"
    )


def speed_line(perf: Performance) -> str:
    """TPOT (per output token), per-user and aggregate tok/s and TTFT, each with its range, then where they
    come from; with MTP, the decode step and its tokens per step after the TPOT's range."""
    band = perf.speed_range
    if band is None:
        tag = "calibrated" if perf.calibrated else "uncalibrated, datasheet peaks x assumed efficiencies"
        return (
            f"[bold]Speed[/bold] at batch {perf.batch}, ctx {perf.ctx_tokens}: TPOT "
            f"{units.fmt_duration(perf.tpot_s)}{f' ({step})' if (step := step_text(perf)) else ''}, "
            f"{units.fmt_tokens_per_s(perf.per_user_tokens_per_s)} per "
            f"user, {units.fmt_tokens_per_s(perf.tokens_per_s)} aggregate, "
            f"TTFT {units.fmt_duration(perf.ttft_s)}"
            f"{ttft_of(perf)} "
            f"({tag}){client_ttft(perf)}"
        )
    ttft = units.fmt_duration_span(band.ttft_s_low, band.ttft_s_high, point_s=perf.ttft_s)
    per_user = _span(
        band.per_user_tokens_per_s_low, band.per_user_tokens_per_s_high, perf.per_user_tokens_per_s
    )
    return (
        f"[bold]Speed[/bold] at batch {perf.batch}, ctx {perf.ctx_tokens}: "
        f"TPOT {units.fmt_duration(perf.tpot_s)}{_range_text(perf, band)}, "
        f"{units.fmt_tokens_per_s(perf.per_user_tokens_per_s)} per user "
        f"({per_user}), "
        f"{units.fmt_tokens_per_s(perf.tokens_per_s)} aggregate "
        f"({_span(band.tokens_per_s_low, band.tokens_per_s_high, perf.tokens_per_s)}), "
        f"TTFT {units.fmt_duration(perf.ttft_s)}{ttft_of(perf)} (range {ttft}, {band.ttft_source})"
        f"{client_ttft(perf)}"
    )


def _span(low: float, high: float, point: float) -> str:
    """units.fmt_span of a range whose point prints with one decimal (fmt_duration, fmt_tokens_per_s)."""
    return units.fmt_span(low, high, point=point, point_decimals=1)


def step_text(perf: Performance) -> str:
    """'decode step 196.7 ms at 1.7 tokens per step' with MTP (TPOT = step / tokens per step); '' without
    drafts, where TPOT is the decode step."""
    if perf.tokens_per_step == 1.0:
        return ""
    return (
        f"decode step {units.fmt_duration(perf.decode_step_s)} at {perf.tokens_per_step:.2g} tokens per step"
    )


def client_ttft(perf: Performance) -> str:
    """'; a client sees 407.8 ms with the 332.7 ms ...' when the profile has a per-request cost outside the
    forward pass (kvplan serve's and simulate's TTFT include it), '' when it has none."""
    if perf.request_overhead_s <= 0:
        return ""
    return (
        f"; a client sees {units.fmt_duration(perf.ttft_s + perf.request_overhead_s)} with the "
        f"{units.fmt_duration(perf.request_overhead_s)} each request costs outside the forward pass "
        "(API server, tokenization)"
    )


def ttft_of(perf: Performance) -> str:
    """' for a 256-token prompt alone' (what the TTFT is of), or '' for a bare estimate."""
    if perf.ttft_prompt_tokens is None:
        return ""
    return f" for a {perf.ttft_prompt_tokens}-token prompt alone"


def slo_line(answer: SloAnswer) -> str:
    """The SLO search's answer, naming its workload: '  SLO search (simulated closed loop, 256 in / 128 out,
    waves): 25 users meet p99 TTFT <= 1000 ms, p99 TPOT <= 150 ms (there: TTFT .., TPOT ..); ...'."""
    names = {"ttft_s": "TTFT", "tpot_s": "TPOT"}
    targets = ", ".join(
        f"{answer.quantile} {names[k]} <= {units.fmt_duration(v)}" for k, v in answer.targets_s.items()
    )
    cap = f"; memory caps the batch at {answer.batch}" if answer.batch < answer.users else ""
    return (
        f"  SLO search (simulated closed loop, {answer.input_tokens} in / {answer.output_tokens} out, "
        f"{answer.arrivals}; as `kvplan serve`): {answer.users} users meet {targets} (there: "
        f"{answer.quantile} TTFT {units.fmt_duration(answer.ttft_s)}, "
        f"TPOT {units.fmt_tpot(answer.tpot_s)}){cap}"
    )


def _range_notes(perf: Performance | None) -> list[str]:
    """Where the range comes from (uncalibrated) and what is extrapolated (microbenchmark tables); a fitted
    profile's extrapolation is already in the plan's warnings."""
    band = perf.speed_range if perf is not None else None
    if band is None or band.label == "fitted profile":
        return []
    return [f"speed range: {note}" for note in band.notes]


def load_knee_line(knee: LoadKnee, *, dep: Deployment, max_batch: int) -> str:
    """Where tails blow up: the load knee, the tails there, and how it sits against max_batch_size."""
    from planner.serving.knee import MAX_KNEE_USERS  # deferred: `kvplan models` needs no perf imports

    group = " per DP group" if dep.dp > 1 else ""
    # the knee is one DP group's: set it against the group's share of the instance's max_batch_size
    group_batch = layout.per_dp_rank_batch(max_batch, dp=dep.dp)
    share = f" ({group_batch} per DP group)" if dep.dp > 1 else ""
    cap = (
        f"; above max_batch_size {max_batch}{share}, so the cap binds first"
        if knee.users > group_batch
        else f"; memory holds {knee.max_users}{'+' if knee.max_users >= MAX_KNEE_USERS else ''} such requests"
    )
    alone = "" if knee.tpot_p99_s is None else f" ({units.fmt_duration(knee.single_user_tpot_s)} alone)"
    return (
        f"[bold]Load knee[/bold]: {knee.users} users{group} at {knee.input_tokens} in / {knee.output_tokens} "
        f"out (the default workload, the seed's benchmark; closed loop, {knee.arrivals} arrivals: requests "
        f"drifting apart; past it latency grows faster than throughput): "
        f"{units.fmt_tokens_per_s(knee.output_tokens_per_s)}, P99 TPOT {units.fmt_tpot(knee.tpot_p99_s)}"
        f"{alone}, P99 TTFT {units.fmt_duration(knee.ttft_p99_s)}{cap}"
    )


def _range_text(perf: Performance, band: SpeedRange) -> str:
    """' (range 180-240 ms, fitted profile[, extrapolated][; decode step ..])': the TPOT's range, the compact
    source and, with MTP, the decode step behind the TPOT."""
    span = units.fmt_duration_span(band.tpot_s_low, band.tpot_s_high, point_s=perf.tpot_s)
    step = step_text(perf)
    return (
        f" (range {span}, {band.label}{', extrapolated' if band.extrapolated else ''}"
        f"{f'; {step}' if step else ''})"
    )


def plan_ledger(dep: Deployment, result: Plan) -> Ledger:
    """The decode ledger (every op's bytes, FLOPs and time) at the plan's batch (one DP group's share)."""
    from planner.perf import roofline

    perf = result.performance
    batch = perf.batch if perf else result.recommendation.max_batch_size
    if result.layout is not None:  # the ledger of one DP group's ranks at its share of the batch
        batch = result.layout.batch_per_dp_group
    return roofline.decode_ledger(dep, batch=batch, ctx_tokens=dep.ctx_tokens)


def print_explain(dep: Deployment, result: Plan) -> None:
    """Print the decode ledger at the plan's batch, then the fit's details."""
    from planner.cli import explain

    console.print(explain.render_explain(plan_ledger(dep, result)))
    for note in result.warnings:
        if plain_note(note) != note:
            console.print(f"fit detail: {escape(note)}")
