"""vLLM's scheduler facts: its per-step token budget, the max_num_seqs / max_num_batched_tokens defaults
(scheduler_defaults, for the release version_for_card picks), preemption and data-parallel stepping, as the
simulator runs them (planner/sim/). Split from planner/engines/vllm/batch.py (which
re-exports what the registry asks); the transformers room borrows them, being simulated with vLLM's
scheduler (planner/engines/transformers/pool.py).
"""

from planner import units
from planner.deployment import Deployment
from planner.engines.vllm.versions import DEFAULT_VERSION, VERSIONS, EngineVersion
from planner.kinds import SchedulerKind
from planner.schema import BUILT_ON_FIRST_USE, Frozen, HardwareProfile

# The scheduler's defaults when `vllm serve` gets no --max-num-seqs / --max-num-batched-tokens (facts 1.6,
# [S]: vllm/engine/arg_utils.py get_batch_defaults, (max_num_batched_tokens, max_num_seqs) of the API
# server): vllm-ascend cannot report device memory to vLLM, so 2048 tokens / 256 sequences per step on every
# card; vLLM on CUDA 8192 / 1024 on a device of >= 70 GiB (not an A100), else 2048 / 256. The simulator
# (planner/sim/run.py through the registry) and the start-up arithmetic (scheduler_defaults below) read
# these.
LARGE_DEFAULTS = (8192, 1024)
SMALL_DEFAULTS = (2048, 256)
LARGE_DEVICE_GIB = 70
# Chunked prefill: on in every release kvplan plans (versions.version_for_card: vllm-ascend main,
# vLLM >= 0.21), both on the V1 scheduler, which always chunks (vllm/v1/core/sched/scheduler.py); the
# simulator's vLLM scheduler (planner/sim/schedulers.py) is that chunked scheduler.
CHUNKED_PREFILL = True
SCHEDULER: SchedulerKind = "vllm"  # the simulator's continuous-batching scheduler (planner/sim/schedulers.py)
# KV blocks as tokens arrive, recompute preemption (vllm/v1/core/sched/scheduler.py)
ADMITS_BEYOND_POOL = True
# No count of prompts per step beyond max_num_seqs and the token budget (the V1 scheduler's only limits)
MAX_PROMPTS_PER_PASS: int | None = None


def beyond_pool_words(*, max_batch: int, clients: int) -> str:
    """What vLLM does with `clients` sequences when its pool holds fewer at full length (ADMITS_BEYOND_POOL),
    max_batch its max_num_seqs."""
    del clients  # how many run is the admission's (serve's engine and queue lines)
    return (
        f"vLLM admits up to max_num_seqs {max_batch}, "
        "allocates KV blocks as tokens arrive and preempts (recompute) when the pool runs out"
    )


# Data parallel (planner/sim/dpgroups.py), vllm/v1/engine/core.py @00080ee1: MoE DP ranks run
# DPEngineCoreProc, whose run_busy_loop executes a dummy batch when the rank ran nothing while others run
# (`if not executed: ... self.execute_dummy_batch()`), so every rank runs a forward each step and a step
# lasts as long as the slowest rank's; non-MoE DP ranks "are completely independent" (run_engine_core).
# Each rank schedules its own step (no shared prefill/decode decision).
DP_PHASE_VOTE = False
DP_LOCKSTEP_DENSE = False
# The fit's prior for what one request costs outside the forward pass (planner/perf/fitted_params.py
# request_overhead_us): x/10 about this. [measured: vllm-ascend on one 910B2, huawei-csl/megagdn-pto
# prefill_20260502_145505 (lab/published/megagdn-ttft.csv): Qwen3.5-0.8B's first token takes 134 ms at 512
# tokens where its kernels take ~9 ms, ~125 ms per request and eager pass. At 10 ms (the other engines'
# prior) the 910B3 vllm-ascend fit without Qwen3-14B's rows put Qwen3-14B's TTFTs 30-64 % short; 100 ms was
# chosen with that held-out table in view: lab/published/phase-table.md]
REQUEST_OVERHEAD_PRIOR_US = 100_000.0


def runs_vllm_ascend(vendor: str) -> bool:
    """kvplan plans vllm-ascend on every card that is not NVIDIA's (versions.version_for_card)."""
    return vendor != "nvidia"


def default_limits(*, ascend: bool, device_total_bytes: int, device_name: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that `vllm serve` uses when they are left out.

    vLLM asks the platform for the device memory; >= LARGE_DEVICE_GIB and not an A100 gives LARGE_DEFAULTS,
    anything else (or an exception) SMALL_DEFAULTS (vllm/engine/arg_utils.py, the `device_memory = 0`
    fallback). vllm-ascend's NPUPlatform.get_device_total_memory raises NotImplementedError on purpose
    ([VA] 182b75ea platform.py:206-213), so vllm-ascend always gets SMALL_DEFAULTS, whatever the card.
    """
    large = device_total_bytes >= LARGE_DEVICE_GIB * units.GIB_BYTES and "a100" not in device_name.lower()
    return LARGE_DEFAULTS if large and not ascend else SMALL_DEFAULTS


def dep_limits(dep: Deployment) -> tuple[int, int]:
    """default_limits for the release kvplan plans on dep's card and the card's device total."""
    hardware = dep.hardware
    return default_limits(
        ascend=runs_vllm_ascend(hardware.vendor),
        device_total_bytes=hardware.device_total_bytes,
        device_name=hardware.name,
    )


# vLLM's SchedulerConfig check (vllm/config/scheduler.py _verify_args, scheduler.py:250-261 @f0de1a604c)
SEQS_RULE = "vLLM refuses max_num_batched_tokens < max_num_seqs, vllm/config/scheduler.py:250-261"


def seqs_cap_words(cap: int) -> str:
    """max_num_seqs' cap at --max-num-batched-tokens `cap` and its rule, in words."""
    return f"--max-num-batched-tokens {cap} ({SEQS_RULE})"


def seqs_cap_notes(cap: int, *, wanted: int, what: str) -> list[str]:
    """The note when --max-num-batched-tokens `cap` holds max_num_seqs below `wanted` sequences (`what`
    says whose number that is: the pool's, the engine's default, the users'); empty when it does not bind."""
    if wanted <= cap:
        return []
    return [
        f"--max-num-seqs is capped at {seqs_cap_words(cap)}; {what} {wanted}: raise --max-prefill-tokens "
        "(--max-num-batched-tokens) to run more at once"
    ]


def default_max_batch(dep: Deployment, *, planned_batch: int) -> int:
    """max_num_seqs' default (default_limits: 256 on Ascend, 1024 or 256 on CUDA by device memory)."""
    return dep_limits(dep)[1]


class SchedulerDefaults(Frozen):
    """What `vllm serve` uses when --max-num-batched-tokens / --max-num-seqs are not given."""

    model_config = BUILT_ON_FIRST_USE

    max_num_batched_tokens: int
    max_num_seqs: int
    reason: str


def scheduler_defaults(
    version: EngineVersion, *, device_total_bytes: int, device_name: str = ""
) -> SchedulerDefaults:
    """`vllm serve` defaults (OpenAI server context) per engine.

    The numbers and the rule are engines/vllm/scheduler.py default_limits (the simulator reads them there):
    >= 70 GiB and not an A100 gives 8192 tokens / 1024 seqs, anything else 2048 / 256; vllm-ascend always
    2048 / 256 ([VA] 182b75ea platform.py:206-213).
    """
    ascend = version.engine == "vllm-ascend"
    tokens, seqs = default_limits(
        ascend=ascend, device_total_bytes=device_total_bytes, device_name=device_name
    )
    if ascend:
        reason = "vllm-ascend cannot report device memory to vLLM (platform.py:206-213): small-GPU defaults"
    elif (tokens, seqs) == LARGE_DEFAULTS:
        reason = "device >= 70 GiB (vLLM arg_utils.py)"
    else:
        reason = "device < 70 GiB or A100 (vLLM arg_utils.py)"
    return SchedulerDefaults(max_num_batched_tokens=tokens, max_num_seqs=seqs, reason=reason)


def version_for_card(hardware: HardwareProfile) -> EngineVersion:
    """The release kvplan plans for: vLLM >= 0.21 on NVIDIA, vllm-ascend main's NPUWorker310 on a 310P chip
    (worker selected by SoC, [VA] 182b75ea _310p/worker_310p.py), vllm-ascend main otherwise."""
    if not runs_vllm_ascend(hardware.vendor):
        return VERSIONS["vllm-cuda"]
    if "310p" in hardware.name.lower():
        return VERSIONS["vllm-ascend-310p"]
    return VERSIONS[DEFAULT_VERSION]


def card_defaults(hardware: HardwareProfile) -> SchedulerDefaults:
    """`vllm serve`'s --max-num-batched-tokens / --max-num-seqs defaults on the card (scheduler_defaults for
    version_for_card)."""
    return scheduler_defaults(
        version_for_card(hardware),
        device_total_bytes=hardware.device_total_bytes,
        device_name=hardware.name,
    )
