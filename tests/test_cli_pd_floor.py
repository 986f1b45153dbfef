"""Issue 25: `simulate --search pd` with a --tpot-ms below one request's TPOT alone answers at once."""

from __future__ import annotations

import dataclasses

import pytest
from typer.testing import CliRunner

from planner import kinds
from planner.cli import app, simulate
from planner.cli.simrequest import SimulateRequest
from planner.inputs import PlanRequest

runner = CliRunner()
SEARCH = [
    "simulate",
    "-m",
    "qwen3-27b",
    "--dtype",
    "fp8",
    "--rate",
    "2",
    "--requests",
    "200",
    "--search",
    "pd",
]


def test_pd_search_below_the_single_request_floor_says_so_without_simulating(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_simulation(*_: object) -> None:
        raise AssertionError("simulated a P:D split although no split can meet the TPOT")

    monkeypatch.setattr(simulate, "summary_at", no_simulation)
    result = runner.invoke(app, [*SEARCH, "--tpot-ms", "20", "--ttft-ms", "2000"])
    assert result.exit_code == 3, result.output
    assert "kvplan: error: --tpot-ms: no P:D split can meet it (got 20 ms, expected >= " in result.output
    assert "one request alone on a decode instance (tp=1)" in result.output


def test_the_floor_is_below_what_one_split_simulates() -> None:
    flags = SimulateRequest(
        request=PlanRequest(model="qwen3-27b", dtype="fp8"), rate=0.2, requests=50, pd="1:1", tpot_ms=1000
    )
    floor_s, ctx_tokens = simulate.tpot_floor_s(flags)
    assert ctx_tokens == kinds.DEFAULT_INPUT_TOKENS + 1  # the default prompt + the first generated token
    summary = simulate.summary_at(dataclasses.replace(flags, pd="1:1"), {})
    assert floor_s <= summary.tpot_s.p50 <= summary.tpot_s.p99
    assert summary.tpot_s.p50 < 1.1 * floor_s  # a low rate runs near the floor: it is not a loose bound
