"""`kvplan simulate`: the stable JSON interface, the records CSV, and one line + exit code per bad input."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner import inputs
from planner.cli import app
from tests.helpers import replacing

runner = CliRunner()
BASE = ["simulate", "--model", "qwen3-8b", "--card", "ascend-950pr", "--dtype", "fp8"]
SMALL = [*BASE, "--input-tokens", "256", "--output-tokens", "64", "--requests", "200"]


def run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def test_json_keys_as_the_issue_lists_them() -> None:
    result = run(*SMALL, "--rate", "4", "--ttft-ms", "500", "--tpot-ms", "50", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    for key in ("requests", "duration_s", "mean_in_system", "max_batch_reached", "preemptions"):
        assert key in out
    assert set(out["throughput"]) >= {"output_tokens_per_s", "requests_per_s"}
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        assert set(out[name]) == {"mean", "p50", "p90", "p95", "p99"}
        assert out[name]["p50"] <= out[name]["p90"] <= out[name]["p95"] <= out[name]["p99"]
    assert out["requests"] == 200
    assert 0 <= out["goodput_requests_per_s"] <= out["throughput"]["requests_per_s"]


def test_goodput_only_with_slos_and_token_forms() -> None:
    result = run(*BASE, "--input-tokens", "1k", "--output-tokens", "uniform:16:64", "--requests", "50",
                 "--concurrency", "4", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["goodput_requests_per_s"] is None
    assert out["max_batch_reached"] <= 4


def test_records_csv_atomic_and_no_clobber(tmp_path: Path) -> None:
    target = tmp_path / "records.csv"
    first = run(*SMALL, "--rate", "2", "--out", str(target))
    assert first.exit_code == 0, first.output
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert len(rows) == 200
    assert {int(r["request"]) for r in rows} == set(range(200))
    assert all(float(r["e2e_s"]) >= float(r["ttft_s"]) >= 0 for r in rows)
    again = run(*SMALL, "--rate", "2", "--out", str(target))
    assert again.exit_code == 2
    assert again.output.count("\n") == 1 and "exists" in again.output
    forced = run(*SMALL, "--rate", "3", "--out", str(target), "--force")
    assert forced.exit_code == 0, forced.output
    assert target.with_name("records.csv.bak").exists()


def test_trace_file(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n0.5,100,20\n0,300,10\n2,50,5\n")
    result = run(*BASE, "--trace", str(trace), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["requests"] == 3


def test_a_trace_of_absolute_times_runs_from_its_first_arrival(tmp_path: Path) -> None:
    """Arrivals at 1 000 000 s and 1 000 001 s: the run lasts seconds, not a million (throughput > 0), the
    same as the trace shifted to start at 0."""
    late, early = tmp_path / "late.csv", tmp_path / "early.csv"
    late.write_text("arrival_s,input_tokens,output_tokens\n1000000,100,50\n1000001,100,50\n")
    early.write_text("arrival_s,input_tokens,output_tokens\n0,100,50\n1,100,50\n")
    shifted, plain = (json.loads(run(*BASE, "--trace", str(p), "--json").output) for p in (late, early))
    assert shifted["duration_s"] == plain["duration_s"] < 100
    assert shifted["throughput"] == plain["throughput"]


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--rate", "-1"], 2, "--rate: must be > 0"),
        (["--rate", "0"], 2, "--rate: must be > 0"),
        (["--rate", "nan"], 2, "--rate"),
        (["--rate", "2", "--concurrency", "3"], 2, "give exactly one"),
        ([], 2, "give exactly one"),
        (["--rate", "2", "--ttft-ms", "0"], 2, "--ttft-ms: must be > 0"),
        (["--rate", "2", "--tpot-ms", "-5"], 2, "--tpot-ms: must be > 0"),
        (["--concurrency", "0"], 2, "--concurrency"),
        (["--rate", "2", "--requests", "0"], 2, "--requests"),
        (["--rate", "2", "--input-tokens", "uniform:9:3"], 2, "--input-tokens"),
        (["--rate", "2", "--output-tokens", "lognormal:100:-1"], 2, "--output-tokens"),
        (["--rate", "2", "--input-tokens", "zipf:3:4"], 2, "--input-tokens"),
        (["--rate", "2", "--memory-gib", "4"], 3, "does not fit"),
    ],
)  # fmt: skip
def test_bad_input_one_line(args: list[str], code: int, needle: str) -> None:
    result = run(*replacing([*BASE, "--requests", "20"], args))
    assert result.exit_code == code, result.output
    assert result.output.startswith("kvplan: error: ")
    assert result.output.count("\n") == 1
    assert needle in result.output


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "bad header"),
        ("arrival_s,input_tokens,output_tokens\n", "expected 1.."),
        ("arrival_s,input_tokens,output_tokens\n0,abc,3\n", ":2: not three numbers"),
        ("arrival_s,input_tokens,output_tokens\n0,10,3\n-1,10,3\n", ":3: arrival_s out of range"),
        ("arrival_s,input_tokens,output_tokens\n0,10.5,3\n", "whole number"),
        ("arrival_s,input_tokens,output_tokens\n0,10,0\n", "output_tokens"),
        ("time,in,out\n0,1,1\n", "bad header"),
    ],
)
def test_bad_trace_one_line(tmp_path: Path, content: str, needle: str) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(content)
    result = run(*BASE, "--trace", str(trace))
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and needle in result.output


def test_trace_that_is_not_a_file(tmp_path: Path) -> None:
    result = run(*BASE, "--trace", str(tmp_path))
    assert result.exit_code == 2 and "not a regular file" in result.output


def test_timeline_csv(tmp_path: Path) -> None:
    target = tmp_path / "timeline.csv"
    result = run(*SMALL, "--rate", "4", "--timeline-out", str(target))
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert 2 <= len(rows) <= 2001
    times = [float(r["time_s"]) for r in rows]
    assert times == sorted(times)
    assert all(0 <= float(r["kv_used_fraction"]) <= 1 for r in rows)
    assert int(rows[-1]["in_system"]) == 0  # everything finished
    again = run(*SMALL, "--rate", "4", "--timeline-out", str(target))
    assert again.exit_code == 2 and "exists" in again.output


def test_a_mindie_prefill_budget_below_the_prompt_is_raised_not_refused() -> None:
    """MindIE's maxPrefillTokens >= maxInputTokenLen: a 9k prompt with --max-prefill-tokens 8192 is simulated
    with the budget raised to the prompt (docs/mindie.md Lengths), as the plan and `kvplan mindie` do."""
    flags = ["--rate", "2", "--engine", "mindie", "--input-tokens", "9k", "--max-prefill-tokens", "8192"]
    result = runner.invoke(app, ["simulate", "-m", "qwen3-8b", *flags, "--requests", "20", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["scheduler"]["max_prefill_tokens"] >= 9 * 1024


def test_one_token_outputs_report_the_batch_and_kv_they_held() -> None:
    """One-token outputs end at their prefill but held blocks during it: simulate's text and --json and
    serve's simulated line report the batch and KV they reached, not 0 (8 users, 512-token prompts on
    MindIE: one prefill batch of 8, 5 blocks each: tests/test_sim.py)."""
    flags = ["-m", "qwen3-8b", "--input-tokens", "512", "--output-tokens", "1"]
    text = runner.invoke(app, ["simulate", *flags, "--rate", "2", "--requests", "200"])
    assert text.exit_code == 0, text.output
    assert "batch reached 0 " not in text.output and "KV peak 0.0 %" not in text.output
    as_json = runner.invoke(app, ["simulate", *flags, "--concurrency", "8", "--requests", "80", "--json"])
    out = json.loads(as_json.stdout)
    assert out["max_batch_reached"] == 8
    assert round(out["kv_peak_fraction"] * out["scheduler"]["total_blocks"]) == 40
    serve = runner.invoke(app, ["serve", *flags, "--concurrency", "8"])
    assert serve.exit_code == 0, serve.output
    assert "batch reached 8," in serve.output


@pytest.mark.parametrize(
    "flags",
    [
        ["--engine", "vllm", "--max-batched-tokens", "4096"],  # the chunking engine's budget sizes the plan
        ["--engine", "mindie", "--input-tokens", "9k"],  # one-pass prefill raised to the longest prompt
        ["--engine", "mindie", "--max-prefill-tokens", "8192", "--pd", "1:1"],
    ],
)
def test_simulate_builds_its_deployment_once(monkeypatch: pytest.MonkeyPatch, flags: list[str]) -> None:
    """One run, one Deployment: the workload's prefill budget is decided before the build
    (inputs.workload_deployment), and the speed band reads the run's deployment. Before: 4 builds (two per
    prepared(), once for the run and once for the band) plus a copy raising the budget."""
    built: list[object] = []
    real = inputs.Deployment

    def counted(**fields: object) -> object:
        built.append(fields["engine"])
        return real(**fields)  # type: ignore[arg-type]

    monkeypatch.setattr(inputs, "Deployment", counted)
    result = run("simulate", "-m", "qwen3-8b", "--rate", "2", "--requests", "50", *flags, "--json")
    assert result.exit_code == 0, result.output
    assert len(built) == 1
