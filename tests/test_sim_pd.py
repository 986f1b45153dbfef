"""P:D disaggregation and the load searches of the simulator (planner/sim/pd.py, planner/sim/search.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from planner import memory
from planner.cli import app
from planner.deployment import Deployment
from planner.errors import PlanInputError
from planner.perf import roofline
from planner.sim import metrics, pd, pdspec, run, search
from planner.sim import workload as wl
from tests.helpers import deployment_950pr, kvplan

runner = CliRunner()


def deployment(engine: str, *, ctx: int, model: str = "qwen3-8b") -> Deployment:
    return deployment_950pr(model, engine=engine, ctx_tokens=ctx)


def poisson(prompt: tuple[int, int], output: int, *, count: int, rate: float, seed: int = 0) -> wl.Workload:
    lengths = (wl.LengthDist("uniform", *prompt), wl.LengthDist("fixed", output, output))
    return wl.synthetic(lengths=lengths, count=count, rate_per_s=rate, seed=seed)


@pytest.mark.parametrize(("text", "counts"), [("1:1", (1, 1)), ("2:3", (2, 3)), (" 4 : 1 ", (4, 1))])
def test_parse_pd(text: str, counts: tuple[int, int]) -> None:
    assert pdspec.parse_pd(text) == counts


@pytest.mark.parametrize("text", ["", "1", "1:", ":2", "0:1", "1:0", "a:b", "1:2:3", "-1:2", "65:1"])
def test_parse_pd_refuses(text: str) -> None:
    with pytest.raises(PlanInputError, match=r"^--pd: "):
        pdspec.parse_pd(text)


def test_kv_transfer_formula() -> None:
    dep = deployment("mindie", ctx=2048)
    spec = pdspec.spec_for(dep, counts=(1, 1), link_gbps=25.0)
    per_token = memory.kv_cache_bytes_per_token(dep.model, kv_dtype=dep.kv_dtype, tp=1)
    # 1000 tokens page to 1024 (8 blocks of 128); 25 GB/s; the card's latency (ascend-950pr: 20 us)
    expected = 20e-6 + 1024 * per_token / 25e9
    got = pdspec.kv_transfer_s(spec, prompt_tokens=np.asarray([1000]))
    assert got[0] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("engine", ["mindie", "vllm"])
def test_lone_requests_cost_prefill_transfer_and_decode(engine: str) -> None:
    prompt, output = 900, 40
    dep = deployment(engine, ctx=prompt + output)
    lengths = (wl.LengthDist("fixed", prompt, prompt), wl.LengthDist("fixed", output, output))
    lone = wl.synthetic(lengths=lengths, count=10, rate_per_s=None, seed=0)
    lone = wl.Workload(lone.input_tokens, lone.output_tokens, arrival_s=np.arange(10) * 1e3, concurrency=None)
    spec = pdspec.spec_for(dep, counts=(1, 2))
    result = pd.simulate_pd(spec, lone, slo=(None, None), knobs={})
    wait = result.summary.scheduler.queue_delay_s if engine == "mindie" else 0.0
    prefill = roofline.ttft_s(dep, prompt_tokens=prompt) + wait
    transfer = float(pdspec.kv_transfer_s(spec, prompt_tokens=np.asarray([prompt]))[0])
    if (
        engine == "vllm"
    ):  # the decoder's first step gives the first token, then O - 1 more (pdspec.decoder_emits_first)
        first_step = float(roofline.decode_step_s_grid(dep, batch=1, ctx_tokens=np.asarray([prompt]))[0])
        ttft, ctx = prefill + transfer + first_step, prompt + np.arange(output)
    else:
        ttft, ctx = prefill, prompt + 1 + np.arange(output - 1)
    assert result.records.ttft_s == pytest.approx(np.full(10, ttft), rel=5e-3)
    decode = float(np.sum(roofline.decode_step_s_grid(dep, batch=1, ctx_tokens=ctx)))
    assert result.records.e2e_s == pytest.approx(np.full(10, prefill + transfer + decode), rel=1e-2)


def test_disaggregation_cuts_the_ttft_tail_of_prefill_priority() -> None:
    """The seed's observation: with prefill and decode separated, a prompt never waits behind a decode batch
    and decodes never pause for prompts; at a load one MindIE instance still sustains, P95 TTFT and P99
    TPOT both fall with 1:1 (twice the cards)."""
    work = poisson((500, 3000), 200, count=600, rate=2.0, seed=7)
    dep = deployment("mindie", ctx=3200)
    together = run.simulate(dep, work).summary
    spec = pdspec.spec_for(dep, counts=(1, 1))
    apart = pd.simulate_pd(spec, work, slo=(None, None), knobs={}).summary
    assert apart.ttft_s.p95 < together.ttft_s.p95
    assert apart.tpot_s.p99 < together.tpot_s.p99
    assert apart.requests == together.requests == 600


def test_open_loop_reference_refuses_a_closed_loop() -> None:
    """pd.simulate_pd is the open-loop reference; closed loops run in planner/sim/pdloop.py."""
    work = poisson((100, 200), 20, count=10, rate=1.0)
    closed = wl.Workload(work.input_tokens, work.output_tokens, arrival_s=None, concurrency=2)
    spec = pdspec.spec_for(deployment("vllm", ctx=220), counts=(1, 1))
    with pytest.raises(PlanInputError, match=r"^--pd: a closed loop"):
        pd.simulate_pd(spec, closed, slo=(None, None), knobs={})


# --- searches


def test_max_rate_search_brackets_the_slo() -> None:
    dep = deployment("vllm", ctx=1300)

    def run_at(rate: float) -> metrics.SimSummary:
        return run.simulate(dep, poisson((200, 1000), 128, count=400, rate=rate, seed=1)).summary

    slo = (0.5, None)
    found = search.search(run_at, kind="max-rate", slo=slo, quantile="p99", span=("rate", 0.5, 8.0))
    assert found.best is not None
    best = next(p for p in found.points if p.x == found.best)
    assert best.meets_slo and best.ttft_s <= 0.5
    above = [p for p in found.points if p.x > found.best]
    assert above and not any(p.meets_slo for p in above[:1])  # the next load probed above misses
    assert [p.x for p in found.points] == sorted(p.x for p in found.points)


def test_knee_is_the_load_of_largest_power() -> None:
    dep = deployment("mindie", ctx=400)

    def run_at(users: float) -> metrics.SimSummary:
        lengths = (wl.LengthDist("fixed", 256, 256), wl.LengthDist("fixed", 128, 128))
        work = wl.synthetic(lengths=lengths, count=max(int(users) * 6, 60), rate_per_s=None, seed=0)
        closed = wl.Workload(work.input_tokens, work.output_tokens, arrival_s=None, concurrency=int(users))
        return run.simulate(dep, closed).summary

    found = search.search(run_at, kind="knee", slo=(None, None), quantile="p99", span=("concurrency", 1, 256))
    power = {p.x: p.output_tokens_per_s / p.e2e_s for p in found.points}
    assert found.best == max(power, key=lambda x: power[x])
    assert 1 < found.best < 256  # neither end: throughput saturates, latency keeps growing


def test_search_needs_an_slo() -> None:
    with pytest.raises(PlanInputError, match=r"^--search: needs an SLO"):
        search.search(lambda x: None, kind="max-rate", slo=(None, None), quantile="p99", span=("rate", 1, 2))  # type: ignore[arg-type,return-value]


# --- CLI

BASE = ["simulate", "--model", "qwen3-8b", "--card", "ascend-950pr", "--dtype", "fp8", "--requests", "200",
        "--input-tokens", "uniform:200:1000", "--output-tokens", "64"]  # fmt: skip


def test_cli_pd_json() -> None:
    result = runner.invoke(app, [*BASE, "--rate", "3", "--pd", "1:2", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["pd"] == "1:2" and out["requests"] == 200
    assert out["scheduler"]["scheduler"] == "decode"


def test_cli_search_json() -> None:
    result = runner.invoke(app, [*BASE, "--rate", "8", "--search", "max-rate", "--ttft-ms", "400", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["kind"] == "max-rate" and out["load"] == "rate" and out["quantile"] == "p99"
    assert out["best"] is None or any(p["x"] == out["best"] and p["meets_slo"] for p in out["points"])


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--rate", "2", "--pd", "1"], 2, "--pd: not a P:D"),
        (["--rate", "2", "--pd", "1:1", "--memory-gib", "8"], 3, "does not fit"),
        (["--rate", "2", "--pd", "1:1", "--kv-link-gbps", "nan"], 2, "--kv-link-gbps"),
        (["--rate", "2", "--pd", "1:1", "--prefill-tp", "0"], 2, "--prefill-tp"),
        (["--rate", "2", "--search", "max-rate"], 2, "needs an SLO"),
        (["--concurrency", "4", "--search", "max-rate", "--ttft-ms", "100"], 2, "needs --rate"),
        (["--rate", "2", "--search", "fastest"], 2, "--search"),
        (["--rate", "2", "--queue-delay-us", "nan"], 2, "--queue-delay-us"),
        (["--rate", "2", "--max-batch", "999999"], 2, "--max-batch"),
    ],
)  # fmt: skip
def test_cli_bad_pd_and_search_one_line(args: list[str], code: int, needle: str) -> None:
    result = runner.invoke(app, [*BASE, *args])
    assert result.exit_code == code, result.output
    assert result.output.startswith("kvplan: error: ") and result.output.count("\n") == 1
    assert needle in result.output


def fake_summary(ttft_s: float, tpot_s: float, goodput: float) -> metrics.SimSummary:
    """A real summary with its TTFT/TPOT tails and goodput replaced (search logic only)."""
    dep = deployment("vllm", ctx=300)
    base = run.simulate(dep, poisson((100, 200), 16, count=20, rate=1.0)).summary
    tails = {"ttft_s": base.ttft_s.model_copy(update={"p99": ttft_s}),
             "tpot_s": base.tpot_s.model_copy(update={"p99": tpot_s})}  # fmt: skip
    return base.model_copy(update={**tails, "goodput_requests_per_s": goodput})


def test_pd_search_picks_the_fewest_cards_then_the_best_goodput() -> None:
    """Prefill capacity sets TTFT (falls with P), decode capacity TPOT (falls with D): 2:2 and 3:1 both meet
    at 4 cards; the search stops there and keeps the one of larger goodput."""
    calls: list[str] = []

    def run_pd(p: int, d: int) -> metrics.SimSummary:
        calls.append(f"{p}:{d}")
        return fake_summary(ttft_s=1.0 / p, tpot_s=0.1 / d if p < 3 else 0.04, goodput=p + 2 * d)

    found = search.search_pd(run_pd, devices_of=lambda p, d: p + d, slo=(0.5, 0.05), quantile="p99")
    assert found.best == "2:2" and found.devices == 4
    assert all(int(c[0]) + int(c[-1]) <= 4 for c in calls)  # no 5-card fleet simulated
    assert {"1:1", "1:2", "2:1", "1:3", "2:2", "3:1"} == set(calls)


def test_pd_search_cli(tmp_path: object) -> None:
    args = [*BASE, "--rate", "2", "--search", "pd", "--ttft-ms", "2000", "--tpot-ms", "200", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["kind"] == "pd" and out["best"] == "1:1" and out["devices"] == 2  # a loose SLO: the smallest


@given(
    engine=st.sampled_from(["vllm", "mindie"]),
    counts=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    count=st.integers(1, 60),
    rate=st.floats(0.2, 50),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_pd_invariants(engine: str, counts: tuple[int, int], count: int, rate: float, seed: int) -> None:
    """Every request is prefilled once and decoded once: first token after arrival, last after the first
    token plus its KV transfer; requests and output tokens conserved across the P + D instances."""
    work = poisson((1, 800), 64, count=count, rate=rate, seed=seed)
    dep = deployment(engine, ctx=900)
    spec = pdspec.spec_for(dep, counts=counts)
    result = pd.simulate_pd(spec, work, slo=(None, None), knobs={})
    rec = result.records
    transfer = pdspec.kv_transfer_s(spec, prompt_tokens=rec.input_tokens)
    assert result.summary.requests == count
    assert np.all(rec.first_token_s >= rec.arrival_s)
    assert np.all(rec.finish_s >= rec.first_token_s + transfer - 1e-12)
    assert int(rec.output_tokens.sum()) == 64 * count
    assert result.summary.prefill_tokens >= int(rec.input_tokens.sum())
    assert result.summary.max_batch_reached <= result.summary.scheduler.max_batch


@pytest.mark.parametrize(
    ("engine", "ttft_words"),
    [("vllm", "P:D TTFT = prefill + KV pull"), ("mindie", "P:D TTFT ends with the prefill")],
)
def test_every_pd_result_says_what_its_ttft_is_and_what_pd_is_not(engine: str, ttft_words: str) -> None:
    """Issue 23: wherever P:D results are shown, the TTFT's parts for the engine (pdspec.decoder_emits_first)
    and that the seed's prefill/decode separation inside one card is not modelled, in text and in --json."""
    from planner.sim import pdloop

    args = f"simulate -m qwen3-8b --card ascend-910b3 --engine {engine} --pd 1:1 --rate 2 --requests 40"
    text = kvplan(args).output
    notes = [line.removeprefix("note: ") for line in text.splitlines() if line.startswith("note: P:D")]
    assert len(notes) == 2 and notes[0].startswith(ttft_words)
    assert notes[1] == pdloop.SINGLE_CARD_SEPARATION
    assert json.loads(kvplan(args + " --json").output)["notes"][:2] == notes  # then the speed band's
    aggregated = kvplan(args.replace(" --pd 1:1", "")).output
    assert "P:D" not in aggregated
