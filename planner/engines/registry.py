"""The engine registry: the only place that dispatches on an engine name.

Each engine's facts live in its room (engines/mindie/pool.py, engines/vllm/batch.py, engines/sglang/room.py,
engines/transformers/pool.py), each answering EngineRoom; everything else asks these functions with a
Deployment (or an engine name), never comparing engine names itself (tests/test_layering.py greps for it).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Protocol

import numpy as np

from planner.arrays import IntArray
from planner.deployment import Deployment
from planner.engines import common
from planner.engines.common import BlockPool, EngineBudget
from planner.engines.mindie import pool as mindie_pool
from planner.engines.sglang import room as sglang_room
from planner.engines.transformers import pool as transformers_pool
from planner.engines.vllm import batch as vllm_batch
from planner.engines.vllm import scheduler as vllm_scheduler
from planner.errors import PlanInputError
from planner.kinds import ENGINES, EngineName, SchedulerKind
from planner.results import MemoryBreakdown, Plan, Recommendation
from planner.schema import HardwareProfile

ConfigWords = tuple[str, list[tuple[str, str]], str]  # (title, [(field or flag, value)], what else it needs)


class EngineRoom(Protocol):
    """What the planner asks an engine (module attributes and functions of its room)."""

    SCHEDULER: SchedulerKind
    DEFAULT_MEMORY_FRACTION: float  # the engine's own memory setting when the user gives none
    MEMORY_FRACTION_NAME: str  # that setting's name in the engine's words (env var or flag)
    ADMITS_BEYOND_POOL: bool  # admits more sequences than the pool holds at full length, preempting later
    MAX_PROMPTS_PER_PASS: int | None  # prompts one prefill pass takes at most (None: only the token budget)
    PD_DECODER_STREAMS_FIRST_TOKEN: bool  # under P:D the decode instance streams the user's first token
    PREFILL_AT_LEAST_INPUT: bool  # its prefill budget is raised to the longest prompt (MindIE's rule)
    MAX_PROMPT_TOKENS: int | None  # the longest prompt its config takes (MindIE's maxInputTokenLen range)
    MODEL_NAME_PATTERN: str | None  # the served names its config takes (a regex; None: any)
    MODEL_NAME_RULE: str | None  # that pattern in words
    BATCH_CAP_RULE: str  # batch_cap's rule in words (empty where it has none)
    DP_PHASE_VOTE: bool  # DP ranks run the phase (prefill or decode) most of them want
    DP_LOCKSTEP_DENSE: bool  # DP ranks of a dense model step together too (MoE ranks always do)
    REQUEST_OVERHEAD_PRIOR_US: float  # the fit's prior centre for a request's cost outside the forward pass
    STATE_PASSES: int
    FUSED_KERNELS: bool
    SUPPORTS_PIPELINE: bool
    GATHERS_MOE_OUTPUTS: bool
    DEVICE_LAUNCHED_COLLECTIVES: bool  # in-node collectives launched from the device (MindIE's LCCL)
    DRAFT_METHODS: tuple[str, ...]  # separate draft models it runs (--speculative-config eagle3 / dflash)
    FITTED_PROFILE_ENGINE: EngineName  # whose hwprofiles/fitted/<card>.<engine>.yaml times this engine
    # the engine's words for an expert parallelism that splits the experts over every rank of the tp x dp
    # group (ep is 1 or the group); None: any ep of the candidates runs (or check_layout refuses ep > 1)
    EXPERTS_OVER_WHOLE_GROUP: str | None
    RUNTIME_SOURCE: str  # where the plan's runtime memory comes from, in a few words (the plan's table)
    LAYOUT_BUFFER_NOTES: dict[str, str]  # layout buffer -> where it stands when not in the runtime row

    def check_kv_dtype(self, dep: Deployment) -> None: ...
    def weight_dtype_refusal(self, dep: Deployment) -> str | None: ...
    def default_memory_fraction_at(
        self,
        hardware: HardwareProfile,
        *,
        ranks: tuple[int, int, int],
        prefill_tokens: int | None,
        drafting: bool,
    ) -> float: ...
    def startup_budget(self, dep: Deployment, *, weights_bytes: int) -> EngineBudget | None: ...
    def default_prefill_tokens(self, hardware: HardwareProfile) -> int | None: ...
    def check_layout(self, dep: Deployment) -> None: ...
    def max_batch_grid(self, dep: Deployment, mem: MemoryBreakdown, *, ctx_tokens: IntArray) -> IntArray: ...
    def check_holds_one(self, dep: Deployment, mem: MemoryBreakdown, *, max_batch: int) -> None: ...
    def block_pool(self, dep: Deployment, mem: MemoryBreakdown, *, max_model_len: int) -> BlockPool: ...
    def sequence_bytes(self, dep: Deployment, mem: MemoryBreakdown) -> int: ...
    def prefix_cache_block_tokens(self, dep: Deployment) -> int: ...
    def default_max_batch(self, dep: Deployment, *, planned_batch: int) -> int: ...
    def batch_cap(self, dep: Deployment) -> int | None: ...
    def engine_notes(self, dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]: ...
    def startup_lines(self, dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]: ...
    def config_words(self, plan: Plan, dep: Deployment) -> ConfigWords | None: ...
    def beyond_pool_words(self, *, max_batch: int, clients: int) -> str: ...


ROOMS: dict[EngineName, EngineRoom] = {
    "mindie": mindie_pool,
    "vllm": vllm_batch,
    "transformers": transformers_pool,
    "sglang": sglang_room,
}
assert tuple(ROOMS) == ENGINES, "every engine in planner/kinds.py needs a room"
NAME_RULES = "; ".join(r.MODEL_NAME_RULE for r in ROOMS.values() if r.MODEL_NAME_RULE)  # served names


def room(engine: EngineName) -> EngineRoom:
    """The engine's room (engine validated at the boundary: planner.kinds.parse_engine)."""
    return ROOMS[engine]


def request_overhead_prior_us(engines: Collection[EngineName]) -> float | None:
    """The engines' prior centre for request_overhead_us (planner/perf/fitted_params.py) when every one of
    `engines` gives the same; None (the generic floor) when they differ or none is given."""
    values = {room(engine).REQUEST_OVERHEAD_PRIOR_US for engine in engines}
    return values.pop() if len(values) == 1 else None


def max_prompts_per_pass(engine: EngineName) -> int | None:
    """Prompts one prefill pass of `engine` takes at most beyond its token budget (MindIE's
    maxPrefillBatchSize); None where the token budget and the running cap are the only limits."""
    return room(engine).MAX_PROMPTS_PER_PASS


def device_launched_collectives(engines: Collection[EngineName]) -> bool:
    """True when any of `engines` launches its in-node collectives from the device (no host-side HCCL
    expansion): a fit on their rows holds allreduce_latency_us at the profile's value."""
    return any(room(engine).DEVICE_LAUNCHED_COLLECTIVES for engine in engines)


def fitted_profile_engine(engine: EngineName) -> EngineName:
    """The engine whose fitted card profile (hwprofiles/fitted/<card>.<engine>.yaml) a plan for `engine`
    reads: its own, or one it borrows (SGLang on Ascend: vllm-ascend's, until SGLang rows are fitted)."""
    return room(engine).FITTED_PROFILE_ENGINE


def check_kv_dtype(dep: Deployment) -> None:
    """PlanInputError when the engine has no KV cache of dep's KV dtype."""
    room(dep.engine).check_kv_dtype(dep)


def check_weight_dtype(dep: Deployment) -> None:
    """PlanInputError when the engine cannot serve dep's weight dtype on its card (fp32 on Ascend's fused
    serving engines)."""
    refusal = room(dep.engine).weight_dtype_refusal(dep)
    if refusal is not None:
        raise PlanInputError(refusal)


def check_draft_model(dep: Deployment) -> None:
    """PlanInputError for a separate draft model the engine does not run (none, or SGLang's eagle3 only)."""
    methods = room(dep.engine).DRAFT_METHODS
    if dep.draft_method and methods and dep.draft_method not in methods:
        raise PlanInputError(
            f"--speculative-config: {dep.engine} runs no {dep.draft_method} drafter (got method "
            f"{dep.draft_method}, expected {' or '.join(('mtp', *methods))}); vLLM runs eagle3 and dflash "
            "drafters (--engine vllm, `kvplan vllm`)"
        )
    if dep.draft_method and not methods:
        raise PlanInputError(
            f"--speculative-config: {dep.engine} runs no separate draft model (got method "
            f"{dep.draft_method}, expected mtp, drafts from the model's own MTP layers); vLLM runs eagle3 "
            "and dflash drafters (--engine vllm, `kvplan vllm`)"
        )


def startup_budget(dep: Deployment, *, weights_bytes: int) -> EngineBudget | None:
    """The engine's own start-up KV budget (None: capacity.py's formula), which every batch reads."""
    return room(dep.engine).startup_budget(dep, weights_bytes=weights_bytes)


def default_prefill_tokens(engine: EngineName, hardware: HardwareProfile) -> int | None:
    """The engine's default tokens per prefill step when the user gives none (vLLM's
    --max-num-batched-tokens on the card); None: the plan's max(8192, ctx - output)."""
    return room(engine).default_prefill_tokens(hardware)


def prefill_at_least_input(engine: EngineName) -> bool:
    """True when the engine's prefill budget must hold the longest prompt (MindIE: maxPrefillTokens >=
    maxInputTokenLen, facts 1.2): a smaller --max-prefill-tokens is raised to the input part of --ctx
    (common.resolve_lengths), and the plan sizes the activation peak at the raised value."""
    return room(engine).PREFILL_AT_LEAST_INPUT


def sized_deployment(dep: Deployment, *, options: common.ServingOptions) -> tuple[Deployment, common.Lengths]:
    """dep re-sized with the lengths the engine's config writes (common.sized_deployment with the engine's
    default prefill budget, its maxPrefillTokens >= maxInputTokenLen rule and its longest prompt)."""
    rules = common.LengthRules(
        engine_prefill_tokens=default_prefill_tokens(dep.engine, dep.hardware),
        at_least_input=prefill_at_least_input(dep.engine),
        input_limit=prompt_token_limit(dep.engine),
    )
    return common.sized_deployment(dep, options=options, rules=rules)


def prompt_token_limit(engine: EngineName) -> int | None:
    """The longest prompt the engine's own config accepts (MindIE: maxInputTokenLen and maxPrefillTokens
    at most rules.MAX_TOKENS); None where prompts are bounded only by the context."""
    return room(engine).MAX_PROMPT_TOKENS


def served_model_name(typed: str, *, card_id: str) -> str:
    """The served name of every config command by default: the first of common.name_candidates that every
    engine takes (`Qwen/Qwen3-32B` -> `Qwen3-32B`); PlanInputError naming --model-name when none is."""
    for name in common.name_candidates(typed, card_id=card_id):
        if all(re.fullmatch(r.MODEL_NAME_PATTERN, name) for r in ROOMS.values() if r.MODEL_NAME_PATTERN):
            return name
    raise PlanInputError(
        f"--model-name: required: neither --model nor its card's id is a name every engine serves a model "
        f"under (got {typed[:60]!r} and {card_id[:60]!r}, expected {NAME_RULES})"
    )


def default_served_name(typed: str, *, card_id: str) -> tuple[str, list[str]]:
    """(served_model_name, its note): the note says so when the name is not --model as typed."""
    name = served_model_name(typed, card_id=card_id)
    if name == typed:
        return name, []
    return name, [
        f"served as {name!r}: --model {typed[:60]!r} is not a name every engine's config takes "
        f"({NAME_RULES}); --model-name to choose another"
    ]


def batch_cap(dep: Deployment) -> int | None:
    """The most sequences the engine's own config takes whatever memory holds (MindIE maxBatchSize's
    range, vLLM's --max-num-batched-tokens >= --max-num-seqs); None where it has no such limit."""
    return room(dep.engine).batch_cap(dep)


def check_layout(dep: Deployment) -> None:
    """PlanInputError for a layout the engine cannot run (beyond tensor parallelism; MindIE: also a block
    size its config check refuses; an ep other than 1 or tp x dp where EXPERTS_OVER_WHOLE_GROUP says so).
    Every room's check passes a tensor-parallel-only layout of its own."""
    engine_room = room(dep.engine)
    engine_room.check_layout(dep)
    if engine_room.EXPERTS_OVER_WHOLE_GROUP is not None:
        common.check_experts_over_whole_group(dep, splits=engine_room.EXPERTS_OVER_WHOLE_GROUP)


def max_batch_grid(dep: Deployment, mem: MemoryBreakdown, *, ctx_tokens: IntArray) -> IntArray:
    """The one "how many sequences fit" implementation: the engine's largest batch at each ctx (per DP
    group, on the memory plan `mem`), its batch cap applied. capacity.max_batch_size reads one cell."""
    return room(dep.engine).max_batch_grid(dep, mem, ctx_tokens=np.asarray(ctx_tokens, dtype=np.int64))


def max_batch_size(dep: Deployment, mem: MemoryBreakdown) -> int:
    """max_batch_grid at dep.ctx_tokens; DoesNotFitError in the engine's words when it holds none."""
    most = int(max_batch_grid(dep, mem, ctx_tokens=np.asarray([dep.ctx_tokens]))[0])
    room(dep.engine).check_holds_one(dep, mem, max_batch=most)
    return most


def block_pool(dep: Deployment, mem: MemoryBreakdown, *, max_model_len: int) -> BlockPool:
    """The engine's KV block pool as the simulator counts it."""
    return room(dep.engine).block_pool(dep, mem, max_model_len=max_model_len)


def kv_bytes_at_batch(dep: Deployment, mem: MemoryBreakdown, *, batch: int) -> int:
    """Bytes of KV and state `batch` sequences of ctx hold in the engine's pool on one device (the plan's "KV
    at recommended batch" row, its 30-40 % note): batch * the room's sequence_bytes (bytes per sequence)."""
    return batch * room(dep.engine).sequence_bytes(dep, mem)


def prefix_cache_block_tokens(dep: Deployment) -> int:
    """Tokens per prefix-cache block of the engine (a cache hit is a whole number of them)."""
    return room(dep.engine).prefix_cache_block_tokens(dep)


def scheduler_for(dep: Deployment) -> SchedulerKind:
    """The simulator's scheduler for the engine ("mindie" prefill-priority, "vllm" continuous batching)."""
    return room(dep.engine).SCHEDULER


def default_max_batch(dep: Deployment, *, planned_batch: int) -> int:
    """The batch cap the simulator runs the engine with by default."""
    return room(dep.engine).default_max_batch(dep, planned_batch=planned_batch)


def running_cap(dep: Deployment, *, max_batch: int | None, planned_batch: int) -> int:
    """The engine's running-sequence cap for one DP group: --max-batch, else default_max_batch (vLLM
    max_num_seqs, SGLang max_running_requests, MindIE maxBatchSize = planned_batch) within batch_cap. The one
    cap the simulator, `kvplan serve` and the serving fit run under (planner/capacity.py running_cap)."""
    if max_batch is not None:
        return max_batch
    default, cap = default_max_batch(dep, planned_batch=planned_batch), batch_cap(dep)
    return default if cap is None else min(default, cap)


def check_batch_cap(dep: Deployment, *, batch: int | None, flag: str) -> None:
    """PlanInputError naming the flag when `batch` sequences of one DP group pass batch_cap (vLLM:
    max_num_seqs <= max_num_batched_tokens; MindIE: maxBatchSize's range): every command refuses alike."""
    cap = batch_cap(dep)
    if batch is None or cap is None or batch <= cap:
        return
    got = f"got {batch}{' per DP group' if dep.dp > 1 else ''}, expected <= {cap}"
    if dep.engine != "vllm":
        rule = room(dep.engine).BATCH_CAP_RULE
        raise PlanInputError(f"{flag}: above the engine's range on {dep.hardware.id} ({got}: {rule})")
    raise PlanInputError(
        f"{flag}: above --max-num-batched-tokens ({got}: {vllm_scheduler.SEQS_RULE}); raise "
        "--max-prefill-tokens (--max-num-batched-tokens) or lower it"
    )


def batch_cap_notes(dep: Deployment, *, wanted: int, what: str) -> list[str]:
    """The note when the engine's config limit (vLLM: --max-num-batched-tokens caps max_num_seqs) holds the
    running batch below `wanted` sequences (`what` says whose number: the engine's default, the users');
    empty when it does not bind. The plan's own note: the room's engine_notes."""
    if dep.engine != "vllm":
        return []
    return vllm_batch.seqs_cap_notes(dep, wanted=wanted, what=what)


def engine_notes(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]:
    """What the plan assumes of the engine."""
    return room(dep.engine).engine_notes(dep, mem, rec)


def state_passes(engine: EngineName) -> int:
    """Reads + writes of the linear-attention state per sequence and decode step."""
    return room(engine).STATE_PASSES


def fused_kernels(engine: EngineName) -> bool:
    """Whether the engine runs fused decode kernels (else transformers' eager modules)."""
    return room(engine).FUSED_KERNELS


def supports_pipeline(dep: Deployment) -> bool:
    """Whether the engine runs pipeline parallelism (pp > 1)."""
    return room(dep.engine).SUPPORTS_PIPELINE


def gathers_moe_outputs(engine: EngineName, *, ep: int) -> bool:
    """Whether the engine all-gathers MoE outputs over the TP ranks (expert parallel only)."""
    return room(engine).GATHERS_MOE_OUTPUTS and ep > 1


def expert_degrees(dep: Deployment, *, group: int, candidates: list[int]) -> list[int]:
    """Expert-parallel degrees the engine can run on a MoE group of `group` ranks, among candidates: 1 or
    the whole group where the room's EXPERTS_OVER_WHOLE_GROUP says so (check_layout's rule), else all."""
    if room(dep.engine).EXPERTS_OVER_WHOLE_GROUP is None:
        return candidates
    return common.whole_group_expert_degrees(group, candidates=candidates)


def startup_lines(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]:
    """What the engine's own start-up arithmetic logs for the plan, term by term (empty where kvplan does
    not model the engine's start-up lines)."""
    return room(dep.engine).startup_lines(dep, mem, rec)


def config_words(plan: Plan, dep: Deployment) -> ConfigWords | None:
    """The plan in the engine's own config words and what `kvplan <engine>` needs to write them (None: kvplan
    writes no config for this engine)."""
    return room(dep.engine).config_words(plan, dep)


def default_memory_fraction(engine: EngineName) -> float:
    """The engine's own memory setting when the user gives none (MindIE NPU_MEMORY_FRACTION, vLLM
    gpu_memory_utilization)."""
    return room(engine).DEFAULT_MEMORY_FRACTION


def memory_fraction_name(engine: EngineName) -> str:
    """The engine's own name for the memory fraction the plan sizes from (MindIE NPU_MEMORY_FRACTION, vLLM
    --gpu-memory-utilization, SGLang --mem-fraction-static, transformers kvplan's --memory-fraction)."""
    return room(engine).MEMORY_FRACTION_NAME


def deployment_memory_fraction(
    engine: EngineName,
    hardware: HardwareProfile,
    *,
    ranks: tuple[int, int, int],
    prefill_tokens: int | None,
    drafting: bool,
) -> float:
    """The engine's own memory setting for a deployment when the user gives none: the constant of
    default_memory_fraction, except where the engine derives it from the card and layout (SGLang's
    mem_fraction_static formula). ranks = (tp, pp, dp)."""
    return room(engine).default_memory_fraction_at(
        hardware, ranks=ranks, prefill_tokens=prefill_tokens, drafting=drafting
    )


def beyond_pool_words(engine: EngineName, *, max_batch: int, clients: int) -> str:
    """What the engine does, in its own terms, with `clients` sequences when its pool holds fewer at full
    length (max_batch: its running-batch limit): admit and preempt, or queue."""
    return room(engine).beyond_pool_words(max_batch=max_batch, clients=clients)


def decoder_streams_first_token(engine: EngineName) -> bool:
    """True when, under P:D disaggregation, the user's first token comes from the decode instance (so TTFT
    includes the KV pull, decode admission and one decode step)."""
    return room(engine).PD_DECODER_STREAMS_FIRST_TOKEN


def dp_lockstep(dep: Deployment) -> bool:
    """True when the instance's DP ranks step together (every rank runs a forward each step, idle ones a
    dummy, a step lasting as long as the slowest rank's): MoE models always, dense ones as the engine says."""
    return dep.dp > 1 and (dep.model.is_moe or room(dep.engine).DP_LOCKSTEP_DENSE)


def dp_phase_vote(dep: Deployment) -> bool:
    """True when the DP ranks run the phase (prefill or decode) that most of them want (MindIE)."""
    return room(dep.engine).DP_PHASE_VOTE
