"""The dashboard's Load tab (dashboard/load.py): it renders the simulator's figures without an error."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from dashboard import load
from planner.sim import workload as wl

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_load_tab_renders() -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert "Load" in [tab.label for tab in at.tabs]
    at.session_state["tab"] = "Load"  # lazy tabs: the simulations run only once the tab is open
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    tables = [frame.value for frame in at.dataframe]
    rows = [row for frame in tables for row in frame.to_dict("records") if "P95 TTFT ms" in row]
    assert {row[""] for row in rows} >= {"aggregated", "P:D 1:1"}
    assert all(row["P95 TTFT ms"] > 0 for row in rows)
    # every simulated speed carries the plan's range: a band (filled trace) or error bars in each figure
    figures = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    titles = [fig["layout"]["title"]["text"] for fig in figures]
    assert "End-to-end latency vs concurrency" in titles and "End-to-end latency CDF" not in titles
    ranged = [
        fig for fig in figures
        if any(t.get("fill") == "tonexty" or "error_x" in t for t in fig["data"])
    ]  # fmt: skip
    assert len(ranged) >= 3  # TTFT tails, E2E, throughput-latency
    ttft_cdf = next(fig for fig in figures if fig["layout"]["title"]["text"] == "TTFT CDF")
    assert ttft_cdf["layout"]["xaxis"]["type"] == "log"


def test_workload_helper_is_closed_or_open() -> None:
    closed = load.workload(100, 10, users=4, rate=None, count=20)
    assert closed.arrival_s is None and closed.concurrency == 4
    open_loop = load.workload(100, 10, users=None, rate=2.0, count=20)
    assert open_loop.arrival_s is not None and np_all_sorted(open_loop)


def np_all_sorted(work: wl.Workload) -> bool:
    assert work.arrival_s is not None
    return bool((work.arrival_s[1:] >= work.arrival_s[:-1]).all())
