"""What one engine step runs, per engine. Each function performs one step (or one decode span).

vLLM (V1 scheduler, chunked prefill on; docs.vllm.ai "Optimization and Tuning: chunked prefill"): every
step has a budget of max_num_batched_tokens. Running decodes are scheduled first (1 + draft tokens each),
then prompts already being prefilled continue, then waiting requests are admitted in arrival order while
fewer than max_num_seqs are admitted and the budget and free KV blocks allow; a prompt longer than what
is left of the budget is split across steps. Prefill chunks and decodes share one forward pass.

MindIE (ScheduleConfig, templateType Standard; facts 1.2 [P]; its C++ scheduler, planner/engines/mindie/
pool.py): each step is a prefill batch or decodes. Prefill runs once the oldest waiting request has waited
maxQueueDelayMicroseconds (decoding meanwhile; an idle engine waits) and, while decodes run, at least 5 % of
the blocks are free; the batch takes waiting requests in arrival order, closed when maxPrefillBatchSize
requests or maxPrefillTokens input tokens are reached (or maxBatchSize / free blocks would be exceeded);
decodes pause during it. With supportSelectBatch its stage policy decides instead: accumulatedDecodeWasteTime
grows by decodeTimeMsPerReq * (maxBatchSize - decodeReqNum) each time it is asked with requests waiting,
and prefill runs (the waste reset) unless prefillTimeMsPerReq * decodeReqNum exceeds it.

SGLang (managers/scheduler.py get_next_batch_to_run with enable_mixed_chunk off, its default): a new prefill
batch whenever one can be formed, else the running decodes; the prefill batch (PrefillAdder) continues the
chunked request, then admits waiting requests in fcfs order up to chunked_prefill_size tokens, the last one
chunked. Prefill and decode never share a pass.

Decode-only (a P:D decode instance, planner/sim/pd.py): admit prefilled requests, decode.
"""

from __future__ import annotations

from collections.abc import Callable

from planner import units
from planner.engines.mindie import scheduler as mindie_scheduler
from planner.errors import PlanInputError
from planner.sim.engine import Engine

QUEUE_DELAY_SHORTCUT_S = mindie_scheduler.QUEUE_DELAY_SHORTCUT_ABOVE_US * units.US_S


def prefill_shape(chunks: list[tuple[int, int, int]]) -> tuple[float, float]:
    """(tokens, mean attended keys per token) of prefill chunks (request, tokens, prefix).

    Formula: T = sum c_i;  A = sum c_i * (p_i + (c_i + 1) / 2) / T   (causal attention within a chunk)
    """
    tokens = sum(c for _, c, _ in chunks)
    keys = sum(c * (p + (c + 1) / 2.0) for _, c, p in chunks)
    return float(tokens), keys / tokens


def vllm_chunks(eng: Engine) -> list[tuple[int, int, int]]:
    """This step's prefill chunks (request, tokens, prefix): continuing prompts, then admitted ones, in what
    the running decodes leave of the step's token budget."""
    return prefill_chunks(
        eng, budget=eng.cfg.max_batched_tokens - len(eng.running) * eng.table.query_tokens_per_step
    )


def prefill_chunks(eng: Engine, *, budget: int) -> list[tuple[int, int, int]]:
    """Prefill chunks (request, tokens, prefix) of at most `budget` tokens: prompts part-way first, then
    waiting requests in arrival order while the batch cap and free blocks allow; the last may be cut. The
    trace records the step once it admitted any (Engine.record)."""
    cfg = eng.cfg
    chunks: list[tuple[int, int, int]] = []
    admitted = len(eng.prefilling)
    for request in eng.prefilling:
        if budget <= 0:
            break
        done = eng.prefill_done[request]
        take = min(eng.prefill_tokens_of(request) - done, budget)
        chunks.append((request, take, done))
        budget -= take
    while eng.waiting and budget > 0 and len(eng.running) + len(eng.prefilling) < cfg.max_batch:
        request = eng.waiting[0]
        if not eng.try_admit(request):
            break
        eng.waiting.popleft()
        eng.prefilling.append(request)
        cached = eng.cached_tokens_of(request)  # a prefix-cache hit: computed already
        eng.prefill_done[request] = cached
        take = min(eng.prefill_tokens_of(request) - cached, budget)
        chunks.append((request, take, cached))
        budget -= take
    if len(eng.prefilling) > admitted:
        eng.record()
    return chunks


def vllm_step(eng: Engine) -> None:
    """One vLLM step: a mixed prefill + decode pass, or a decode span when nothing is to prefill."""
    chunks = vllm_chunks(eng)
    if decoded_instead(eng, chunks):
        return
    batch = len(eng.running)
    ctx = eng.mean_ctx_tokens() if batch else 0.0
    seconds = eng.table.mixed_s(batch, ctx, prefill_shape(chunks))
    completed = take_chunks(eng, chunks)
    eng.advance(1 if batch else 0, seconds)
    finish_prefills(eng, completed)


def decoded_instead(eng: Engine, chunks: list[tuple[int, int, int]]) -> bool:
    """True after a decode span when nothing is to prefill (the running batch decodes to the next event);
    raises when nothing runs either (the simulator would stall)."""
    if chunks:
        return False
    if not eng.running:
        raise_stuck(eng)
    eng.decode_span()
    return True


def take_chunks(eng: Engine, chunks: list[tuple[int, int, int]]) -> list[int]:
    """Count each chunk's tokens as prefilled; the requests whose prompt is then complete."""
    completed = []
    for request, take, _ in chunks:
        eng.prefill_done[request] += take
        eng.prefill_tokens += take
        if eng.prefill_done[request] >= eng.prefill_tokens_of(request):
            completed.append(request)
    return completed


def finish_prefills(eng: Engine, completed: list[int]) -> None:
    """Move the completed prompts to decode, unless preempted during the step."""
    for request in completed:
        if request in eng.prefilling:
            eng.prefilling.remove(request)
            eng.prefill_done[request] = 0
            eng.join_decode(request)


def sglang_step(eng: Engine) -> None:
    """One SGLang step (--enable-mixed-chunk off): a prefill pass of up to chunked_prefill_size tokens
    whenever a prompt waits or is part-way (decodes pause), else decode steps to the next event."""
    chunks = prefill_chunks(eng, budget=eng.cfg.max_batched_tokens)
    if decoded_instead(eng, chunks):
        return
    tokens, attended = prefill_shape(chunks)
    completed = take_chunks(eng, chunks)
    eng.advance(0, eng.table.pass_s(tokens, attended))
    finish_prefills(eng, completed)


def mindie_select_batch_prefers_prefill(eng: Engine) -> bool:
    """supportSelectBatch (MindIE-LLM TptStagePolicy::Apply, src/scheduler/policy/stage_policy/
    tpt_stage_policy.cpp; stageSelectPolicy = 1 when supportSelectBatch, schedule_config.cpp): with requests
    waiting, accumulatedDecodeWasteTime first grows by decodeTimeMsPerReq * (maxBatchSize - decodeReqNum),
    then prefill runs (the waste reset) unless prefillTimeMsPerReq * decodeReqNum exceeds it; nothing
    waiting resets it.
    """
    cfg, decoding = eng.cfg, len(eng.running)
    if not eng.waiting:
        eng.decode_waste_s = 0.0
        return False
    if decoding <= cfg.max_batch:
        eng.decode_waste_s += cfg.decode_time_per_req_s * (cfg.max_batch - decoding)
    if cfg.prefill_time_per_req_s * decoding > eng.decode_waste_s:
        return False
    eng.decode_waste_s = 0.0
    return True


def mindie_queue_delay_reached(eng: Engine) -> bool:
    """ShouldImmediatePrefill (scheduler.cpp): the oldest waiting request has waited the queue delay
    (maxQueueDelayMicroseconds), or a full prefill batch waits and the delay is set above 5000 us."""
    cfg = eng.cfg
    if cfg.queue_delay_s > QUEUE_DELAY_SHORTCUT_S and len(eng.waiting) >= cfg.max_prefill_batch:
        return True
    return eng.t >= eng.arrival[eng.waiting[0]] + cfg.queue_delay_s


def mindie_wants_prefill(eng: Engine) -> bool:
    """One rank's priority (Scheduler::DecidePDPriority, PD mixed): supportSelectBatch's policy when on; else
    prefill once the queue delay is reached, unless decodes run and fewer than DECODE_RESERVE_FRACTION of the
    blocks are free."""
    if eng.cfg.select_batch:
        return mindie_select_batch_prefers_prefill(eng)
    if not eng.waiting or not mindie_queue_delay_reached(eng):
        return False
    reserve = mindie_scheduler.DECODE_RESERVE_FRACTION * eng.cfg.total_blocks
    return not (eng.running and eng.cfg.total_blocks - eng.used_blocks < reserve)


def mindie_batch(eng: Engine) -> list[int]:
    """Waiting requests admitted to the next prefill batch, in arrival order (blocks allocated)."""
    cfg = eng.cfg
    batch: list[int] = []
    tokens = 0
    while (
        eng.waiting and len(batch) < cfg.max_prefill_batch and len(eng.running) + len(batch) < cfg.max_batch
    ):
        request = eng.waiting[0]
        size = eng.prefill_tokens_of(request) - eng.cached_tokens_of(request)
        if batch and tokens + size > cfg.max_prefill_tokens:
            break
        if not eng.try_admit(request):
            break
        eng.waiting.popleft()
        batch.append(request)
        tokens += size
    return batch


def mindie_prefill(eng: Engine) -> bool:
    """Run a prefill batch now if one can be formed (decodes pause); True when it ran."""
    if not eng.waiting or len(eng.running) >= eng.cfg.max_batch:
        return False  # mindie_batch would admit nothing (a full batch is the saturated run's usual case)
    batch = mindie_batch(eng)
    if not batch:
        return False
    eng.record(admitting=len(batch))  # the batch's blocks are allocated: the step's state (Engine.record)
    chunks = [(r, eng.prefill_tokens_of(r) - eng.cached_tokens_of(r), eng.cached_tokens_of(r)) for r in batch]
    tokens, attended = prefill_shape(chunks)
    eng.prefill_tokens += int(tokens)
    eng.advance(0, eng.table.pass_s(tokens, attended))
    for request in batch:
        eng.join_decode(request)
    return True


def mindie_run(eng: Engine, *, prefill: bool, pause_decodes: bool = False) -> None:
    """Run the phase decided: a prefill batch; when none can be formed, decode (or nothing when
    pause_decodes: a DP rank outvoted into a prefill it has none for runs a dummy pass); decode steps one at
    a time while the decision may change at the next step (requests waiting), else a span to the next event;
    an idle engine waits for the queue delay's end or the next arrival."""
    if prefill and (mindie_prefill(eng) or pause_decodes):
        return
    if eng.running:
        deciding = bool(eng.waiting) and (eng.cfg.select_batch or not mindie_queue_delay_reached(eng))
        eng.decode_span(single=deciding)
        return
    if eng.waiting and not mindie_queue_delay_reached(eng):
        eng.t = min(eng.arrival[eng.waiting[0]] + eng.cfg.queue_delay_s, eng.next_arrival_s())
        return
    if not pause_decodes:  # a DP rank outvoted into decode with only queued requests runs a dummy pass
        raise_stuck(eng)


def mindie_step(eng: Engine) -> None:
    """One MindIE step: the rank's priority (mindie_wants_prefill), then that phase (mindie_run)."""
    mindie_run(eng, prefill=mindie_wants_prefill(eng))


def raise_stuck(eng: Engine) -> None:
    """Nothing runs and the queue's head cannot be admitted (unreachable when every request fits the
    pool alone, which run.default_config checks): an error, never an endless loop."""
    head = eng.waiting[0] if eng.waiting else -1
    raise PlanInputError(
        f"simulation: request {head} cannot be admitted to an idle engine "
        f"(got {eng.admission_blocks(max(head, 0))} blocks needed, expected <= {eng.cfg.total_blocks})"
    )


def decode_only_step(eng: Engine) -> None:
    """A P:D decode instance: requests arrive prefilled (KV transferred, first token out); each is admitted in
    arrival order while the step's sequences (decoding + admitted) are under the batch cap and its blocks are
    free, then the batch decodes to the next event. The trace records the step once admitted (Engine.record:
    each request's whole prompt + first token, Engine.admission_blocks, prefix-cache hits or not), before
    the joins and the span: a request that ends on joining (its one token out) or within the span would
    otherwise leave its KV and its place in the batch out of the trace. Admitted requests that all ended
    leave the rest of the queue to the next step, at the same time."""
    admitted: list[int] = []
    while eng.waiting and len(eng.running) + len(admitted) < eng.cfg.max_batch:
        request = eng.waiting[0]
        if not eng.try_admit(request):
            break
        eng.waiting.popleft()
        admitted.append(request)
    if admitted:
        eng.record(admitting=len(admitted))
    for request in admitted:
        eng.join_decode(request)
    if not eng.running:
        if eng.waiting and not admitted:
            raise_stuck(eng)
        return
    eng.decode_span()


def step_function(scheduler: str) -> Callable[[Engine], None]:
    """The function that runs one step of the scheduler (engine loops look it up once, not per event)."""
    if scheduler == "vllm":
        return vllm_step
    if scheduler == "mindie":
        return mindie_step
    if scheduler == "sglang":
        return sglang_step
    return decode_only_step


def step(eng: Engine) -> None:
    """One step of the configured scheduler."""
    step_function(eng.cfg.scheduler)(eng)
