"""MindIE's scheduler facts: ScheduleConfig defaults and how its C++ scheduler decides each step.

Split from planner/engines/mindie/pool.py (which re-exports what the registry asks) so the simulator's
scheduler knobs (planner/sim/config.py, planner/sim/schedulers.py) read them without the pool arithmetic.
Sources as in pool.py: [DOC] = MindIE-LLM docs/zh/user_guide/user_manual/service_parameter_configuration.md
(master 8b4871ad31f5); facts file ascend-mindie-facts.md section 1.2.
"""

from __future__ import annotations

from planner.kinds import SchedulerKind

# ScheduleConfig defaults ([DOC]; facts 1.2, [P]): maxPrefillBatchSize 50, maxPrefillTokens 8192,
# prefillTimeMsPerReq 150, decodeTimeMsPerReq 50, maxQueueDelayMicroseconds 5000, supportSelectBatch false.
DEFAULT_MAX_PREFILL_BATCH = 50
DEFAULT_PREFILL_TIME_PER_REQ_MS = 150
DEFAULT_DECODE_TIME_PER_REQ_MS = 50
DEFAULT_QUEUE_DELAY_US = 5000
MAX_TIME_PER_REQ_MS = 1000  # prefillTimeMsPerReq / decodeTimeMsPerReq range [0, 1000] ([DOC])
SCHEDULER: SchedulerKind = "mindie"  # the simulator's prefill-priority scheduler (planner/sim/schedulers.py)
ADMITS_BEYOND_POOL = False  # the running batch is capped at maxBatchSize, the rest queue
# Prompts one prefill batch takes at most, whatever the token budget: maxPrefillBatchSize (the configs kvplan
# writes keep its default: engines/mindie/config.py), as the simulator's MindIE scheduler caps it
MAX_PROMPTS_PER_PASS: int | None = DEFAULT_MAX_PREFILL_BATCH


def beyond_pool_words(*, max_batch: int, clients: int) -> str:
    """What MindIE does with `clients` sequences when its blocks hold fewer at full length
    (ADMITS_BEYOND_POOL), max_batch its maxBatchSize."""
    del clients  # how many queue is the admission's (serve's queue note), not clients - maxBatchSize
    return f"MindIE runs at most maxBatchSize {max_batch} and queues the rest"


# Data parallel (planner/sim/dpgroups.py). Every DP rank shares its priority (prefill or decode) and the
# ranks run the majority's: PreScheduler::DecidePDPriority, src/scheduler/pre_scheduler.cpp L85-101
# @ecfc8d2c (ranks with empty queues do not vote; a tie goes to prefill, L99). [assumed: the sync
# (Scheduler::Schedule(needSync)) runs whenever dp > 1, dense models too; idle ranks run a dummy pass.]
DP_PHASE_VOTE = True
DP_LOCKSTEP_DENSE = True
# The fit's prior for one request's cost outside the forward pass (planner/perf/fitted_params.py
# request_overhead_us), x/10 about this. [assumed: no MindIE per-request measurement; vllm-ascend's 100 ms
# (engines/vllm/scheduler.py) made the 910B3 MindIE rows' leave-one-model-out worse (TTFT 42 -> 66 %, TPOT
# 92 -> 169 %: lab/published/phase-table.md), so MindIE keeps 10 ms]
REQUEST_OVERHEAD_PRIOR_US = 10_000.0
# Scheduler facts from MindIE-LLM's C++ scheduler (src/scheduler/; scheduler.cpp @4edba991, others @ecfc8d2c):
# - prefill waits until the oldest waiting request has waited maxQueueDelayMicroseconds, decoding meanwhile
#   (Scheduler::DecidePDPriority -> !ShouldImmediatePrefill() gives DECODE_FIRST); a full prefill batch
#   skips the wait only when maxQueueDelayMicroseconds exceeds its default 5000 (ShouldImmediatePrefill;
#   scheduler.h defaultMaxQueueDelayMicroseconds = 5000)
# - no prefill while free blocks < 5 % of all blocks and nothing is swapped in (PRESERVED_FACTOR_FOR_DECODE =
#   0.05 in scheduler.h; reserveBlockNum4Decode in DecidePDPriority); not under supportSelectBatch, whose
#   stage policy decides first
DECODE_RESERVE_FRACTION = 0.05
# - when a running sequence cannot get a block, the running queue's last sequence is preempted by
#   recompute (its blocks freed, back to waiting) unless fewer than maxPreemptCount (default 0) were swapped
#   this step (FcfsPolicy::ApplyToRunningQueue / Preempt, src/scheduler/policy/fcfs_policy.cpp): at the
#   default, always recompute, as the simulator does (planner/sim/engine.py preempt)
QUEUE_DELAY_SHORTCUT_ABOVE_US = 5000
