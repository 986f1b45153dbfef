"""kvplan's capacity against the published saturation rates (lab/published/saturation-capacity.csv).

Each workload's recorded `kvplan simulate` probe runs here through the CLI exactly as typed (the `kvplan`
word dropped) with --json: it must exit 0, call the load overloaded, and complete the recorded requests/s;
the recorded verdicts must be the published rates above that capacity. The table is remade by
`PYTHONPATH=. python lab/published/saturation.py`.
"""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app

TABLE = Path(__file__).resolve().parents[1] / "lab" / "published" / "saturation-capacity.csv"
RECORDED_DIGITS = 3  # the CSV prints capacities with 3 significant digits


def table() -> list[dict[str, str]]:
    with TABLE.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


PROBED = [row for row in table() if row["predicted_capacity_per_s"]]


@pytest.mark.lab
def test_every_saturation_workload_is_probed_or_says_why() -> None:
    rows = table()
    assert len(rows) >= 20
    assert all(row["command"].startswith("kvplan simulate ") for row in rows)
    assert all(row["predicted_capacity_per_s"] or row["status"].startswith("not saturated") for row in rows)


@pytest.mark.lab
@pytest.mark.parametrize("row", PROBED, ids=[row["workload"] for row in PROBED])
def test_recorded_verdicts_follow_the_recorded_capacity(row: dict[str, str]) -> None:
    capacity = float(row["predicted_capacity_per_s"])
    rates = [float(rate) for rate in row["published_rates"].split()]
    above = [rate for rate in rates if rate > capacity]
    assert row["predicted_past"].split() == [f"{rate:g}" for rate in above]
    published_past = set(row["published_past"].split())
    agree = sum((f"{rate:g}" in published_past) == (rate > capacity) for rate in rates)
    assert row["verdicts_agree"] == f"{agree}/{len(rates)}"


@pytest.mark.slow
@pytest.mark.lab
@pytest.mark.parametrize("row", PROBED, ids=[row["workload"] for row in PROBED])
def test_recorded_probe_runs_and_gives_the_capacity(row: dict[str, str]) -> None:
    result = CliRunner().invoke(app, [*shlex.split(row["command"])[1:], "--json"])
    assert result.exit_code == 0, result.output[-400:]
    payload = json.loads(result.stdout)
    assert payload["overloaded"] is True
    got = payload["throughput"]["requests_per_s"]
    assert f"{got:.{RECORDED_DIGITS}g}" == row["predicted_capacity_per_s"]
