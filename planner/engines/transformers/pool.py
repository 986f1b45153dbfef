"""Hugging Face transformers as the planner asks it: tensor parallelism only, the engine-neutral KV bound,
its unfused kernels; the simulator runs it with vLLM's continuous-batching scheduler and defaults
[assumed: transformers has no serving scheduler of its own]. The registry (planner/engines/registry.py)
asks this module.
"""

from __future__ import annotations

from planner import deployment, layout
from planner.arrays import IntArray
from planner.deployment import Deployment
from planner.engines import common
from planner.engines.vllm import scheduler as vllm_scheduler
from planner.errors import PlanInputError
from planner.kinds import EngineName
from planner.results import MemoryBreakdown, Plan, Recommendation

SCHEDULER = vllm_scheduler.SCHEDULER
# transformers + fla reads and writes the fp32 state twice per decode step (planner/perf/kernels.py)
# [measured: h200-run5 gdn_*.json, 27B shape at batch 64: recurrent kernel 138 us + copies 136 us].
ADMITS_BEYOND_POOL = vllm_scheduler.ADMITS_BEYOND_POOL  # simulated with vLLM's scheduler
beyond_pool_words = vllm_scheduler.beyond_pool_words  # simulated with vLLM's scheduler: its words
PD_DECODER_STREAMS_FIRST_TOKEN = False  # no P:D serving of its own
PREFILL_AT_LEAST_INPUT = False  # no config of its own to check
MAX_PROMPT_TOKENS: int | None = None
MODEL_NAME_PATTERN: str | None = None  # names its own server: any
MODEL_NAME_RULE: str | None = None
BATCH_CAP_RULE = ""  # no batch limit of its own (batch_cap None)
DEFAULT_MEMORY_FRACTION = deployment.DEFAULT_MEMORY_FRACTION  # no engine setting of its own: the plan default
RUNTIME_SOURCE = "card profile"  # runtime_overhead_gib
LAYOUT_BUFFER_NOTES: dict[str, str] = {}  # all in runtime: capacity.runtime_bytes adds them to the reserve
MEMORY_FRACTION_NAME = "--memory-fraction"  # no engine setting of its own: kvplan's flag names it
STATE_PASSES = 4
DP_PHASE_VOTE = vllm_scheduler.DP_PHASE_VOTE  # simulated with vLLM's scheduler
DP_LOCKSTEP_DENSE = vllm_scheduler.DP_LOCKSTEP_DENSE
MAX_PROMPTS_PER_PASS = vllm_scheduler.MAX_PROMPTS_PER_PASS  # simulated with vLLM's scheduler
REQUEST_OVERHEAD_PRIOR_US = 10_000.0  # a local generate() call: no API server [assumed]
FUSED_KERNELS = False  # transformers' eager modules (planner/perf/kernels.py TRANSFORMERS)
SUPPORTS_PIPELINE = False
GATHERS_MOE_OUTPUTS = False
DEVICE_LAUNCHED_COLLECTIVES = False  # torch.distributed: HCCL (or NCCL) through the host
FITTED_PROFILE_ENGINE: EngineName = "transformers"  # its own fit (hwprofiles/fitted/)
DRAFT_METHODS: tuple[str, ...] = ()  # kvplan's transformers reference runs decode without a drafter
EXPERTS_OVER_WHOLE_GROUP: str | None = None  # no expert parallelism: check_layout refuses ep > 1


def check_kv_dtype(dep: Deployment) -> None:
    """transformers' caches take every KV dtype the card has natively (checked by the core)."""


def weight_dtype_refusal(dep: Deployment) -> None:
    """None: transformers runs every weight dtype eagerly, fp32 included (torch_dtype=float32)."""
    return None


def batch_cap(dep: Deployment) -> None:
    """None: no batch limit beyond memory."""
    return None


def check_layout(dep: Deployment) -> None:
    """PlanInputError for anything beyond tensor parallelism within one node."""
    if not dep.is_tp_only:
        raise PlanInputError(
            f"--engine: transformers plans plain tensor parallelism within one node only, without --dp, "
            f"--ep, --pp, --nodes or --devices-per-node (got {layout.describe(dep)}, "
            f"{layout.devices_per_node(dep)} devices per node); use mindie or vllm"
        )


def max_batch_grid(dep: Deployment, mem: MemoryBreakdown, *, ctx_tokens: IntArray) -> IntArray:
    """The engine-neutral bound floor(kv_budget / per-sequence bytes) (common.kv_bound_grid)."""
    return common.kv_bound_grid(dep, mem, ctx_tokens=ctx_tokens)


def sequence_bytes(dep: Deployment, mem: MemoryBreakdown) -> int:
    """Bytes one sequence of ctx holds: the plan's per-sequence bytes (kv_bound_grid's divisor)."""
    return mem.kv_bytes_per_sequence


def check_holds_one(dep: Deployment, mem: MemoryBreakdown, *, max_batch: int) -> None:
    """Nothing beyond the core's check that one sequence fits the budget."""


def block_pool(dep: Deployment, mem: MemoryBreakdown, *, max_model_len: int) -> common.BlockPool:
    """Whole blocks of the budget, state as whole blocks per sequence (no reserved block)."""
    return common.plain_block_pool(dep, mem)


def default_max_batch(dep: Deployment, *, planned_batch: int) -> int:
    """vLLM's max_num_seqs default (the simulator's scheduler for transformers)."""
    return vllm_scheduler.default_max_batch(dep, planned_batch=planned_batch)


def prefix_cache_block_tokens(dep: Deployment) -> int:
    """Tokens per prefix-cache block: the plan's block size (a transformers server has no prefix cache of its
    own; --prefix-cached-fraction then describes a cache in front of it, block-aligned like vLLM's)."""
    return dep.block_size_tokens


def engine_notes(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]:
    """Nothing to add."""
    return []


def startup_lines(dep: Deployment, mem: MemoryBreakdown, rec: Recommendation) -> list[str]:
    """transformers has no KV pool of its own to log at start-up."""
    return []


def config_words(plan: Plan, dep: Deployment) -> None:
    """No serving config kvplan writes for Transformers."""
    return None


startup_budget = common.own_budget  # the plan's KV budget is kvplan's own formula
default_prefill_tokens = common.one_pass_prefill  # a prompt in one pass: the plan's default
default_memory_fraction_at = common.constant_memory_fraction(DEFAULT_MEMORY_FRACTION)
