"""Alauda's open-loop runs past the engine's capacity: predicted as the finite run each was, or, where the
engine failed the run, answered with kvplan's overload verdict for it and the evidence (issue 23;
lab/published/open_loop_runs.py).

guidellm sent R req/s for 300 s (`--max-seconds 300`, quoted in each row's notes), so a row at 6 req/s is
`kvplan simulate --rate 6 --num-requests 1800`; none of these rows is fitted (predict._skip_reason is set).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab  # reads the lab's data or scripts (tests/conftest.py: lab implies slow)

PUBLISHED = Path(__file__).resolve().parents[1] / "lab" / "published"


def corpus() -> dict[int, dict[str, str]]:
    with (PUBLISHED / "ascend-serving.csv").open(encoding="utf-8") as handle:
        return dict(enumerate(csv.DictReader(handle), start=2))


def predictions() -> dict[int, dict[str, str]]:
    with (PUBLISHED / "predictions-after.csv").open(encoding="utf-8") as handle:
        return {int(row["row"]): row for row in csv.DictReader(handle)}


def past_capacity_rows() -> dict[int, dict[str, str]]:
    from lab.published import predict

    out = {}
    for index, row in corpus().items():
        rate = predict.open_loop_rate(row)
        if rate is None or not row["output_tokens"]:
            continue
        if float(row["output_tokens_per_s"]) < predict.STEADY_SHARE * rate * float(row["output_tokens"]):
            out[index] = row
    return out


def test_every_run_past_capacity_is_predicted_or_named_a_failure() -> None:
    from lab.published import predict

    rows, recorded = past_capacity_rows(), predictions()
    predicted = [i for i in rows if recorded[i]["status"] == "predicted"]
    failures = [i for i in rows if recorded[i]["status"].startswith(f"{predict.VERDICT}: ")]
    # 122 Alauda levels past capacity (lab/published/README.md): 105 simulated, 17 failures (verdict); two
    # `vllm bench serve` runs (issue 27's fourth pass): line 420 is simulated as its 200 prompts
    # (FINITE_PROMPTS, test below), and so is line 421, at an assumed tp (assumed_settings.py, not fitted);
    # the Kimi-K2-Thinking tutorial's three runs of 10 prompts at 1 req/s (lines 427-429, held out) likewise
    assert (len(rows), len(predicted), len(failures)) == (127, 110, 17)
    assert set(rows) - set(predicted) - set(failures) == set()
    for index in (427, 428, 429):
        assert predict._skip_reason(rows[index]) == predict.FINITE_PROMPTS
        assert " --rate 1 " in recorded[index]["command"]
        assert " --num-requests 10 " in recorded[index]["command"]
    for index in set(predicted) - {420, 421, 427, 428, 429}:
        rate = predict.open_loop_rate(rows[index]) or 0.0
        assert f" --rate {rate:g} " in recorded[index]["command"]
        assert f" --num-requests {round(rate * 300)} " in recorded[index]["command"]  # R x 300 s
        assert predict._skip_reason(rows[index]) == predict.PAST_CAPACITY  # hence never fitted


def test_recorded_command_is_the_finite_run_command() -> None:
    from lab.published import predict

    row = corpus()[224]  # Qwen3-14B TP1 vllm-ascend, Chat 520/256 at 6 req/s
    assert predict.finite_run_command(row, card="ascend-910b3") == predictions()[224]["command"]


def test_collapse_names_its_evidence() -> None:
    from lab.published import open_loop_runs

    # line 340: 5.5 tok/s at 6 req/s (RAG 4104/512, Qwen3-30B-A3B TP4); 639.9 at 2 req/s; one request
    why = open_loop_runs.failure_evidence(corpus()[340])
    assert why is not None
    assert "5.5 tok/s is 0.9% of the 639.9 this set-up made at 2 req/s" in why
    assert "E2E p90 = p99 = 93526 ms" in why


def test_a_run_the_engine_failed_gets_the_overload_verdict_of_its_own_finite_run() -> None:
    """Line 340 (Qwen3-30B-A3B TP4 vllm-ascend, RAG 4104/512 at 6 req/s, 5.5 tok/s: the engine failed): its
    prediction is `kvplan simulate --rate 6 --num-requests 1800` of that run, exactly as typed, and the
    simulation's overload verdict, with the evidence of the failure; no error (no serving result to miss),
    never fitted. Every recorded failure row is answered the same way."""
    from lab.published import open_loop_runs, predict

    rows, recorded = corpus(), predictions()
    reason = predict._skip_reason(rows[340])
    assert reason is not None and reason.startswith(open_loop_runs.ENGINE_FAILURE)
    result = predict.predict_row(340, rows[340], profile_dir=None, fitted=True)
    assert result["command"] == predict.finite_run_command(rows[340], card="ascend-910b3")
    assert " --rate 6 " in result["command"] and " --num-requests 1800 " in result["command"]
    answer = predict.simulate_json(result["command"])
    expected = "overloaded" if answer["overloaded"] else "keeps up"
    assert result["status"] == f"{predict.VERDICT}: {expected}; the engine failed this run ({reason})"
    assert result["error"] == "" and float(result["predicted_tokens_per_s"]) > 0
    assert result == {key: recorded[340][key] for key in result}  # the recorded row is this run's answer
    verdicts = [row for row in recorded.values() if row["status"].startswith(f"{predict.VERDICT}: ")]
    assert len(verdicts) == 17 and all(not row["error"] and row["command"] for row in verdicts)


def test_a_short_open_loop_of_stated_prompts_is_simulated_as_that_many_requests() -> None:
    """Line 420: vllm-ascend's benchmark guide, 200 Poisson prompts (`--num-prompts 200`) at 4 req/s with no
    run length; below predict.STEADY_SHARE of its arrivals because ramp and drain fill most of its 72.55 s.
    Predicted by `kvplan simulate --rate 4 --num-requests 200`, exactly as typed, never fitted."""
    from lab.published import predict

    row, recorded = corpus()[420], predictions()[420]
    assert predict._skip_reason(row) == predict.FINITE_PROMPTS
    assert recorded["status"] == "predicted"
    assert recorded["command"] == predict.finite_prompts_command(row, card=row["card"])
    assert " --rate 4 " in recorded["command"] and " --num-requests 200 " in recorded["command"]
    answer = predict.simulate_json(recorded["command"])
    assert answer["requests"] == 200
    simulated_per_s = answer["throughput"]["output_tokens_per_s"]
    published_per_s = float(row["output_tokens_per_s"])
    assert float(recorded["error"]) == pytest.approx(simulated_per_s / published_per_s - 1, abs=5e-4)


def test_a_saturated_run_that_still_served_is_no_failure() -> None:
    from lab.published import open_loop_runs

    # line 224: 1365.3 tok/s at 6 req/s, the best of its sweep's saturated levels: a serving result
    assert open_loop_runs.failure_evidence(corpus()[224]) is None


def test_run_length_needs_the_stated_max_seconds() -> None:
    from lab.published import open_loop_runs

    assert open_loop_runs.run_requests(corpus()[224], rate_per_s=6.0) == 1800  # 6 req/s x 300 s
    assert open_loop_runs.run_requests({"notes": "no length"}, rate_per_s=6.0) is None


def test_arrival_bound_ci_floors_are_their_finite_paced_runs() -> None:
    """Lines 106 and 389 (issue 23): CI cases whose client paced its requests (request_rate x output tokens
    about the throughput) are predicted by `kvplan simulate --rate R --num-requests N` with N the case's
    num_prompts and the client's in-flight cap as --max-batch, never fitted."""
    from lab.published import predict

    rows, recorded = corpus(), predictions()
    expected = {106: ("20", "1000", "40"), 389: ("0.02", "16", "4")}  # rate, num_prompts, in-flight cap
    for index, (rate, prompts, cap) in expected.items():
        assert predict._skip_reason(rows[index]) == predict.ARRIVAL_BOUND  # hence never fitted
        assert recorded[index]["status"] == "predicted"
        command = recorded[index]["command"]
        assert command == predict.arrival_bound_command(rows[index], card=rows[index]["card"])
        assert f" --rate {rate} " in command and f" --num-requests {prompts} " in command
        assert f" --max-batch {cap} " in command
    assert not any(r["status"].startswith("skipped: arrival-bound") for r in recorded.values())


def test_the_summary_tells_finite_runs_that_kept_up_from_runs_past_capacity() -> None:
    """predict.summary's kinds: line 176 (W4A4, kept up with 1 req/s) is a "(finite run)"; line 420 (below 0.9
    of its arrivals) and line 224 (guidellm past capacity) are "(past capacity)"; line 106 (a paced CI floor)
    is "(arrival-bound)"; a closed loop gets no suffix."""
    from lab.published import predict

    recorded = predictions()

    def suffix(line: int) -> str:
        row = recorded[line]
        return predict.kind_suffix(row["command"], kind=row["kind"], kept_up=predict.kept_up(row))

    past, finite = " (past capacity)", " (finite run)"
    expected = {176: finite, 420: past, 224: past, 106: " (arrival-bound)"}
    assert {line: suffix(line) for line in expected} == expected
    closed = next(line for line, row in recorded.items() if row["command"].startswith("kvplan serve "))
    assert suffix(closed) == "" and not predict.kept_up(recorded[closed])
