"""The serving simulator (planner/sim/): invariants as property tests, limits against the planner."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.deployment import Deployment
from planner.engines.common import BlockPool
from planner.engines.mindie import pool as mindie_pool
from planner.errors import DoesNotFitError
from planner.perf import roofline
from planner.serving import closed_loop, performance
from planner.sim import instance, run, steptable
from planner.sim import workload as wl
from planner.sim.config import SchedulerConfig
from tests import helpers
from tests.helpers import deployment_950pr

SCHEDULERS = ("vllm", "mindie")


def deployment(engine: str, *, ctx: int, model: str = "qwen3-8b", **kw: object) -> Deployment:
    return deployment_950pr(model, engine=engine, ctx_tokens=ctx, **kw)


def fixed(prompt: int, output: int, *, count: int, rate: float | None, seed: int = 0) -> wl.Workload:
    lengths = (wl.LengthDist("fixed", prompt, prompt), wl.LengthDist("fixed", output, output))
    return wl.synthetic(lengths=lengths, count=count, rate_per_s=rate, seed=seed)


def closed(work: wl.Workload, users: int) -> wl.Workload:
    return wl.Workload(work.input_tokens, work.output_tokens, arrival_s=None, concurrency=users)


# --- step table: the planner's own step model, not a second one


@pytest.mark.parametrize("prompt", [1, 100, 3000])
def test_one_chunk_pass_is_the_planners_ttft(prompt: int) -> None:
    dep = deployment("vllm", ctx=4096)
    table = run.step_table(dep, max_batch=8, max_ctx_tokens=4096, max_pass_tokens=8192)
    # grid nodes are exact; between them linear interpolation of a near-linear function: 0.5 %
    assert table.pass_s(prompt, (prompt + 1) / 2) == pytest.approx(
        roofline.ttft_s(dep, prompt_tokens=prompt), rel=5e-3
    )


@given(batch=st.integers(1, 64), ctx=st.floats(1, 4000))
@settings(max_examples=40, deadline=None)
def test_decode_lookup_matches_the_roofline(batch: int, ctx: float) -> None:
    """roofline.decode_step_s_grid pages ctx up to whole 128-token blocks (a step function of ctx); the grid
    interpolates it linearly, so a lookup lies between the exact step one block below and one above."""
    dep = deployment("mindie", ctx=4096)
    table = _table(dep)
    below = float(roofline.decode_step_s_grid(dep, batch=batch, ctx_tokens=max(ctx - 128, 1)))
    above = float(roofline.decode_step_s_grid(dep, batch=batch, ctx_tokens=ctx + 128))
    assert below * (1 - 1e-9) <= table.decode_s(batch, ctx) <= above * (1 + 1e-9)


def _clamped_reference_s(axis: list[float], values: list[float], x: float) -> float:
    """The lookup as written before issue 23's speed work (min/max clamps): the comparisons must match it."""
    i = min(max(int(np.searchsorted(axis, x, side="right")) - 1, 0), len(axis) - 2)
    fraction = min(max((x - axis[i]) / (axis[i + 1] - axis[i]), 0.0), 1.0)
    return values[i] + (values[i + 1] - values[i]) * fraction


@given(batch=st.integers(1, 2), x=st.floats(-1e6, 1e6) | st.sampled_from([1.0, 16.0, 256.0, 4096.0, 0.0]))
@settings(max_examples=200, deadline=None)
def test_lookups_equal_the_min_max_clamp_bit_for_bit(batch: int, x: float) -> None:
    """decode_s, pass_s and mixed_s's cached decode_s(b, 1) give exactly the min(max()) clamp's floats
    (the simulator's results stay bit-identical), inside, on and outside the axes."""
    axis = [1.0, 16.0, 256.0, 4096.0]
    decode = [[0.010, 0.011, 0.013, 0.020], [0.012, 0.014, 0.017, 0.031]]
    table = steptable.StepTable(
        ctx_axis=axis, decode=decode, tokens_axis=axis, attended_axis=axis, pass_=decode + decode,
        tokens_per_step=1.0, query_tokens_per_step=1,
    )  # fmt: skip
    assert table.decode_s(batch, x) == _clamped_reference_s(axis, decode[batch - 1], x)
    assert table.decode_at_one_token_s[batch - 1] == table.decode_s(batch, 1.0)
    row = [_clamped_reference_s(axis, decode[k % 2], x) for k in range(4)]
    assert table.pass_s(x, x) == _clamped_reference_s(axis, row, x)


_TABLES: dict[int, steptable.StepTable] = {}


def _table(dep: Deployment) -> steptable.StepTable:
    return _TABLES.setdefault(0, run.step_table(dep, max_batch=64, max_ctx_tokens=4096, max_pass_tokens=8192))


# --- invariants


def tight_config(dep: Deployment, work: wl.Workload, *, scheduler: str, blocks: int) -> SchedulerConfig:
    """A pool of `blocks` 16-token blocks and a batch cap far above it: forces preemption."""
    return SchedulerConfig(
        scheduler=scheduler,  # type: ignore[arg-type]
        max_batch=64,
        max_batched_tokens=512,
        max_prefill_batch=8,
        max_prefill_tokens=4096,
        total_blocks=blocks,
        block_tokens=16,
    )


@given(
    scheduler=st.sampled_from(SCHEDULERS),
    count=st.integers(1, 40),
    rate=st.floats(0.5, 200),
    seed=st.integers(0, 2**16),
    blocks=st.integers(40, 200),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_invariants_under_memory_pressure(
    scheduler: str, count: int, rate: float, seed: int, blocks: int
) -> None:
    lengths = (wl.LengthDist("uniform", 1, 300), wl.LengthDist("uniform", 1, 300))
    work = wl.synthetic(lengths=lengths, count=count, rate_per_s=rate, seed=seed)
    dep = deployment(scheduler, ctx=600)
    cfg = tight_config(dep, work, scheduler=scheduler, blocks=blocks)
    eng = instance.run_engine(cfg, run.build_table(dep, cfg, work), work)
    result = run.summarize(eng, dep=dep, slo=(None, None))
    records, timeline = result[1], result[2]
    # every request finishes exactly once, after its first token, which follows its arrival
    assert eng.finished == count
    assert np.all(records.arrival_s <= records.first_token_s)
    assert np.all(records.first_token_s <= records.finish_s)
    # tokens conserved: each request delivers its output (the last step may overshoot by < 1 token)
    delivered = np.asarray(eng.delivered)
    assert np.all(delivered >= records.output_tokens)
    assert np.all(delivered < records.output_tokens + eng.table.tokens_per_step)
    # prefill computes every prompt at least once; exactly once when nothing was preempted
    assert eng.prefill_tokens >= int(records.input_tokens.sum())
    if eng.preemptions == 0:
        assert eng.prefill_tokens == int(records.input_tokens.sum())
    assert int(records.preemptions.sum()) == eng.preemptions
    # blocks never over-allocated, all returned at the end; the batch (its trace's peak) never exceeds its cap
    assert timeline.used_blocks.max() <= cfg.total_blocks
    assert timeline.used_blocks.min() >= 0 and eng.used_blocks == 0
    assert result[0].max_batch_reached == int(timeline.batch.max()) <= cfg.max_batch


@pytest.mark.parametrize(("scheduler", "per_pass"), [("mindie", 8), ("vllm", 4), ("sglang", 8)])
def test_one_token_outputs_are_in_the_batch_and_kv_peaks(scheduler: str, per_pass: int) -> None:
    """A one-token request ends with its prefill, yet it held its blocks and its place in that step. 8
    closed-loop users, 512-token prompts, one-token outputs, by hand: MindIE and SGLang prefill all 8 in
    one pass (maxPrefillTokens / chunked_prefill_size 8192 >= 8 x 512), vLLM 4 (max_num_batched_tokens
    2048 / 512); each request holds ceil((512 + 1) / 128) = 5 blocks. Before the fix: batch 0, KV peak 0."""
    work = closed(fixed(512, 1, count=80, rate=None), 8)
    result = run.simulate(deployment(scheduler, ctx=1024), work)
    s = result.summary
    assert (s.scheduler.block_tokens, s.scheduler.state_blocks) == (128, 0)
    assert s.max_batch_reached == int(result.timeline.batch.max()) == per_pass
    assert round(s.kv_peak_fraction * s.scheduler.total_blocks) == 5 * per_pass


def test_memory_pressure_preempts() -> None:
    """200 requests of up to 600 tokens at once on 40 blocks of 16 tokens: preemption must happen."""
    lengths = (wl.LengthDist("fixed", 200, 200), wl.LengthDist("fixed", 300, 300))
    work = wl.synthetic(lengths=lengths, count=200, rate_per_s=1000.0, seed=1)
    dep = deployment("vllm", ctx=500)
    cfg = tight_config(dep, work, scheduler="vllm", blocks=40)
    eng = instance.run_engine(cfg, run.build_table(dep, cfg, work), work)
    assert eng.preemptions > 0
    assert eng.prefill_tokens > 200 * 200  # recomputation costs prefill work


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_littles_law(scheduler: str) -> None:
    """L = lambda * W: the engine's own in-system count, time-averaged, against the records."""
    lengths = (wl.LengthDist("uniform", 64, 1024), wl.LengthDist("uniform", 16, 256))
    rate = 8.0
    work = wl.synthetic(lengths=lengths, count=4000, rate_per_s=rate, seed=3)
    dep = deployment(scheduler, ctx=1280)
    result = run.simulate(dep, work)
    s = result.summary
    measured_rate = s.requests / s.duration_s
    # sampled at events, arrivals counted at the next step boundary: bias ~ step / (2 * E2E) < 2 %
    assert s.mean_in_system == pytest.approx(measured_rate * s.e2e_s.mean, rel=0.02)
    # against the nominal Poisson rate: 4000 arrivals, sd of the rate estimate 1/sqrt(4000) = 1.6 %
    assert s.mean_in_system == pytest.approx(rate * s.e2e_s.mean, rel=0.08)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("mtp", [0, 2])
def test_zero_rate_limit_is_single_request_latency(scheduler: str, mtp: int) -> None:
    prompt, output = 700, 50
    dep = deployment(scheduler, ctx=prompt + output, model="qwen3.5-27b", mtp_tokens=mtp)
    lone = fixed(prompt, output, count=20, rate=None)  # one request every 1000 s: never two at once
    lone = wl.Workload(lone.input_tokens, lone.output_tokens, arrival_s=np.arange(20) * 1e3, concurrency=None)
    result = run.simulate(dep, lone)
    cfg = result.summary.scheduler
    wait = cfg.queue_delay_s if scheduler == "mindie" else 0.0  # MindIE holds a lone request to fill a batch
    ttft = roofline.ttft_s(dep, prompt_tokens=prompt) + wait
    assert result.records.ttft_s == pytest.approx(np.full(20, ttft), rel=5e-3)
    per_step = performance.tokens_per_step(dep)
    steps = int(np.ceil((output - 1) / per_step - 1e-9))
    ctx = prompt + 1 + per_step * np.arange(steps)
    decode = float(np.sum(roofline.decode_step_s_grid(dep, batch=1, ctx_tokens=ctx)))
    assert result.records.e2e_s == pytest.approx(np.full(20, ttft + decode), rel=1e-2)
    assert result.summary.max_batch_reached == 1 and result.summary.preemptions == 0


@pytest.mark.parametrize("users", [4, 32])
@pytest.mark.parametrize("arrivals", ["waves", "staggered"])
def test_saturated_closed_loop_is_the_planners_steady_state(users: int, arrivals: str) -> None:
    """K users, fixed lengths, all starting together, on MindIE's scheduler: the planner's closed-loop model
    (planner/serving/closed_loop.py). "waves": prefills batched up to maxPrefillTokens (the defaults);
    "staggered": one prompt per prefill (maxPrefillBatchSize 1). Throughput and TPOT within 3 % (the
    planner times a cycle's steps at its mean context, the simulator step by step); in waves the TTFT
    equals the planner's plus at most the queue delay an idle MindIE waits to fill a batch."""
    prompt, output = 512, 256
    dep = deployment("mindie", ctx=prompt + output)
    work = closed(fixed(prompt, output, count=40 * users, rate=None), users)
    knobs = {"max_prefill_batch": 1} if arrivals == "staggered" else {}
    result = run.simulate(dep, work, cfg=run.default_config(dep, workload=work, **knobs))
    bench = closed_loop.BenchRun(arrivals=arrivals)  # type: ignore[arg-type]
    steady = closed_loop.serving_estimate(
        dep, input_tokens=prompt, output_tokens=output, concurrency=users, run=bench
    )
    s = result.summary
    assert s.throughput.output_tokens_per_s == pytest.approx(steady.output_tokens_per_s, rel=0.03)
    assert s.max_batch_reached == users
    if arrivals == "waves":
        assert s.tpot_s.mean == pytest.approx(steady.tpot_s, rel=0.03)
        delay = s.scheduler.queue_delay_s
        assert steady.ttft_s * 0.99 <= s.ttft_s.mean <= (steady.ttft_s + delay) * 1.01


def test_chunked_prefill_beats_prefill_priority_on_tpot_tail() -> None:
    """vLLM's mixed steps never pause decodes for a whole prompt; MindIE's prefill batches do."""
    lengths = (wl.LengthDist("uniform", 1000, 4000), wl.LengthDist("fixed", 128, 128))
    work = wl.synthetic(lengths=lengths, count=400, rate_per_s=3.0, seed=5)
    tails = {
        engine: run.simulate(deployment(engine, ctx=4200), work).summary.tpot_s.p99 for engine in SCHEDULERS
    }
    assert tails["vllm"] < tails["mindie"]


def test_select_batch_and_queue_delay_change_the_schedule() -> None:
    work = fixed(512, 128, count=300, rate=6.0, seed=2)
    dep = deployment("mindie", ctx=640)
    # supportSelectBatch's stage policy decides before the queue delay would (scheduler.cpp DecidePDPriority),
    # so compare with prefill at once (queue delay 0)
    # (and a maxBatchSize of 12, so that 150 ms x decodeReqNum can exceed 50 ms x (12 - decodeReqNum))
    plain = run.simulate(
        dep, work, cfg=run.default_config(dep, workload=work, queue_delay_s=0.0, max_batch=12)
    )
    select = run.simulate(
        dep, work, cfg=run.default_config(dep, workload=work, select_batch=True, max_batch=12)
    )
    # decode chosen over waiting prefills at times: first tokens come later, decodes pause less
    assert select.summary.ttft_s.mean > plain.summary.ttft_s.mean
    assert select.summary.tpot_s.p99 <= plain.summary.tpot_s.p99
    # the queue delay holds prefills back while decoding too: the default 5 ms shows in the mean TTFT
    delayed = run.simulate(dep, work, cfg=run.default_config(dep, workload=work, max_batch=12))
    assert (
        delayed.summary.ttft_s.mean
        > plain.summary.ttft_s.mean + 0.5 * delayed.summary.scheduler.queue_delay_s
    )


def test_seeded_and_reproducible() -> None:
    lengths = (wl.LengthDist("lognormal", 500, 0.7), wl.LengthDist("uniform", 10, 300))
    first = wl.synthetic(lengths=lengths, count=300, rate_per_s=5.0, seed=9)
    again = wl.synthetic(lengths=lengths, count=300, rate_per_s=5.0, seed=9)
    other = wl.synthetic(lengths=lengths, count=300, rate_per_s=5.0, seed=10)
    assert np.array_equal(first.input_tokens, again.input_tokens)
    assert not np.array_equal(first.input_tokens, other.input_tokens)
    dep = deployment("vllm", ctx=int((first.input_tokens + first.output_tokens).max()))
    assert run.simulate(dep, first).summary == run.simulate(dep, again).summary


def test_goodput_counts_requests_meeting_both_slos() -> None:
    work = fixed(256, 64, count=200, rate=4.0, seed=4)
    dep = deployment("vllm", ctx=320)
    base = run.simulate(dep, work).records
    ttft, tpot = float(np.median(base.ttft_s)), float(np.median(base.tpot_s))
    result = run.simulate(dep, work, slo=(ttft, tpot))
    meets = np.count_nonzero((base.ttft_s <= ttft) & (base.tpot_s <= tpot))
    assert result.summary.goodput_requests_per_s == pytest.approx(
        meets / result.summary.duration_s, rel=1e-12
    )
    assert result.summary.goodput_requests_per_s < result.summary.throughput.requests_per_s


@pytest.mark.parametrize("calibrated", [False, True])
def test_step_table_pass_is_the_plans_prefill_pass(calibrated: bool) -> None:
    """A one-chunk prompt costs the simulator exactly the plan's TTFT (roofline.prefill_pass_s_grid), per-pass
    and per-sequence overheads included (the step table once left them out)."""
    dep = helpers.with_pass_overheads(deployment_950pr("qwen3-8b", scheme="bf16", calibrated=calibrated))
    prompt = 1024.0
    sim_s = run.pass_s_grid(dep, tokens=np.asarray([prompt]), attended=np.asarray([(prompt + 1) / 2]))
    assert float(sim_s[0]) == pytest.approx(roofline.ttft_s(dep, prompt_tokens=int(prompt)), rel=1e-12)


def test_tpot_statistics_leave_out_one_token_requests() -> None:
    """As `vllm bench serve` does: a one-token request has no TPOT; its 0 is not averaged in (it pulled the
    mean and the lower percentiles down), and a run where no request made a second token says so."""
    lengths = (wl.LengthDist("fixed", 256, 256), wl.LengthDist("uniform", 1, 3))
    work = wl.synthetic(lengths=lengths, count=200, rate_per_s=4.0, seed=2)
    result = run.simulate(deployment("vllm", ctx=1024), work)
    records, summary = result.records, result.summary
    several = records.output_tokens > 1
    assert 0 < int(np.sum(several)) < records.output_tokens.size  # both kinds are in the run
    assert summary.tpot_requests == int(np.sum(several))
    assert summary.tpot_s.mean == pytest.approx(float(np.mean(records.tpot_s[several])), rel=1e-12)
    assert summary.tpot_s.p50 > 0
    single = run.simulate(deployment("mindie", ctx=1024), fixed(256, 1, count=20, rate=2.0)).summary
    assert single.tpot_requests == 0
    from planner.cli.serve_view import tail_lines

    assert "TPOT undefined" in tail_lines(single)[1]


@pytest.mark.parametrize(("engine", "drafts"), [("mindie", 1), ("mindie", 2), ("vllm", 3)])
def test_drafting_sequences_keep_their_lookahead_slots(engine: str, drafts: int) -> None:
    """An MTP model's decoding sequence keeps the engine's lookahead slots free past its last token
    (MindIE's gamma = max(n, 2n - 2): planner/engines/mindie/pool.py blocks_per_sequence; vLLM's
    num_lookahead_tokens = n): the simulator takes each next block that many tokens earlier and refuses a
    pool that holds the request's tokens but not its lookahead, as the plan's block rule does. Before: no
    lookahead in the simulator."""
    expected = {"mindie": max(drafts, 2 * drafts - 2), "vllm": drafts}[engine]
    refused = {}
    for n in (0, drafts):
        dep = deployment_950pr("qwen3.5-27b", engine=engine, ctx_tokens=65536, mtp_tokens=n)
        probe = run.default_config(dep, workload=fixed(128, 128, count=1, rate=1.0))
        assert probe.lookahead_tokens == (expected if n else 0)
        block, state = probe.block_tokens, probe.state_blocks
        if engine == "mindie":
            assert mindie_pool.blocks_per_sequence(5 * block, block_tokens=block, mtp_drafts=n) == 5 + (n > 0)
        work = fixed(5 * block - 128, 128, count=1, rate=1.0)  # exactly 5 blocks of tokens
        try:
            run.default_config(dep, workload=work, total_blocks=5 + state)
            refused[n] = False
        except DoesNotFitError:
            refused[n] = True
    assert refused == {0: False, drafts: True}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    engine=st.sampled_from(SCHEDULERS),
    drafts=st.integers(1, 2),
    blocks=st.integers(12, 60),
    seed=st.integers(0, 99),
)
def test_drafting_runs_keep_the_block_invariants(engine: str, drafts: int, blocks: int, seed: int) -> None:
    lengths = (wl.LengthDist("uniform", 1, 300), wl.LengthDist("uniform", 1, 300))
    work = wl.synthetic(lengths=lengths, count=20, rate_per_s=50.0, seed=seed)
    dep = deployment_950pr("qwen3.5-27b", engine=engine, ctx_tokens=1024, mtp_tokens=drafts)
    probe = run.default_config(dep, workload=work)
    cfg = run.default_config(dep, workload=work, total_blocks=max(blocks, 5 * (1 + probe.state_blocks)))
    eng = instance.run_engine(cfg, run.build_table(dep, cfg, work), work)
    _, records, timeline = run.summarize(eng, dep=dep, slo=(None, None))
    assert eng.finished == 20 and eng.used_blocks == 0
    assert timeline.used_blocks.max() <= cfg.total_blocks and timeline.used_blocks.min() >= 0
    assert np.all(np.asarray(eng.delivered) >= records.output_tokens)


def test_vllms_drafting_sequences_at_full_length_run_at_the_plans_batch() -> None:
    """vLLM allocates a drafting sequence's lookahead slots only up to max_model_len (v1/core/
    kv_cache_manager.py allocate_slots: min(tokens + num_lookahead_tokens, max_model_len)), so full-length
    requests run at its start-up count without preemption, and the plan prints no lower batch. Before: the
    simulator took a block past max_model_len (h67's 109 preemptions were that) and the plan said so."""
    import json

    from tests.helpers import kvplan

    spec = '{"method":"eagle3","num_speculative_tokens":3,"model":"/d"}'
    flags = "-m qwen3-8b --dtype fp8 --engine vllm --memory-gib 12 --ctx 256"
    plan = json.loads(kvplan(f"{flags} --json", "--speculative-config", spec).output)
    batch = plan["recommendation"]["max_batch_size"]
    assert not any("without preemption" in note for note in plan["warnings"])
    words = (
        f"serve {flags} --input-tokens 192 --output-tokens 64 --max-batch {batch} --concurrency {batch + 9}"
    )
    sim = json.loads(kvplan(f"{words} --json", "--speculative-config", spec).output)
    assert sim["simulated"]["max_batch_reached"] == batch
    assert sim["simulated"]["preemptions"] == 0


@pytest.mark.parametrize(
    ("tokens", "capped", "uncapped"), [(256, 2, 3), (254, 2, 3), (127, 2, 2), (125, 1, 1)]
)
def test_lookahead_slots_stop_at_the_slot_cap(tokens: int, capped: int, uncapped: int) -> None:
    """128-token blocks, 3 drafts: ceil(min(tokens + 3, 256) / 128) blocks under vLLM's max_model_len 256,
    ceil((tokens + 3) / 128) without a cap (MindIE's lookahead: planner/engines/mindie/pool.py)."""
    pool = BlockPool(total_blocks=10, state_blocks=1, block_tokens=128, lookahead_tokens=3)
    assert pool.sequence_blocks(tokens) == uncapped + 1
    assert pool.model_copy(update={"slot_cap_tokens": 256}).sequence_blocks(tokens) == capped + 1


def test_vllm_full_length_drafting_run_takes_no_block_past_max_model_len() -> None:
    """Requests of exactly max_model_len tokens with 3 drafts, a pool of their blocks at max_model_len: vLLM's
    cap (cut_pool's slot_cap_tokens) runs them all without preemption; without it the last draft slots
    would take one more block each and preempt."""
    probe = run.default_config(
        deployment_950pr("qwen3.5-27b", engine="vllm", ctx_tokens=4096, mtp_tokens=3),
        workload=fixed(128, 128, count=1, rate=1.0),
    )
    block = probe.block_tokens
    dep = deployment_950pr("qwen3.5-27b", engine="vllm", ctx_tokens=2 * block, mtp_tokens=3)
    work = fixed(2 * block - 64, 64, count=8, rate=1000.0)
    cfg = run.default_config(dep, workload=work)
    assert (cfg.slot_cap_tokens, cfg.lookahead_tokens) == (2 * block, 3)
    cfg = cfg.model_copy(update={"total_blocks": 8 * (2 + cfg.state_blocks)})
    preempted = {}
    for cap in (cfg.slot_cap_tokens, None):
        run_cfg = cfg.model_copy(update={"slot_cap_tokens": cap})
        eng = instance.run_engine(run_cfg, run.build_table(dep, run_cfg, work), work)
        assert eng.finished == 8
        preempted[cap] = eng.preemptions
    assert preempted[2 * block] == 0 < preempted[None]
