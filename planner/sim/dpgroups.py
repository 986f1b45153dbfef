"""Attention data parallel in the simulator (`kvplan simulate --dp D`): one instance of D DP groups.

Each DP group serves its own sequences with its own KV (planner/layout.py): requests go round robin in
arrival order to the D groups (a closed loop of K users: K / D per group, the remainder to the first
groups, each with requests in proportion to its users), and each group is one simulated engine with the
deployment's per-rank KV pool, a batch cap of ceil(instance cap / D) (layout.per_dp_rank_batch) and the
roofline's step of one DP group (the ledger already sends every group's tokens through the experts, split
--ep ways).

Lockstep (registry.dp_lockstep: MoE models, and MindIE's dense ones): the groups run in rounds on one
clock. Each round every group runs one scheduler step of the same number of forward passes (a decode
span only when no group has anything to prefill, its length the least of theirs), a group with nothing to
run a dummy decode of one token; the round lasts as long as the slowest group's step, and every group's
clock (and the first tokens, finishes and closed-loop arrivals stamped in the round) moves to its end.
  vLLM: vllm/v1/engine/core.py DPEngineCoreProc.run_busy_loop (`self.execute_dummy_batch()`).
  MindIE (registry.dp_phase_vote): the groups with work vote prefill or decode and all run the majority's
  (a tie: prefill), pre_scheduler.cpp DecidePDPriority; a group outvoted into a prefill it has none for
  runs a dummy pass (its decodes pause), and after an empty step votes decode (scheduler.cpp,
  lastScheduleEmpty_). Not modelled: vLLM pads every rank's tokens to the largest rank's.
Otherwise (vLLM dense) the groups run independently. The summary is the instance's: all requests,
max_batch_reached and kv_peak_fraction the largest over the groups.
"""

from __future__ import annotations

import math

import numpy as np

from planner.arrays import IntArray
from planner.deployment import Deployment
from planner.engines import registry
from planner.errors import PlanInputError
from planner.perf import roofline
from planner.sim import instance, run, schedulers
from planner.sim.engine import MAX_SPAN_STEPS, Engine
from planner.sim.metrics import Records
from planner.sim.workload import Workload


def group_ids(work: Workload, *, dp: int) -> list[tuple[IntArray, int | None]]:
    """(request ids, users) of each DP group. Open loop: round robin in arrival order. Closed loop of K
    users: K / D users per group (the remainder to the first groups), and request ids in proportion to its
    users (contiguous), so the groups run for about as long."""
    count = work.requests
    if work.concurrency is None or work.arrival_s is not None:
        order = np.argsort(work.arrival_s if work.arrival_s is not None else np.arange(count), kind="stable")
        return [(order[group::dp], None) for group in range(dp)]
    users = [work.concurrency // dp + (group < work.concurrency % dp) for group in range(dp)]
    ends = np.cumsum([count * u // work.concurrency for u in users])
    ends[-1] = count
    starts = np.concatenate([[0], ends[:-1]])
    return [(np.arange(lo, hi), max(u, 1)) for lo, hi, u in zip(starts, ends, users, strict=True)]


def group_workloads(work: Workload, *, dp: int) -> list[tuple[IntArray, Workload]]:
    """(request ids, workload) of each DP group (group_ids); groups left without requests are dropped."""
    parts = []
    for index, users in group_ids(work, dp=dp):
        if index.size == 0:
            continue
        arrival = None if work.arrival_s is None else work.arrival_s[index]
        parts.append((index, Workload(work.input_tokens[index], work.output_tokens[index], arrival, users)))
    return parts


def run_groups(
    dep: Deployment, work: Workload, *, knobs: dict[str, object], lockstep: bool | None = None
) -> list[tuple[IntArray, Engine]]:
    """One engine per DP group, run to completion on its share of the requests: in lockstep when the
    engine steps its ranks together (registry.dp_lockstep; `lockstep` overrides it), else each on its own."""
    knobs_of_group = run.group_knobs(dep, knobs)
    runs = []
    for index, part in group_workloads(work, dp=dep.dp):
        cfg = run.default_config(dep, workload=part, **knobs_of_group)
        instance.check_config(cfg, workload=part)
        runs.append((index, part, cfg, run.build_table(dep, cfg, part)))
    if not (registry.dp_lockstep(dep) if lockstep is None else lockstep):
        return [(index, instance.run_engine(cfg, table, part)) for index, part, cfg, table in runs]
    engines = [instance.make_engine(cfg, table, part) for _, part, cfg, table in runs]
    run_lockstep(engines, vote=registry.dp_phase_vote(dep))
    return [(index, eng) for (index, *_), eng in zip(runs, engines, strict=True)]


def busy(eng: Engine) -> bool:
    """Whether the engine has anything to run now (queued, prefilling or decoding)."""
    return bool(eng.running or eng.waiting or eng.prefilling)


def round_steps(engines: list[Engine], t_s: float) -> int:
    """Forward passes of the next round: 1 when any group has something to prefill or nothing to decode,
    else the shortest decode span of the groups, cut at the step boundary at or after the next arrival at
    any group (with the slowest group's step)."""
    steps = MAX_SPAN_STEPS
    for eng in engines:
        eng.span_cap = MAX_SPAN_STEPS
        if busy(eng):
            if eng.waiting or eng.prefilling or not eng.running:
                return 1
            steps = min(steps, eng.span_steps())
    upcoming = min(eng.next_arrival_s() for eng in engines)
    if upcoming < math.inf and steps > 1:
        step_s = max(
            eng.table.decode_s(len(eng.running), eng.mean_ctx_tokens()) for eng in engines if busy(eng)
        )
        steps = min(steps, max(1, math.ceil((upcoming - t_s) / step_s)))
    return steps


def vote_prefill(engines: list[Engine], last_empty: list[bool]) -> bool:
    """MindIE's shared priority: every group computes its own (a group whose last step was empty while it
    decodes wants decode); the groups with work vote; prefill when at least half of them want it."""
    wants = [
        False if (empty and eng.running) else schedulers.mindie_wants_prefill(eng)
        for eng, empty in zip(engines, last_empty, strict=True)
    ]
    votes = [want for eng, want in zip(engines, wants, strict=True) if busy(eng)]
    prefill = sum(votes)
    return prefill >= len(votes) - prefill


def settle(eng: Engine, *, marks: tuple[int, int, int], end_s: float) -> None:
    """Move the engine's clock to the round's end, and with it what the round stamped at the engine's own
    step end: first tokens of requests that joined, finishes, closed-loop arrivals issued."""
    own_end_s = eng.t
    joined, done, issued = marks
    for request in eng.joined[joined:]:
        if eng.first[request] == own_end_s:
            eng.first[request] = end_s
    for request in eng.done[done:]:
        eng.finish[request] = end_s
    for request in range(issued, eng.issued):
        eng.arrival[request] = end_s
    eng.joined.clear()
    eng.done.clear()
    eng.t = end_s


def run_round(
    engines: list[Engine], *, t_s: float, steps: int, prefill: bool | None, last_empty: list[bool]
) -> float:
    """One lockstep round from t_s: every busy group runs one step of `steps` forward passes (MindIE's voted
    phase when prefill is not None); returns the round's end (the slowest group's step, at least a dummy's;
    when nobody ran, the first queue delay's end or arrival, or t_s after an outvoted round)."""
    forward_s, waited_s, marks = 0.0, math.inf, []
    for number, eng in enumerate(engines):
        eng.span_cap = steps
        marks.append((len(eng.joined), len(eng.done), eng.issued))
        before = (eng.step, eng.prefill_tokens)
        if busy(eng) and prefill is not None:
            schedulers.mindie_run(eng, prefill=prefill, pause_decodes=True)
        elif busy(eng):
            schedulers.step(eng)
        ran = (eng.step, eng.prefill_tokens) != before
        last_empty[number] = not ran
        if ran:
            forward_s = max(forward_s, eng.t - t_s)
        elif eng.t > t_s:  # an idle MindIE group waiting for its queue delay
            waited_s = min(waited_s, eng.t - t_s)
    if forward_s > 0.0:
        end_s = t_s + max(forward_s, steps * min(eng.table.decode_s(1, 1.0) for eng in engines))
    else:
        gap_s = min(waited_s, min(eng.next_arrival_s() for eng in engines) - t_s)
        end_s = t_s + gap_s if gap_s < math.inf else t_s
    for eng, mark in zip(engines, marks, strict=True):
        settle(eng, marks=mark, end_s=end_s)
    return end_s


def run_lockstep(engines: list[Engine], *, vote: bool) -> None:
    """Run the groups' engines to completion in lockstep rounds (module docstring)."""
    counts = [len(eng.prompt) for eng in engines]
    last_empty = [False] * len(engines)
    t_s, loops, still = 0.0, 0, 0
    while any(eng.finished < count for eng, count in zip(engines, counts, strict=True)):
        loops += 1
        if loops > instance.MAX_ENGINE_LOOPS:
            raise PlanInputError(
                f"--requests: the lockstep simulation needs more than {instance.MAX_ENGINE_LOOPS} rounds "
                f"(got {sum(counts)} requests; expected fewer, shorter ones or larger batch/token limits)"
            )
        for eng in engines:
            eng.admit_arrivals()
            eng.record()
        if not any(busy(eng) for eng in engines):
            t_s = max(t_s, min(eng.next_arrival_s() for eng in engines))
            for eng in engines:
                eng.t = t_s
            continue
        steps = round_steps(engines, t_s)
        prefill = vote_prefill(engines, last_empty) if vote else None
        end_s = run_round(engines, t_s=t_s, steps=steps, prefill=prefill, last_empty=last_empty)
        still = still + 1 if end_s == t_s and all(last_empty) else 0
        if still > 2:  # outvoted, then decode voted, and still nothing ran: a queue head that never fits
            schedulers.raise_stuck(next(eng for eng in engines if eng.waiting))
        t_s = end_s
    for eng in engines:
        eng.record()


def simulate_dp(
    dep: Deployment,
    work: Workload,
    *,
    slo: tuple[float | None, float | None],
    knobs: dict[str, object],
    lockstep: bool | None = None,
) -> instance.SimResult:
    """The workload through the instance's DP groups (module docstring) -> one summary for the instance
    (lockstep: None as the engine does, False the groups independent, as before issue 23)."""
    runs = run_groups(dep, work, knobs=knobs, lockstep=lockstep)
    columns = {
        name: np.zeros(work.requests) for name in ("arrival_s", "first_token_s", "finish_s", "preemptions")
    }
    for index, eng in runs:
        local = instance.records_of(eng)
        for name, values in columns.items():
            values[index] = getattr(local, name)
    records = Records(
        arrival_s=columns["arrival_s"],
        input_tokens=work.input_tokens,
        output_tokens=work.output_tokens,
        first_token_s=columns["first_token_s"],
        finish_s=columns["finish_s"],
        preemptions=columns["preemptions"].astype(np.int64),
    )
    engines = [eng for _, eng in runs]
    stats, timeline = instance.fleet_stats(
        records, engines, prefill_tokens=sum(eng.prefill_tokens for eng in engines)
    )
    cfg = runs[0][1].cfg
    calibrated, closed = roofline.is_calibrated(dep), work.arrival_s is None
    summary = instance.summary_of(records, stats, cfg=cfg, calibrated=calibrated, slo=slo, closed_loop=closed)
    return instance.SimResult(summary=summary, records=records, timeline=timeline)
