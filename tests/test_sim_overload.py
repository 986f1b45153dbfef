"""The overload verdict (issue 23): `simulate` says OVERLOADED when the queue grows without bound."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from planner.cli import app
from planner.sim import metrics
from planner.sim.metrics import Records

runner = CliRunner()
SIM = ["simulate", "-m", "qwen3-27b", "--dtype", "fp8", "--input-tokens", "1k", "--output-tokens", "256"]


def records(arrival: np.ndarray, ttft: np.ndarray, service_s: float) -> Records:
    count = arrival.size
    first = arrival + ttft
    return Records(
        arrival_s=arrival, input_tokens=np.full(count, 10), output_tokens=np.full(count, 2),
        first_token_s=first, finish_s=first + service_s, preemptions=np.zeros(count, dtype=np.int64),
    )  # fmt: skip


def test_overload_needs_a_backlog_and_a_growing_ttft() -> None:
    arrival = np.arange(400, dtype=np.float64)
    growing = records(arrival, ttft=0.5 * arrival, service_s=1.0)  # each waits half its arrival time
    flat_long = records(arrival, ttft=np.full(400, 60.0), service_s=1.0)  # slow but steady: big backlog
    assert metrics.overload(growing)[1]
    backlog, overloaded = metrics.overload(flat_long)
    assert backlog == 61 and not overloaded  # requests 339..399 unfinished at t = 399


def test_cli_verdicts() -> None:
    hot = runner.invoke(app, [*SIM, "--rate", "20", "--requests", "400", "--json"])
    cool = runner.invoke(app, [*SIM, "--rate", "0.2", "--requests", "200", "--json"])
    closed = runner.invoke(app, [*SIM, "--concurrency", "64", "--requests", "400", "--json"])
    assert json.loads(hot.stdout)["overloaded"] is True
    assert json.loads(cool.stdout)["overloaded"] is False
    assert json.loads(closed.stdout)["overloaded"] is False
    text = runner.invoke(app, [*SIM, "--rate", "20", "--requests", "400"])
    assert "verdict: OVERLOADED" in text.output
