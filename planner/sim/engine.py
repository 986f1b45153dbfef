"""The step-driven core of the simulator: one serving instance, its queue, KV blocks and decode batch.

Time advances one engine step at a time while prefills run, and by *decode spans* in between: while the
batch does not change (no arrival, completion or block shortage), k decode steps cost
k * decode_s(batch, ctx at the span's middle) in one update, so no Python work is done per token.
Every running sequence gains `a` tokens per decode step (a = expected tokens per step with MTP, 1
without), so with D the count of decode steps so far a sequence that joined at D_i with g_i tokens holds
ctx_i = prompt_i + g_i + (D - D_i) * a tokens, and the batch's total context is
sum_i (prompt_i + g_i - D_i * a) + B * D * a: one running sum, updated on join and leave.
Completions and block boundaries are heap events keyed by decode step; a block boundary with no free
block preempts the lowest-priority sequence (the last admitted; vLLM's recompute policy): its blocks are
freed and it re-enters the queue's head to prefill prompt + generated tokens again.
The schedulers (planner/sim/schedulers.py) decide what each step runs.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque

from planner.perf.prefix import prefix_hit_tokens
from planner.sim.config import SchedulerConfig, blocks_for
from planner.sim.steptable import StepTable

MAX_SPAN_STEPS = 4096  # decode steps per span at most (bounds the midpoint-context approximation)
EPSILON = 1e-9  # tokens: guards ceil() of an exact quotient against rounding


class Engine:
    """Mutable state of one simulated instance (plain Python lists: indexing numpy scalars is slower)."""

    def __init__(
        self, cfg: SchedulerConfig, table: StepTable, *, requests: tuple[list[int], list[int], list[float]]
    ) -> None:
        self.cfg, self.table = cfg, table
        self.prompt, self.output, self.arrival = requests
        count = len(self.prompt)
        self._init_request_state(count)
        self._init_queues(count)
        self._init_trace()
        self._init_coordination()

    def _init_request_state(self, count: int) -> None:
        """Per-request lists (one entry per request, by index): times, progress, KV held."""
        self.first = [math.nan] * count
        # vLLM P:D decode instance: the proxy discards the prefill instance's token and streams the decoder's,
        # so a request's first token is the end of its first decode step here (planner/sim/pd.py)
        self.decoder_emits_first = False
        self.first_pending: list[int] = []
        self.finish = [math.nan] * count
        self.preempted = [0] * count
        self.generated = [0] * count  # tokens generated before the current prefill (after preemption)
        self.held = [0] * count  # KV blocks held
        self.epoch = [0] * count  # invalidates heap entries of a request that left the batch
        self.base = [0.0] * count  # prompt + g - D_join * a, while decoding
        self.join = [0] * count
        self.g0 = [0.0] * count
        self.delivered = [0.0] * count  # tokens generated when the request completed

    def _init_queues(self, count: int) -> None:
        """The clock, the queues and heaps the loop works through, and the run's counters."""
        self.t = 0.0
        self.step = 0
        self.base_sum = 0.0
        self.used_blocks = 0
        self.running: dict[int, None] = {}  # decoding, in admission order
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []  # vLLM: admitted, prompt partly computed
        self.prefill_done = [0] * count
        self.finish_heap: list[tuple[int, int, int]] = []
        self.block_heap: list[tuple[int, int, int]] = []
        self.arrived = 0
        self.issued = count
        self.finished = 0
        self.preemptions = 0
        self.prefill_tokens = 0  # prompt tokens computed, recomputation included
        self.decode_waste_s = 0.0  # MindIE supportSelectBatch: accumulatedDecodeWasteTime

    def _init_trace(self) -> None:
        """The event trace record() appends to, and its bound append methods."""
        # (time, in system, batch, used blocks, waiting) after each event and after each step's admissions
        # (record). Typed arrays: they append as fast as lists, and timeline_of copies each buffer once
        # instead of converting element by element
        self.trace: tuple[array[float], array[int], array[int], array[int], array[int]] = (
            array("d"),
            array("q"),
            array("q"),
            array("q"),
            array("q"),
        )
        times, in_system, batch, blocks, waiting = self.trace  # record() runs once an event: bound appends
        self.trace_appends = (times.append, in_system.append, batch.append, blocks.append, waiting.append)

    def _init_coordination(self) -> None:
        """What the P:D and DP coordinators set (pdloop.py, dpgroups.py); the defaults: a lone instance."""
        # P:D coordination (planner/sim/pdloop.py): the earliest time another instance may hand this one
        # work, whether requests come from the engine's own arrival list, a prefill instance keeping
        # finished requests' KV until release(), hand-over lists.
        self.horizon_s = math.inf
        self.own_arrivals = True  # False: a coordinator queues the requests (self.arrival: times only)
        self.hold_kv = False
        self.holding = 0  # blocks held by finished requests (hold_kv)
        self.done: list[int] = []  # requests completed, in order (a coordinator drains it)
        self.joined: list[int] = []  # requests that joined the decode batch, in order
        # DP lockstep (planner/sim/dpgroups.py): decode steps one span may take at most, so that every rank
        # of the instance runs the same number of forward passes per round
        self.span_cap = MAX_SPAN_STEPS

    # ---- arrivals and the queue

    def next_arrival_s(self) -> float:
        """When the next request not yet queued reaches the engine (inf when none is issued), at most the
        horizon: its client's send time plus the per-request cost outside the forward pass (the API server's
        and tokenizer's time runs beside the engine: it delays that request's TTFT, no running decode)."""
        listed = self.own_arrivals and self.arrived < self.issued
        reach = self.arrival[self.arrived] + self.table.request_overhead_s if listed else math.inf
        return min(reach, self.horizon_s)

    def admit_arrivals(self) -> None:
        """Queue every issued request that has reached the engine by now (send time + request overhead)."""
        delay = self.table.request_overhead_s
        while self.arrived < self.issued and self.arrival[self.arrived] + delay <= self.t:
            self.waiting.append(self.arrived)
            self.arrived += 1

    def record(self, admitting: int = 0) -> None:
        """Append (time, in system, batch, used blocks, waiting) to the trace; batch = sequences in the
        engine's step: decoding + prefilling (vLLM, SGLang: prompts part-way) + `admitting` (admitted to this
        step, blocks allocated, not yet joined: a MindIE prefill batch, a P:D decode instance's arrivals).
        The schedulers record once a step's admissions are made, before it runs: a request admitted and
        finished in one step or span (a one-token output ends at its prefill) is then in the batch and KV
        peaks (instance.peaks_of)."""
        times, in_system, batch, blocks, waiting = self.trace_appends
        times(self.t)
        in_system(self.arrived - self.finished)
        batch(len(self.running) + len(self.prefilling) + admitting)
        blocks(self.used_blocks)
        waiting(len(self.waiting))

    def prefill_tokens_of(self, request: int) -> int:
        """Tokens the request's next prefill computes: its prompt plus tokens generated before preemption."""
        return self.prompt[request] + self.generated[request]

    def cached_tokens_of(self, request: int) -> int:
        """Prompt tokens of the request its prefix cache holds, so its prefill starts after them:
        planner.perf.prefix.prefix_hit_tokens at cfg.prefix_cached_fraction and the pool's block (0 when
        the fraction is 0). The prefix is the prompt's, so a preempted request hits it again."""
        fraction = self.cfg.prefix_cached_fraction
        if fraction <= 0:
            return 0
        return prefix_hit_tokens(
            self.prompt[request], cached_fraction=fraction, block_tokens=self.cfg.block_tokens
        )

    def admission_blocks(self, request: int) -> int:
        """Blocks to admit a request: its prefill tokens + the first generated token, plus state blocks."""
        tokens = self.prefill_tokens_of(request) + 1
        return blocks_for(tokens, block_tokens=self.cfg.block_tokens) + self.cfg.state_blocks

    def try_admit(self, request: int) -> bool:
        """Allocate the request's admission blocks when free; False (nothing allocated) otherwise."""
        need = self.admission_blocks(request)
        if self.cfg.total_blocks - self.used_blocks < need:
            return False
        self.used_blocks += need
        self.held[request] = need
        return True

    # ---- joining and leaving the decode batch

    def join_decode(self, request: int) -> None:
        """The request's prefill ended now: first token out; it decodes from the next step on."""
        emits = self.decoder_emits_first
        if emits and math.isnan(self.first[request]):
            self.first_pending.append(request)
        elif math.isnan(self.first[request]):
            self.first[request] = self.t
        self.joined.append(request)
        g0 = float(self.generated[request] + (0 if emits else 1))
        self.g0[request] = g0
        if g0 >= self.output[request]:
            self.complete(request)
            return
        a = self.table.tokens_per_step
        self.join[request] = self.step
        self.base[request] = self.prompt[request] + g0 - self.step * a
        self.base_sum += self.base[request]
        self.running[request] = None
        steps = math.ceil((self.output[request] - g0) / a - EPSILON)
        heapq.heappush(self.finish_heap, (self.step + steps, request, self.epoch[request]))
        self.push_block_event(request)

    def push_block_event(self, request: int) -> None:
        """Schedule the decode step at which the request's context outgrows its blocks (if it will): its
        tokens + lookahead pass the slots it holds, unless those reach the slot cap (vLLM's max_model_len)."""
        slots = (self.held[request] - self.cfg.state_blocks) * self.cfg.block_tokens
        cap = slots - self.cfg.lookahead_tokens
        at_cap = self.cfg.slot_cap_tokens is not None and slots >= self.cfg.slot_cap_tokens
        if at_cap or cap >= self.prompt[request] + self.output[request]:
            return
        a = self.table.tokens_per_step
        room = cap - self.prompt[request] - self.g0[request]
        at = self.join[request] + math.floor(room / a + EPSILON) + 1
        heapq.heappush(self.block_heap, (max(at, self.step + 1), request, self.epoch[request]))

    def leave_batch(self, request: int) -> None:
        """Drop the request from the decode batch and free its blocks."""
        if request in self.running:
            del self.running[request]
            self.base_sum -= self.base[request]
        self.used_blocks -= self.held[request]
        self.held[request] = 0
        self.epoch[request] += 1

    def complete(self, request: int) -> None:
        """The request's last token is out now; a closed-loop user sends its next request at once."""
        decoded = (self.step - self.join[request]) * self.table.tokens_per_step
        self.delivered[request] = self.g0[request] + decoded if request in self.running else self.g0[request]
        kept = self.held[request] if self.hold_kv else 0
        self.leave_batch(request)
        self.used_blocks += kept
        self.held[request] = kept
        self.holding += kept
        self.finish[request] = self.t
        self.finished += 1
        self.done.append(request)
        if self.issued < len(self.arrival):
            self.arrival[self.issued] = self.t
            self.issued += 1

    def release(self, request: int) -> None:
        """A finished request's held KV has left (hold_kv): free its blocks."""
        self.used_blocks -= self.held[request]
        self.holding -= self.held[request]
        self.held[request] = 0

    def preempt(self, request: int) -> None:
        """Recompute preemption: free the request's blocks and put it back at the head of the queue."""
        if request in self.running:
            decoded = (self.step - self.join[request]) * self.table.tokens_per_step
            self.generated[request] = int(self.g0[request] + decoded + EPSILON)
        if request in self.prefilling:
            self.prefilling.remove(request)
            self.prefill_done[request] = 0
        self.leave_batch(request)
        self.waiting.appendleft(request)
        self.preempted[request] += 1
        self.preemptions += 1

    def victim(self) -> int:
        """Lowest-priority admitted request: the last one prefilling, else the last one decoding."""
        if self.prefilling:
            return self.prefilling[-1]
        return next(reversed(self.running))

    # ---- advancing time

    def advance(self, steps: int, seconds: float) -> None:
        """Let `seconds` pass, `steps` of them decode steps; then handle completions and block boundaries."""
        if self.first_pending and steps:
            first_s = self.t + seconds / steps  # the end of the span's first step
            for request in self.first_pending:
                self.first[request] = first_s
            self.first_pending.clear()
        self.t += seconds
        self.step += steps
        if not steps:
            return
        heap, epoch = self.finish_heap, self.epoch
        while heap and heap[0][0] <= self.step:
            _, request, stamp = heapq.heappop(heap)
            if stamp == epoch[request]:
                self.complete(request)
        blocks = self.block_heap
        while blocks and blocks[0][0] <= self.step:
            _, request, stamp = heapq.heappop(blocks)
            if stamp == epoch[request]:
                self.grow(request)

    def grow(self, request: int) -> None:
        """The request needs one more block: take a free one, preempting the lowest priority if none."""
        while self.used_blocks >= self.cfg.total_blocks:
            victim = self.victim()
            self.preempt(victim)
            if victim == request:
                return
        self.used_blocks += 1
        self.held[request] += 1
        self.push_block_event(request)

    def top_step(self, heap: list[tuple[int, int, int]]) -> int:
        """Decode step of the heap's first live event (stale entries dropped), or a far-away step."""
        while heap and heap[0][2] != self.epoch[heap[0][1]]:
            heapq.heappop(heap)
        return heap[0][0] if heap else self.step + MAX_SPAN_STEPS

    def mean_ctx_tokens(self) -> float:
        """Mean context of the decode batch now: (sum_i base_i + B * D * a) / B."""
        batch = len(self.running)
        return (self.base_sum + batch * self.step * self.table.tokens_per_step) / batch

    def span_steps(self, *, single: bool = False) -> int:
        """Decode steps the next span takes: to the next completion (at most span_cap), to a block boundary
        when blocks are short, and to the step boundary at or after the next arrival."""
        return self.span_and_ctx(single=single)[0]

    def span_and_ctx(self, *, single: bool = False) -> tuple[int, float]:
        """(span_steps, mean_ctx_tokens now): one pass, the heaps' tops and the arrival read inline."""
        batch, a, step = len(self.running), self.table.tokens_per_step, self.step
        ctx = (self.base_sum + batch * step * a) / batch
        span = 1 if single else min(self.top_step(self.finish_heap) - step, self.span_cap)
        to_block = self.top_step(self.block_heap) - step
        if to_block < span:
            worst = batch * (math.ceil(span * a / self.cfg.block_tokens) + 1)
            if self.cfg.total_blocks - self.used_blocks < worst:
                span = to_block
        if span > 1:
            upcoming = self.next_arrival_s()
            if upcoming < math.inf:
                step_s = self.table.decode_s(batch, ctx)
                span = min(span, max(1, math.ceil((upcoming - self.t) / step_s)))
        return span, ctx

    def decode_span(self, *, single: bool = False) -> None:
        """Run decode steps to the next completion, block boundary short of blocks, or arrival (span_steps).

        Formula: k steps cost k * decode_s(B, ctx + (k - 1) / 2 * a) (ctx grows by a per step, step time is
        near-linear in ctx); the span ends at the step boundary at or after the next arrival.
        """
        span, ctx = self.span_and_ctx(single=single)
        a = self.table.tokens_per_step
        self.advance(span, span * self.table.decode_s(len(self.running), ctx + (span - 1) / 2 * a))
