"""P:D disaggregation with back-pressure, open or closed loop: every instance advances together.

Each prefill and decode instance is an Engine (planner/sim/engine.py) over the run's request ids. A
coordinator always steps the instance furthest behind in time and moves requests between them:
    arrival        -> a prefill instance (round robin in arrival order); closed loop: the first K at time 0,
                      then one each time a request finishes on a decode instance
    prefill end    -> first token out (MindIE: TTFT ends); the KV is ready for a decode instance after
                      kv_transfer_s (round robin in order of readiness, as the reference); vLLM: the proxy
                      discards this token and the user's first token is the decode instance's first step
                      after admission (pdspec.decoder_emits_first)
    decode admits  -> only now does the prefill instance free the request's blocks (back-pressure: while
                      the decode instances are full its KV stays where it was computed, and a prefill
                      instance whose free blocks cannot hold the next prompt waits)
A decode instance never decodes past the earliest moment another instance could hand it work (its
horizon: pending hand-overs, the prefill instances' clocks and, when a finish or an admission can lead to
new work through a prefill pass, the other decode instances' clocks plus the shortest pass), so no
hand-over is missed. With decode capacity to spare this is the open-loop model
of planner/sim/pd.py (tests/test_sim_pdloop.py).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from planner.errors import PlanInputError
from planner.perf import roofline
from planner.sim import instance, run, schedulers
from planner.sim.engine import Engine
from planner.sim.metrics import Records
from planner.sim.pdspec import PdSpec, decoder_emits_first, kv_transfer_s
from planner.sim.workload import Workload

MAX_PD_CELLS = 8_000_000  # requests x instances: each instance keeps per-request state for the whole run


def engines_for(
    spec: PdSpec, work: Workload, *, knobs: dict[str, object], arrival_s: list[float]
) -> tuple[list[Engine], list[Engine]]:
    """P x dp_prefill prefill engines (outputs cut to the first token, holding KV until released) and
    D x dp_decode decode engines, each over every request id: every DP group of an instance is an engine of
    its own, with its rank's KV pool, one DP group's step and its batch cap (run.group_knobs), and
    requests go round robin over all of one side's groups. The groups of one instance are not stepped in
    lockstep here (dpgroups' rounds) [assumed: with equal requests round robin keeps them balanced, where
    coupled and independent groups agree, docs/simulate.md]. Hand-overs arrive through the coordinator;
    `arrival_s` (shared, filled as requests are sent) only gives MindIE's queue delay its start."""
    count = work.requests
    groups = spec.prefill_groups + spec.decode_groups
    if count * groups > MAX_PD_CELLS:
        raise PlanInputError(
            f"--requests: too many for --pd with {groups} instances x DP groups "
            f"(got {count}, expected requests x groups <= {MAX_PD_CELLS})"
        )
    prompt, output = work.input_tokens.tolist(), work.output_tokens.tolist()
    sides = []
    for dep, extra, outputs, instances in (
        (spec.prefill, {}, [1] * count, spec.prefill_groups),
        (spec.decode, {"scheduler": "decode"}, output, spec.decode_groups),
    ):
        cfg = run.default_config(dep, workload=work, **{**run.group_knobs(dep, knobs), **extra})
        table = run.build_table(dep, cfg, work)
        instance.check_config(cfg, workload=work)
        engines = [Engine(cfg, table, requests=(prompt, outputs, arrival_s)) for _ in range(instances)]
        for eng in engines:
            eng.issued, eng.own_arrivals, eng.hold_kv = count, False, not extra
            eng.decoder_emits_first = bool(extra) and decoder_emits_first(spec)
        sides.append(engines)
    return sides[0], sides[1]


def is_busy(eng: Engine) -> bool:
    """Has work queued or in flight."""
    return bool(eng.running or eng.waiting or eng.prefilling)


def is_held_up(eng: Engine) -> bool:
    """A prefill instance that cannot start its next prompt until a decode instance takes held KV."""
    if eng.running or eng.prefilling or not eng.waiting or not eng.holding:
        return False
    return eng.cfg.total_blocks - eng.used_blocks < eng.admission_blocks(eng.waiting[0])


class StepBudgetError(PlanInputError):
    """The fleet needs more steps than its budget (Fleet.run's max_loops)."""


class Fleet:
    """The coordinator: engines, pending hand-overs (a heap per engine) and the run's records."""

    def __init__(self, spec: PdSpec, work: Workload, *, knobs: dict[str, object]) -> None:
        count = work.requests
        self.arrival, self.first, self.finish = [math.inf] * count, [math.nan] * count, [math.nan] * count
        self.prefill, self.decode = engines_for(spec, work, knobs=knobs, arrival_s=self.arrival)
        self.engines = self.prefill + self.decode
        self.pending: list[list[tuple[float, int]]] = [[] for _ in self.engines]
        self.owner = [0] * count
        self.transfer_s = kv_transfer_s(spec, prompt_tokens=work.input_tokens).tolist()
        self.issued = self.handed = self.finished = 0
        self.ready: list[tuple[float, int]] = []  # prefilled, not yet handed to a decode instance
        # no hand-over comes sooner than one prefill step (of one token at least) plus the shortest transfer
        self.min_return_s = self.prefill[0].table.pass_s(1.0, 1.0) + min(self.transfer_s)
        self.closed = work.arrival_s is None
        if work.arrival_s is None:
            for request in range(min(work.concurrency or 1, count)):
                self.arrive(request, 0.0)
        else:
            for request, at in enumerate(work.arrival_s.tolist()):
                self.arrive(request, at)

    def arrive(self, request: int, at: float) -> None:
        """A request is sent at `at`: to the next prefill instance in turn, which sees it the per-request cost
        outside the forward pass later (StepTable.request_overhead_s: API server, tokenization), as an
        aggregated engine does (Engine.next_arrival_s)."""
        self.arrival[request] = at
        owner = self.owner[request] = self.issued % len(self.prefill)
        heapq.heappush(self.pending[owner], (at + self.prefill[owner].table.request_overhead_s, request))
        self.issued += 1

    def action_s(self, index: int) -> float:
        """When engine `index` next acts: now if busy, at its first pending hand-over if idle; never while
        held up (a release wakes it)."""
        eng, pending = self.engines[index], self.pending[index]
        if is_held_up(eng):
            return math.inf
        if is_busy(eng):
            return eng.t
        return max(eng.t, pending[0][0]) if pending else math.inf

    def horizon_s(self, index: int) -> float:
        """The earliest time another instance could hand decode engine `index` work: its pending hand-overs,
        the prefill instances' next actions plus one step and a transfer (min_return_s), and (closed loop, or
        a prefill instance held up) another decode instance's clock plus min_return_s: a request it finishes
        comes back, or a request it admits frees held KV, only through a new prefill step."""
        times = [queue[0][0] for queue in (self.pending[index], self.ready) if queue]
        times += [self.action_s(p) + self.min_return_s for p in range(len(self.prefill))]
        if self.closed or any(is_held_up(p) for p in self.prefill):
            first = len(self.prefill)
            times += [
                self.action_s(d) + self.min_return_s for d in range(first, len(self.engines)) if d != index
            ]
        return min(times, default=math.inf)

    def deliver(self, index: int) -> None:
        """Queue every hand-over due by the engine's clock."""
        eng, pending = self.engines[index], self.pending[index]
        while pending and pending[0][0] <= eng.t:
            _, request = heapq.heappop(pending)
            eng.waiting.append(request)
            eng.arrived += 1

    def step(self, index: int, at: float) -> None:
        """Advance engine `index` (its clock moved to `at`): deliver, one scheduler step, hand-overs."""
        eng = self.engines[index]
        eng.t = max(eng.t, at)
        self.deliver(index)
        if is_held_up(eng) or not is_busy(eng):
            return
        decoding = index >= len(self.prefill)
        eng.horizon_s = self.horizon_s(index) if decoding else math.inf
        start = eng.t
        eng.record()
        schedulers.step(eng)
        if decoding:
            self.after_decode(eng, start)
        else:
            self.after_prefill(eng)

    def after_prefill(self, eng: Engine) -> None:
        """Prefilled requests: first token out; their KV is ready for decode after the transfer."""
        for request in eng.done:
            self.first[request] = eng.finish[request]
            heapq.heappush(self.ready, (self.first[request] + self.transfer_s[request], request))
        eng.done.clear()
        eng.joined.clear()

    def assign_ready(self) -> None:
        """Hand KV to decode instances round robin in order of readiness: every request ready before any
        prefill instance could make another one ready (its next action + one step + the shortest transfer)."""
        bound = min(self.action_s(p) for p in range(len(self.prefill))) + self.min_return_s
        while self.ready and self.ready[0][0] <= bound:
            ready, request = heapq.heappop(self.ready)
            target = len(self.prefill) + self.handed % len(self.decode)
            self.handed += 1
            heapq.heappush(self.pending[target], (ready, request))

    def after_decode(self, eng: Engine, start: float) -> None:
        """Admitted requests free their prefill blocks (at `start`); finished ones end (closed loop: the user
        sends the next request)."""
        for request in eng.joined:
            source = self.prefill[self.owner[request]]
            source.release(request)
            if not (source.running or source.prefilling):
                source.t = max(source.t, start)
        eng.joined.clear()
        for request in eng.done:
            self.finish[request] = eng.finish[request]
            if eng.decoder_emits_first:
                self.first[request] = eng.first[request]
            self.finished += 1
            if self.closed and self.issued < len(self.arrival):
                self.arrive(self.issued, self.finish[request])
        eng.done.clear()

    def run(self, *, max_loops: int | None = None) -> None:
        """Step the instance furthest behind until every request has finished; PlanInputError past
        max_loops steps (default MAX_ENGINE_LOOPS per engine: bounded time)."""
        loops, count = 0, len(self.arrival)
        limit = instance.MAX_ENGINE_LOOPS * len(self.engines) if max_loops is None else max_loops
        while self.finished < count:
            self.assign_ready()
            times = [self.action_s(i) for i in range(len(self.engines))]
            index = int(np.argmin(times))
            if times[index] == math.inf:
                raise PlanInputError(
                    f"--pd: the fleet stalled with {count - self.finished} requests unfinished (got blocks "
                    f"held on every prefill instance, expected a decode instance free to take them)"
                )
            loops += 1
            if loops > limit:
                raise StepBudgetError(
                    f"--requests: the P:D simulation needs more than {loops - 1} steps (got {count} "
                    "requests; expected fewer, shorter ones or more instances)"
                )
            self.step(index, times[index])


def simulate_fleet(
    spec: PdSpec,
    work: Workload,
    *,
    slo: tuple[float | None, float | None],
    knobs: dict[str, object],
    max_loops: int | None = None,
) -> instance.SimResult:
    """Open- or closed-loop workload through the P:D fleet with back-pressure -> one instance's summary
    (max_loops: Fleet.run's step budget)."""
    fleet = Fleet(spec, work, knobs=knobs)
    fleet.run(max_loops=max_loops)
    preempted = np.sum([np.asarray(e.preempted, dtype=np.int64) for e in fleet.engines], axis=0)
    records = Records(
        arrival_s=np.asarray(fleet.arrival, dtype=np.float64),
        input_tokens=work.input_tokens,
        output_tokens=work.output_tokens,
        first_token_s=np.asarray(fleet.first, dtype=np.float64),
        finish_s=np.asarray(fleet.finish, dtype=np.float64),
        preemptions=preempted,
    )
    for eng in fleet.decode:
        eng.record()
    cfg = fleet.decode[0].cfg
    stats, timeline = instance.fleet_stats(
        records, fleet.decode, prefill_tokens=sum(eng.prefill_tokens for eng in fleet.prefill)
    )
    calibrated = roofline.is_calibrated(spec.decode)
    closed = work.arrival_s is None
    summary = instance.summary_of(records, stats, cfg=cfg, calibrated=calibrated, slo=slo, closed_loop=closed)
    notes = (ttft_note(spec), SINGLE_CARD_SEPARATION)
    return instance.SimResult(
        summary=summary.model_copy(update={"notes": notes}), records=records, timeline=timeline
    )


# What --pd is not: the seed article's 950PR run separated prefill from decode inside one process on one card
# (its P95 TTFT 1.05 -> 0.63 s); kvplan's P:D is separate instances joined by a link, and the one-card kind is
# not modelled (issue 23). Printed with every P:D result.
SINGLE_CARD_SEPARATION = (
    "P:D here is separate instances joined by a KV link; prefill and decode separated inside one process on "
    "one card (the seed article's 950PR run) is not modelled"
)


def ttft_note(spec: PdSpec) -> str:
    """What a P:D TTFT is made of for the fleet's engine (pdspec.decoder_emits_first)."""
    if decoder_emits_first(spec):
        return (
            "P:D TTFT = prefill + KV pull over the link + the wait for a decode slot + one decode step "
            "(the decode instance streams the first token)"
        )
    return "P:D TTFT ends with the prefill (the prefill instance's token) [assumed]"
