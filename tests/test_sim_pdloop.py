"""P:D with back-pressure and closed loops (planner/sim/pdloop.py): equal to the open-loop reference
(planner/sim/pd.py) while decode keeps up, slower first tokens when it does not, invariants, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from planner import catalog
from planner.cli import app
from planner.deployment import Deployment
from planner.perf import roofline
from planner.sim import pd, pdloop, pdspec, run
from planner.sim import workload as wl
from planner.sim.workload import Workload
from tests.helpers import deployment_950pr


def deployment(engine: str, *, ctx: int) -> Deployment:
    return deployment_950pr("qwen3-8b", engine=engine, ctx_tokens=ctx)


def poisson(
    prompt: tuple[int, int], output: int, *, count: int, rate: float | None, seed: int = 0
) -> wl.Workload:
    lengths = (wl.LengthDist("uniform", *prompt), wl.LengthDist("fixed", output, output))
    return wl.synthetic(lengths=lengths, count=count, rate_per_s=rate, seed=seed)


def closed(work: wl.Workload, users: int) -> wl.Workload:
    return wl.Workload(work.input_tokens, work.output_tokens, arrival_s=None, concurrency=users)


@pytest.mark.parametrize("engine", ["mindie", "vllm"])
@pytest.mark.parametrize("counts", [(1, 1), (1, 3), (2, 2)])
def test_with_decode_to_spare_it_is_the_open_loop_model(engine: str, counts: tuple[int, int]) -> None:
    """Decode never full: no KV waits on a prefill instance, so every first token is the reference's and
    every request ends where the reference ends it (decode spans cut at other instances' clocks: 1 %; vLLM's
    first token is the decoder's first step, timed as its span's mean step: 0.2 %)."""
    work = poisson((500, 3000), 200, count=300, rate=2.0, seed=7)
    spec = pdspec.spec_for(deployment(engine, ctx=3200), counts=counts)
    knobs: dict[str, object] = {"max_batched_tokens": 8192}  # one pass per prompt (no chunks), as written
    reference = pd.simulate_pd(spec, work, slo=(None, None), knobs=knobs).records
    fleet = pdloop.simulate_fleet(spec, work, slo=(None, None), knobs=knobs).records
    tolerance = 2e-3 if engine == "vllm" else 1e-9
    assert fleet.first_token_s == pytest.approx(reference.first_token_s, rel=tolerance)
    assert fleet.e2e_s == pytest.approx(reference.e2e_s, rel=1e-2)


def test_full_decode_holds_kv_on_prefill_and_first_tokens_wait() -> None:
    """A decode batch cap of 8 against 20 long prompts a second: requests queue for decode with their KV still
    on the prefill instance; its blocks run out and prompts wait to be prefilled. The reference (KV leaves at
    once) never sees this: TTFT grows, while requests still finish when decode frees a slot."""
    work = poisson((2000, 3000), 200, count=600, rate=20.0, seed=7)
    spec = pdspec.spec_for(deployment("mindie", ctx=3200), counts=(1, 1))
    knobs: dict[str, object] = {"max_batch": 8}
    reference = pd.simulate_pd(spec, work, slo=(None, None), knobs=knobs).summary
    fleet = pdloop.simulate_fleet(spec, work, slo=(None, None), knobs=knobs).summary
    assert fleet.ttft_s.p95 > 2 * reference.ttft_s.p95
    assert fleet.ttft_s.mean > reference.ttft_s.mean
    assert fleet.e2e_s.mean == pytest.approx(reference.e2e_s.mean, rel=1e-2)
    # with D large enough the hold vanishes again
    wide = pdspec.spec_for(deployment("mindie", ctx=3200), counts=(1, 8))
    spare = pdloop.simulate_fleet(wide, work, slo=(None, None), knobs=knobs).summary
    assert spare.ttft_s.p95 < fleet.ttft_s.p95


@pytest.mark.parametrize("users", [1, 4, 16])
def test_closed_loop_keeps_k_users_in_the_system(users: int) -> None:
    work = closed(poisson((500, 1500), 100, count=20 * users, rate=None, seed=3), users)
    spec = pdspec.spec_for(deployment("mindie", ctx=1600), counts=(1, 1))
    result = pdloop.simulate_fleet(spec, work, slo=(None, None), knobs={})
    rec = result.records
    events = np.concatenate([np.stack([rec.arrival_s, np.ones(rec.arrival_s.size)]),
                             np.stack([rec.finish_s, -np.ones(rec.finish_s.size)])], axis=1)  # fmt: skip
    order = np.lexsort((events[1], events[0]))  # at equal times the finish (-1) comes first
    in_system = np.cumsum(events[1][order])
    assert in_system.max() == users
    assert np.sort(rec.arrival_s)[:users] == pytest.approx(np.zeros(users))
    # the next request goes out the moment one finishes: arrivals after the first K are finish times
    assert np.sort(rec.arrival_s)[users:] == pytest.approx(np.sort(rec.finish_s)[: rec.finish_s.size - users])
    assert result.summary.mean_in_system == pytest.approx(users, rel=0.05)


@given(
    engine=st.sampled_from(["vllm", "mindie"]),
    counts=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    count=st.integers(1, 60),
    load=st.one_of(st.floats(0.2, 50), st.integers(1, 12)),
    max_batch=st.integers(1, 16),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fleet_invariants(
    engine: str, counts: tuple[int, int], count: int, load: float, max_batch: int, seed: int
) -> None:
    """Open (rate) or closed (users) loops, tight decode caps: every request prefilled and decoded once, in
    order of time; every held and decode block returned at the end; no step (trace) over the batch cap."""
    users = load if isinstance(load, int) else None
    work = poisson((1, 800), 64, count=count, rate=None if users else float(load), seed=seed)
    work = closed(work, users) if users else work
    spec = pdspec.spec_for(deployment(engine, ctx=900), counts=counts)
    fleet = pdloop.Fleet(spec, work, knobs={"max_batch": max_batch})
    fleet.run()
    first, finish, arrival = (np.asarray(x) for x in (fleet.first, fleet.finish, fleet.arrival))
    transfer = pdspec.kv_transfer_s(spec, prompt_tokens=work.input_tokens)
    assert fleet.finished == count
    assert np.all(first >= arrival) and np.all(finish >= first + transfer - 1e-12)
    for eng in fleet.engines:
        assert eng.used_blocks == 0 and eng.holding == 0 and max(eng.trace[2], default=0) <= max_batch


BASE = ["simulate", "--model", "qwen3-8b", "--card", "ascend-950pr", "--dtype", "fp8", "--requests", "120",
        "--input-tokens", "uniform:200:1000", "--output-tokens", "64", "--pd", "1:2", "--json"]  # fmt: skip


def test_cli_pd_closed_loop() -> None:
    result = CliRunner().invoke(app, [*BASE, "--concurrency", "8"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["requests"] == 120 and out["pd"] == "1:2"
    assert out["mean_in_system"] == pytest.approx(8, rel=0.1)
    aggregated = run.simulate(
        deployment("mindie", ctx=1064), closed(poisson((200, 1000), 64, count=120, rate=None), 8)
    )
    assert aggregated.summary.requests == out["requests"]


@pytest.mark.parametrize("simulate", ["reference", "fleet"])
def test_vllm_pd_ttft_is_prefill_pull_admission_and_one_decode_step(simulate: str) -> None:
    """Hand-worked vLLM P:D TTFT (issue 23). vllm-ascend's proxy
    (examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py @93dbfa65,
    send_request_to_service: max_tokens 1, stream off, only kv_transfer_params kept; _handle_completions
    streams the decoder's response) so for one request on an idle 1:1 fleet:
        TTFT = prefill(I) + KV pull(I) + 0 (decode admission, slot and blocks free) + decode step(1, I),
    and the decoder generates all O tokens (O decode steps after admission), MindIE's TTFT ends at the
    prefill."""
    prompt, output = 2000, 64
    work = Workload(np.asarray([prompt]), np.asarray([output]), arrival_s=np.asarray([0.0]), concurrency=None)
    results = {}
    for engine in ("vllm", "mindie"):
        spec = pdspec.spec_for(deployment(engine, ctx=3200), counts=(1, 1))
        sim = pd.simulate_pd if simulate == "reference" else pdloop.simulate_fleet
        records = sim(spec, work, slo=(None, None), knobs={}).records
        wait_s = run.default_config(spec.prefill, workload=work).queue_delay_s if engine == "mindie" else 0.0
        prefill_s = roofline.ttft_s(spec.prefill, prompt_tokens=prompt) + wait_s  # MindIE: maxQueueDelay
        pull_s = float(pdspec.kv_transfer_s(spec, prompt_tokens=np.asarray([prompt]))[0])
        cfg = run.default_config(spec.decode, workload=work, scheduler="decode")
        table = run.build_table(spec.decode, cfg, work)
        results[engine] = (records, prefill_s, pull_s, table)
    records, prefill_s, pull_s, table = results["vllm"]
    step_s = table.decode_s(1, prompt)
    assert records.ttft_s[0] == pytest.approx(prefill_s + pull_s + step_s, rel=2e-3)
    # all O tokens from the decoder: O steps at contexts I .. I + O - 1 after the pull
    decode_s = sum(table.decode_s(1, prompt + k) for k in range(output))
    assert records.e2e_s[0] == pytest.approx(prefill_s + pull_s + decode_s, rel=2e-3)
    mindie, prefill_mindie_s, _, _ = results["mindie"]
    assert mindie.ttft_s[0] == pytest.approx(prefill_mindie_s, rel=2e-3)
    assert records.ttft_s[0] > mindie.ttft_s[0] + pull_s


@pytest.mark.parametrize("engine", ["mindie", "vllm"])
def test_decode_kv_is_the_whole_prompt_with_or_without_prefix_hits(engine: str) -> None:
    """A decode instance receives every prompt token's KV (the transfer is the whole prompt's,
    pdspec.kv_transfer_s): 8 closed-loop users with 3000-token prompts and 64-token outputs hold, by hand,
    8 x ceil((3000 + 64) / 128) = 8 x 24 = 192 blocks once all 8 decode (3064 tokens fit 24 blocks: no
    growth), whatever share of each prompt a prefix cache held on the prefill side. Before the fix the
    trace missed KV admitted and freed in one decode span: 0 blocks at F = 0.9."""
    lengths = (wl.LengthDist("fixed", 3000, 3000), wl.LengthDist("fixed", 64, 64))
    work = closed(wl.synthetic(lengths=lengths, count=40, rate_per_s=None, seed=0), 8)
    peaks = []
    for fraction in (0.0, 0.9):
        dep = deployment(engine, ctx=3100).model_copy(update={"prefix_cached_fraction": fraction})
        spec = pdspec.spec_for(dep, counts=(1, 1))
        summary = pdloop.simulate_fleet(spec, work, slo=(None, None), knobs={}).summary
        assert (summary.scheduler.block_tokens, summary.scheduler.state_blocks) == (128, 0)
        assert summary.max_batch_reached == 8
        peaks.append(round(summary.kv_peak_fraction * summary.scheduler.total_blocks))
    assert peaks == [192, 192]


@pytest.mark.parametrize(("engine", "per_pass"), [("mindie", 8), ("vllm", 4)])
def test_one_token_outputs_are_in_the_decode_batch_and_kv_peaks(engine: str, per_pass: int) -> None:
    """A one-token request's KV still reaches a decode instance (admitted, blocks allocated) and ends there
    at once (MindIE: the prefill instance's token was its only one) or after one step (vLLM: the decoder's
    token). 8 closed-loop users, 512-token prompts, by hand: the prefill instance hands over 8 at a time
    (MindIE: one batch of 8 x 512 <= 8192 tokens) or 4 (vLLM: 2048 / 512), each holding ceil(513 / 128) =
    5 blocks on the decode instance. Before the fix MindIE's decode trace missed them: batch 0, KV peak 0."""
    lengths = (wl.LengthDist("fixed", 512, 512), wl.LengthDist("fixed", 1, 1))
    work = closed(wl.synthetic(lengths=lengths, count=40, rate_per_s=None, seed=0), 8)
    spec = pdspec.spec_for(deployment(engine, ctx=1024), counts=(1, 1))
    summary = pdloop.simulate_fleet(spec, work, slo=(None, None), knobs={}).summary
    assert (summary.scheduler.block_tokens, summary.scheduler.state_blocks) == (128, 0)
    assert summary.max_batch_reached == per_pass
    assert round(summary.kv_peak_fraction * summary.scheduler.total_blocks) == 5 * per_pass


def test_the_fleet_charges_the_per_request_cost_as_every_other_path_does() -> None:
    """h67: a request reached a P:D fleet's prefill instance the moment it was sent, while the aggregated
    engine and the open-loop reference (pd.simulate_pd) see it the per-request cost outside the forward pass
    later (332.6 ms on the 950PR's MindIE fit): one user's TTFT was 80 ms with --pd 1:1 against 408 ms."""
    fitted = catalog.fitted_profile("ascend-950pr", "mindie")
    assert fitted is not None
    dep = deployment_950pr("qwen3.5-27b", engine="mindie", ctx_tokens=1024, calibrated=True).model_copy(
        update={"hardware": fitted}
    )
    overhead = roofline.request_overhead_s(dep)
    assert overhead > 0.1
    work = poisson((256, 256), 128, count=20, rate=0.5, seed=3)
    spec = pdspec.spec_for(dep, counts=(1, 1))
    fleet = pdloop.simulate_fleet(spec, work, slo=(None, None), knobs={}).records
    reference = pd.simulate_pd(spec, work, slo=(None, None), knobs={}).records
    assert fleet.first_token_s == pytest.approx(reference.first_token_s, rel=1e-9)
    assert np.all(fleet.ttft_s >= overhead)
    aggregated = run.simulate(dep, work).records
    assert fleet.ttft_s[0] == pytest.approx(aggregated.ttft_s[0], rel=1e-6)  # alone: the same prefill
