"""MindIE Server config.json from a plan: pure (builds and checks a dict; cli_mindie writes the file).

Sources: [DOC] = MindIE-LLM docs/zh/user_guide/user_manual/service_parameter_configuration.md (master
8b4871ad31f5); [KV] = mindie_llm/text_generator/utils/kvcache_settings.py; [GEN] = .../generator.py;
[ROUTER] = the Python router's initialize(); all summarised in ascend-mindie-facts.md section 1.
Base configs (planner/data/): mindie-config-2.x.json mirrors master src/server/conf/config.json;
mindie-config-1.0.RC3.json the 1.0.RC3 layout (LogConfig with logLevel/logPath, no kvPoolConfig).
Every field kvplan writes is listed once, in OWNED_FIELDS (planner/engines/mindie/fields.py); everything else
in the base is kept as is.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any, Literal

from pydantic import Field

from planner import units
from planner.engines import layouts
from planner.engines.common import Lengths, ServingOptions
from planner.engines.mindie import plugins, pool, scheduler
from planner.engines.mindie import rules as mindie_rules
from planner.engines.mindie.fields import MODEL, OWNED_FIELDS
from planner.engines.mindie.pool import npu_mem_mode, npu_mem_size_gib
from planner.engines.mindie.schedule_times import schedule_times_ms, select_batch, step_time_notes
from planner.errors import DataFileError, DoesNotFitError, PlanInputError
from planner.results import Plan
from planner.schema import Frozen

DEFAULT_MINDIE_VERSION = mindie_rules.DEFAULT_MINDIE_VERSION
# ScheduleConfig defaults: planner/engines/mindie/scheduler.py; the reserved block and the multimodal
# checkpoints: planner/engines/mindie/pool.py.
MTP_DOCUMENTED = re.compile(r"^deepseek-(v3|r1)")  # [mtp.md] DeepSeek-R1/V3 W8A8 or KV-int8 only
PREFIX_CACHE_DOCUMENTED = re.compile(r"^(qwen2|qwen2\.5|qwen3|deepseek-(v3|r1))(-|$)")  # [prefix_cache.md]

KEEP = "<keep the base's value>"  # owned value meaning: leave the base's field as it is


class MindieOptions(ServingOptions):
    """ServingOptions plus MindIE's own knobs. None: kvplan's default (see OWNED_FIELDS)."""

    devices: list[int] | None = None
    npu_mem_size: Literal["auto", "explicit"] | None = None
    mindie_version: str = DEFAULT_MINDIE_VERSION


class BlockPrediction(Frozen):
    """npuBlockNum per card as MindIE computes it, and the concurrency it holds at the chosen lengths."""

    block_bytes: int = Field(description="[KV] cache_block_bytes: block x KV bytes per token per rank")
    kv_budget_bytes: int = Field(description="npuMemSize GiB in bytes, or the plan's estimate of MindIE's -1")
    allocated_blocks: int = Field(description="[KV] floor(budget / block_bytes)")
    npu_block_num: int = Field(description="[ROUTER] what MindIE logs: allocated - 1 (- 2 with dp > 1)")
    blocks_per_request: int = Field(
        description="pool.blocks_per_sequence: ceil((min(maxSeqLen, in + out) + MTP lookahead) / block)"
    )
    concurrency: int = Field(description="floor(npu_block_num / blocks_per_request)")
    documented_concurrency: int = Field(
        description="[DOC] maxBatchSize rule: floor(npu_block_num / (ceil(in / block) + ceil(out / block)))"
    )
    warmup_blocks: int = Field(description="[GEN] ceil(min(maxSeqLen, in + out) / block), <= allocated")


class MindieResult(Frozen):
    """The config, the prediction behind it, what to export, and notes for the user."""

    config: dict[str, Any]
    prediction: BlockPrediction
    npu_mem_mode: Literal["auto", "explicit"]
    env: dict[str, str]
    notes: list[str]


def predict_blocks(plan: Plan, *, lengths: Lengths, npu_mem_gib: int, mtp_drafts: int = 0) -> BlockPrediction:
    """npuBlockNum the way MindIE computes it ([KV] L127-150, [ROUTER]).

    Formula:
        block_bytes = B * sum over cached layers (+1 with MTP) of (K + V) bytes per rank
                    = B * plan.memory.kv_bytes_per_token          (B = cacheBlockSize)
        allocated   = floor(budget / block_bytes), budget = npuMemSize GiB in bytes or the plan's KV budget
        npuBlockNum = allocated - 1, - 2 with dp > 1 (logged)
        per request = ceil((min(maxSeqLen, in + out) + gamma) / B)   (pool.blocks_per_sequence: the block
                      manager's; gamma = pool.lookahead_slots(mtp_drafts), 0 without MTP)
        documented  = floor(npuBlockNum / (ceil(in / B) + ceil(out / B)))   ([DOC]'s maxBatchSize rule)
    """
    block = plan.block_size_tokens
    block_bytes = block * plan.memory.kv_bytes_per_token
    budget = npu_mem_gib * units.GIB_BYTES if npu_mem_gib > 0 else max(plan.memory.kv_budget_bytes, 0)
    seq_tokens = min(lengths.max_seq_len_tokens, lengths.max_input_tokens + lengths.max_output_tokens)
    per_request = int(pool.blocks_per_sequence(seq_tokens, block_tokens=block, mtp_drafts=mtp_drafts))
    documented = pool.documented_blocks_per_request(
        lengths.max_input_tokens, lengths.max_output_tokens, block_tokens=block
    )
    dp = plan.layout.dp if plan.layout is not None else 1
    usable = max(pool.usable_blocks(budget, block_bytes=block_bytes, model_id=plan.model, dp=dp), 0)
    return BlockPrediction(
        block_bytes=block_bytes,
        kv_budget_bytes=budget,
        allocated_blocks=budget // block_bytes,
        npu_block_num=usable,
        blocks_per_request=per_request,
        concurrency=usable // per_request,
        documented_concurrency=usable // documented,
        warmup_blocks=math.ceil(seq_tokens / block),
    )


def owned_values(
    plan: Plan,
    *,
    lengths: Lengths,
    options: MindieOptions,
    base: dict[str, Any],
    npu_mem_gib: int,
    plugin_params: str | None,
) -> dict[str, Any]:
    """Value of every OWNED_FIELDS entry (KEEP: leave the base's; None: remove the field)."""
    times = schedule_times_ms(plan)
    batch = plan.batch_per_dp_group
    prefill_ms, decode_ms = times or (
        scheduler.DEFAULT_PREFILL_TIME_PER_REQ_MS,
        scheduler.DEFAULT_DECODE_TIME_PER_REQ_MS,
    )
    return {
        "modelInstanceNumber": 1,
        "npuDeviceIds": [list(options.devices or range(node_devices(plan)))],
        "maxSeqLen": lengths.max_seq_len_tokens,
        "maxInputTokenLen": lengths.max_input_tokens,
        "truncation": False,
        "modelName": options.model_name or KEEP,
        "modelWeightPath": options.weights_path or KEEP,
        "worldSize": plan.tp,
        "cpuMemSize": 0,
        "npuMemSize": npu_mem_gib,
        "backendType": "atb",
        "trustRemoteCode": trust_remote_code(base, options=options),
        "plugin_params": plugin_params,
        "cacheBlockSize": plan.block_size_tokens,
        "maxPrefillBatchSize": min(batch, scheduler.DEFAULT_MAX_PREFILL_BATCH),
        "maxPrefillTokens": lengths.max_prefill_tokens,
        "prefillTimeMsPerReq": prefill_ms,
        "decodeTimeMsPerReq": decode_ms,
        "maxBatchSize": batch,
        "maxIterTimes": lengths.max_output_tokens,
        "maxPreemptCount": 0,
        "supportSelectBatch": select_batch(plan),
        "maxQueueDelayMicroseconds": scheduler.DEFAULT_QUEUE_DELAY_US,
    }


MISSING = plugins.MISSING  # lookup's answer for an absent field


def trust_remote_code(base: dict[str, Any], *, options: MindieOptions) -> object:
    """trustRemoteCode: true when the checkpoint needs its own code, else the base's own value; None (left
    out) where the base layout has no such field (1.0.RC3) and none is needed."""
    if options.trust_remote_code:
        return True
    kept = lookup(base, (*MODEL, "trustRemoteCode"))
    return None if kept is MISSING else kept


def lookup(cfg: object, path: tuple[str | int, ...]) -> Any:
    """Value at path in a config, or MISSING."""
    node = cfg
    for part in path:
        in_list = isinstance(part, int) and isinstance(node, list) and part < len(node)
        if not (in_list or (isinstance(part, str) and isinstance(node, dict) and part in node)):
            return MISSING
        node = node[part]  # type: ignore[index]
    return node


def merge_config(base: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of base with every owned field set from values; unknown fields and order are kept."""
    cfg = copy.deepcopy(base)
    for field in OWNED_FIELDS:
        parent = lookup(cfg, field.path[:-1])
        if not isinstance(parent, dict):
            raise DataFileError(
                f"{mindie_rules.dotted(field.path[:-1])}: missing from the base config "
                f"(got no such object, expected a MindIE config.json of the 1.0.RC3+ layout)"
            )
        value = values[field.key]
        if value is KEEP:
            kept = parent.get(field.key)
            if not isinstance(kept, str) or not kept.strip():
                got = "nothing" if field.key not in parent else repr(kept)[:60]
                raise PlanInputError(
                    f"--{_FLAG_FOR_KEEP[field.key]}: required, the base has no usable "
                    f"{field.dotted} (got {got}, expected a non-empty string)"
                )
        elif value is None:
            parent.pop(field.key, None)
        else:
            parent[field.key] = value
    return cfg


_FLAG_FOR_KEEP = {"modelName": "model-name", "modelWeightPath": "weights-path"}


def check_options(plan: Plan, *, options: MindieOptions) -> None:
    """Flag-level MindIE constraints: MTP draft count, plugins per layout, devices = worldSize."""
    if options.mtp and options.mtp not in mindie_rules.MTP_TOKENS:
        raise PlanInputError(
            f"--mtp: MindIE's MTP plugin takes 1 or 2 speculative tokens (got {options.mtp}, expected 1 or 2)"
        )
    if (options.mtp or options.prefix_cache) and options.mindie_version != DEFAULT_MINDIE_VERSION:
        flag = "--mtp" if options.mtp else "--prefix-cache"
        raise PlanInputError(
            f"{flag}: kvplan writes plugin_params only for the 2.x layout "
            f"(got --mindie-version {options.mindie_version}, expected 2.x); "
            f"the reference facts document plugin_params for master only"
        )
    devices, count = options.devices, node_devices(plan)
    if devices is None:
        return
    if len(devices) != count or len(set(devices)) != len(devices) or min(devices) < 0:
        raise PlanInputError(
            f"--devices: worldSize must equal the number of distinct NPU ids "
            f"(got {','.join(map(str, devices))}, expected {count} distinct ids >= 0 "
            f"for --tp {plan.tp}{' and its layout' if plan.layout else ''})"
        )


def node_devices(plan: Plan) -> int:
    """NPUs of the instance on one node: tp, or the layout's (planner/engines/layouts.py)."""
    return layouts.devices_on_one_node(plan.layout) if plan.layout else plan.tp


def apply_layout(cfg: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """The config with a layout's multi-node and parallel fields set (unchanged for a tp-only plan)."""
    if plan.layout is None:
        return cfg
    for path, value in layouts.mindie_layout_values(plan.layout, model_type=plan.layout.model_type).items():
        parent = lookup(cfg, path[:-1])
        if isinstance(parent, dict):
            parent[str(path[-1])] = value
    return cfg


def check_warmup(plan: Plan, prediction: BlockPrediction) -> None:
    """[GEN] _validate_warmup_memory: the longest warm-up request must fit in the allocated blocks."""
    if prediction.warmup_blocks <= prediction.allocated_blocks:
        return
    raise DoesNotFitError(
        f"{plan.model} on {plan.card} at tp={plan.tp}: MindIE's warm-up would fail "
        f"(got {prediction.allocated_blocks} KV blocks, expected >= {prediction.warmup_blocks} for one "
        f"maxSeqLen request); lower --ctx or "
        f"--max-prefill-tokens, or raise --memory-fraction"
    )


def mindie_notes(plan: Plan, *, options: MindieOptions, prediction: BlockPrediction, mode: str) -> list[str]:
    """Advice that does not stop the config."""
    notes = []
    if mode == "auto":
        notes.append(
            f"npuMemSize -1: MindIE sizes the KV cache after warm-up as NPU_MEMORY_FRACTION x HBM "
            f"minus memory in use; export NPU_MEMORY_FRACTION={plan.memory_fraction:g} "
            f"(the plan's fraction)"
        )
    else:
        notes.append(
            "npuMemSize explicit: MindIE takes exactly this many GiB for KV and ignores "
            "NPU_MEMORY_FRACTION; if kvplan underestimates weights or activations this can OOM"
        )
    notes += step_time_notes(plan)
    batch = plan.batch_per_dp_group
    if prediction.concurrency < batch:
        notes.append(
            f"MindIE's blocks hold {prediction.concurrency} full-length requests, fewer than "
            f"maxBatchSize {batch}: extra requests wait for blocks"
        )
    notes += documented_rule_notes(batch, prediction)
    if options.mtp and not MTP_DOCUMENTED.match(plan.model):
        notes.append(f"--mtp: MindIE documents MTP for DeepSeek-R1/V3 (W8A8 or KV-int8), not {plan.model}")
    if options.prefix_cache and not PREFIX_CACHE_DOCUMENTED.match(plan.model):
        notes.append(f"--prefix-cache: MindIE documents it for Qwen2/2.5/3, DeepSeek-R1/V3, not {plan.model}")
    if plan.memory.state_bytes_per_sequence:
        notes.append(
            f"assumed (as the plan's note): per-sequence states (linear-attention, or V4's windows) "
            f"({units.fmt_bytes(plan.memory.state_bytes_per_sequence)} per sequence) outside the KV "
            f"blocks, so npuBlockNum counts full-attention layers only and npuMemSize leaves the states "
            f"out; maxBatchSize {plan.batch_per_dp_group} depends on this"
        )
    return notes


def documented_rule_notes(batch: int, prediction: BlockPrediction) -> list[str]:
    """A note when MindIE's documented maxBatchSize rule gives fewer requests than kvplan writes: the docs
    charge ceil(in / B) + ceil(out / B) blocks a request, the block manager ceil((in + out) / B)."""
    documented = prediction.documented_concurrency
    if documented >= min(batch, prediction.concurrency):
        return []
    return [
        f"maxBatchSize {batch}: MindIE's docs size it as npuBlockNum / (ceil(in / block) + "
        f"ceil(out / block)) = {documented}, a margin of up to one block a request: its block manager "
        f"holds a request of in + out tokens in ceil((in + out) / block) = "
        f"{prediction.blocks_per_request} blocks ({pool.BLOCK_RULE_SOURCE}); "
        f"set maxBatchSize {documented} to keep the docs' margin"
    ]


def mindie_config(
    plan: Plan, *, base: dict[str, Any], lengths: Lengths, options: MindieOptions
) -> MindieResult:
    """The whole MindIE answer for a plan: merged and validated config, npuBlockNum prediction, env, notes."""
    check_options(plan, options=options)
    mode = npu_mem_mode(plan.model, requested=options.npu_mem_size)
    gib = npu_mem_size_gib(plan, mode=mode)
    prediction = predict_blocks(plan, lengths=lengths, npu_mem_gib=gib, mtp_drafts=options.mtp)
    check_warmup(plan, prediction)
    held, notes = held_plan(plan, prediction=prediction, lengths=lengths)
    base_plugins = lookup(base, (*MODEL, "plugin_params"))
    merged = plugins.merge_plugins(base_plugins, mtp=options.mtp, prefix_cache=options.prefix_cache)
    values = owned_values(
        held, lengths=lengths, options=options, base=base, npu_mem_gib=gib, plugin_params=merged.params
    )
    cfg = apply_layout(merge_config(base, values), plan)
    mindie_rules.validate_config(cfg)
    env = {"NPU_MEMORY_FRACTION": f"{plan.memory_fraction:g}"} if mode == "auto" else {}
    notes += mindie_notes(held, options=options, prediction=prediction, mode=mode) + tls_notes(cfg)
    notes += merged.notes
    if plan.layout is not None:
        notes += layouts.mindie_layout_notes(plan.layout, model_type=plan.layout.model_type)
    return MindieResult(config=cfg, prediction=prediction, npu_mem_mode=mode, env=env, notes=notes)


# TLS switches of MindIE's config (ServerConfig): the template ships them on, with certificate paths.
TLS_FIELDS = (
    ("ServerConfig", "httpsEnabled"),
    ("ServerConfig", "interCommTLSEnabled"),
    ("BackendConfig", "interNodeTLSEnabled"),
)


def tls_notes(cfg: dict[str, Any]) -> list[str]:
    """One note when the config (kvplan copies these from the base unchanged) has TLS switched on: MindIE
    then needs the certificates at the paths the base names before it starts."""
    on = [".".join(path) for path in TLS_FIELDS if lookup(cfg, path) is True]
    if not on:
        return []
    return [
        f"TLS: {', '.join(on)} true (copied from the base config, as kvplan leaves them): MindIE needs the "
        "certificates at the paths the config names; for a local test without certificates set them false"
    ]


def held_plan(plan: Plan, *, prediction: BlockPrediction, lengths: Lengths) -> tuple[Plan, list[str]]:
    """The plan with maxBatchSize lowered to what MindIE's predicted blocks hold, when fewer (explicit
    lengths, whole-GiB npuMemSize); layout plans (per DP group) kept, mindie_notes warns."""
    batch = plan.recommendation.max_batch_size
    if (plan.layout is not None and plan.layout.dp > 1) or prediction.concurrency >= batch:
        return plan, []
    if prediction.concurrency < 1:
        raise DoesNotFitError(
            f"{plan.model} on {plan.card} at tp={plan.tp}: MindIE's {prediction.npu_block_num} usable blocks "
            f"hold no request of {lengths.max_input_tokens} in + {lengths.max_output_tokens} out (got 0, "
            f"expected >= 1 of {prediction.blocks_per_request} blocks); lower --ctx or raise --tp"
        )
    recommendation = plan.recommendation.model_copy(update={"max_batch_size": prediction.concurrency})
    update: dict[str, Any] = {"recommendation": recommendation}
    if plan.layout is not None:  # one DP group (a tp across nodes): its batch is the instance's
        update["layout"] = plan.layout.model_copy(update={"batch_per_dp_group": prediction.concurrency})
    note = (
        f"maxBatchSize {prediction.concurrency}, not the plan's {batch}: MindIE's predicted blocks hold "
        f"{prediction.concurrency} requests of {lengths.max_input_tokens} in + "
        f"{lengths.max_output_tokens} out"
    )
    return plan.model_copy(update=update), [note]
