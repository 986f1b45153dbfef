"""MindIE's scheduler as its C++ source has it (planner/sim/schedulers.py; sources in planner/engines/mindie/
pool.py): the queue delay while decoding, the blocks kept for decode, supportSelectBatch's decode steps."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engines.mindie import scheduler as mindie_scheduler
from planner.sim import instance, run, schedulers
from planner.sim import workload as wl
from planner.sim.engine import Engine
from tests.helpers import deployment_950pr


def engine(prompts: list[int], outputs: list[int], arrivals: list[float], **knobs: object) -> Engine:
    """A MindIE engine for qwen3-8b on the 950PR run to completion on the listed requests."""
    work = wl.Workload(np.array(prompts), np.array(outputs), np.array(arrivals), None)
    dep = deployment_950pr("qwen3-8b", engine="mindie", ctx_tokens=int(max(prompts) + max(outputs)))
    cfg = run.default_config(dep, workload=work, **knobs)
    return instance.run_engine(cfg, run.build_table(dep, cfg, work), work)


def steps_before(eng: Engine, *, start_s: float, end_s: float) -> np.ndarray:
    """The engine's loop times in [start_s, end_s) (one per scheduler step: a step that admits records its
    start twice, Engine.record)."""
    times = np.unique(np.asarray(eng.trace[0]))
    return times[(times >= start_s) & (times < end_s)]


def test_queue_delay_holds_prefill_while_decoding() -> None:
    """ShouldImmediatePrefill: 4 requests decode; with maxQueueDelayMicroseconds 500 000 a prompt arriving
    at 1 s is prefilled at the first step boundary at or after 1.5 s, the 4 decoding meanwhile, not at the
    first one after its arrival."""
    eng = engine([64] * 5, [400] * 4 + [4], [0.0] * 4 + [1.0], max_batch=8, queue_delay_s=0.5)
    pass_s = eng.table.pass_s(*schedulers.prefill_shape([(4, 64, 0)]))
    times = np.asarray(eng.trace[0])
    ready = times[np.searchsorted(times, 1.0 + eng.cfg.queue_delay_s - 1e-12)]
    assert eng.first[4] == pytest.approx(ready + pass_s, rel=1e-12)
    assert ready >= 1.5 and eng.finish[0] > 1.5 + pass_s


def test_select_batch_decodes_while_prefill_cost_exceeds_the_waste() -> None:
    """TptStagePolicy: with 4 of maxBatchSize 8 decoding, each call first adds 50 ms x (8 - 4) = 200 ms of
    waste, then decodes while 150 ms x 4 = 600 ms exceeds it: calls 1 and 2 decode, call 3 prefills, so
    2 decode steps (ceil(600 / 200) - 1), not 3, run between the prompt's arrival and its prefill."""
    eng = engine([64] * 5, [400] * 4 + [4], [0.0] * 4 + [1.0], max_batch=8, select_batch=True)
    pass_s = eng.table.pass_s(*schedulers.prefill_shape([(4, 64, 0)]))
    times = np.asarray(eng.trace[0])
    boundary = times[np.searchsorted(times, 1.0)]
    decided = steps_before(eng, start_s=boundary, end_s=eng.first[4])
    assert len(decided) == 3  # decode, decode, prefill
    assert eng.first[4] == pytest.approx(decided[-1] + pass_s, rel=1e-12)


def test_no_prefill_while_fewer_than_5_percent_of_blocks_are_free() -> None:
    """PRESERVED_FACTOR_FOR_DECODE: two 6143-token requests hold 98 of 100 blocks (128 tokens each); a
    64-token prompt (one block, which is free) waits until one of them finishes and frees its blocks."""
    assert mindie_scheduler.DECODE_RESERVE_FRACTION == 0.05
    eng = engine(
        [6143, 6143, 64],
        [8, 8, 4],
        [0.0, 0.0, 0.01],
        total_blocks=100,
        block_tokens=128,
        max_prefill_tokens=16384,
    )
    assert eng.cfg.total_blocks == 100 and eng.held[0] == 0
    assert eng.first[2] >= min(eng.finish[0], eng.finish[1])
    roomy = engine(
        [6143, 6143, 64],
        [8, 8, 4],
        [0.0, 0.0, 0.01],
        total_blocks=140,
        block_tokens=128,
        max_prefill_tokens=16384,
    )
    assert roomy.first[2] < min(roomy.finish[0], roomy.finish[1])
