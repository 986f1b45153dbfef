"""Every published row kvplan predicts has a `kvplan serve` (or, open loop, `kvplan simulate`) command that
a user can run (issue 23).

lab/published/predictions-after.csv records, for each predicted row, the command that gives the
prediction. Each one runs here through the CLI in-process, exactly as typed (the `kvplan` word dropped),
with --json: it must exit 0 (no refusal of a load the engine ran) and its instance output tok/s
(`instance_output_tokens_per_s` = dp x one DP group's analytic closed loop) must be the CSV's prediction
(the fit's code path, planner/fit/serving_rows.py) to the CSV's one decimal. A prefill/decode disaggregated
row's `kvplan simulate --pd` command (predict.pd_command) is the prediction itself: its simulated output
tok/s must equal the CSV's to one decimal. They run at the benchmark's own prompt counts (at most 2880
requests, about 1 s of CPU each), so no smaller count stands in. So is an open-loop run past the engine's
capacity (predict.finite_run_command: `kvplan simulate --rate R --num-requests N`, N the run's own count, up
to 2700): its simulated output tok/s is the prediction, to one decimal. A CloudMatrix-Infer decode figure's
command is kvplan's decode speed (predict.decode_speed_command: `kvplan -m ... --batch B --ctx C`): its decode
tok/s per 910C package (predict.per_package) is the prediction, to one decimal.
"""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app

PREDICTIONS = Path(__file__).resolve().parents[1] / "lab" / "published" / "predictions-after.csv"
ROUNDING_TOKENS_PER_S = 0.05 + 1e-9  # the CSV prints predictions with one decimal
# An analytic open-loop row's prediction is the arrival rate's output (predict.py predicts so only runs that
# kept up; runs past capacity are simulated predictions, is_simulated_prediction); a finite simulated run of
# Poisson arrivals reaches it within its sampling noise and its drain.
OPEN_LOOP_TOLERANCE = 0.1


def predicted_rows() -> list[dict[str, str]]:
    with PREDICTIONS.open(encoding="utf-8") as handle:
        return [row for row in csv.DictReader(handle) if row["status"] == "predicted"]


ROWS = predicted_rows()


def is_simulated_prediction(command: str) -> bool:
    """A command whose simulation is the prediction itself: a disaggregated row's (predict.pd_command) or
    an open-loop run past capacity's, which names its request count (predict.finite_run_command)."""
    open_loop = command.startswith("kvplan simulate ") and " --rate " in command
    return " --pd " in command or (open_loop and " --num-requests " in command)


@pytest.mark.lab
def test_every_predicted_row_has_a_command() -> None:
    assert len(ROWS) >= 100
    assert all(row["command"].startswith(("kvplan serve ", "kvplan simulate ", "kvplan -m ")) for row in ROWS)
    decode_speed = [row["row"] for row in ROWS if row["command"].startswith("kvplan -m ")]
    assert decode_speed == ["111", "112"]  # the CloudMatrix384 paper's decode figures only
    assert not any("#" in row["command"] for row in ROWS)


@pytest.mark.slow
@pytest.mark.lab
@pytest.mark.parametrize("row", ROWS, ids=[row["row"] for row in ROWS])
def test_recorded_command_runs_and_gives_the_prediction(row: dict[str, str]) -> None:
    args = [*shlex.split(row["command"])[1:], "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (row["row"], result.output[-400:])
    payload = json.loads(result.stdout)
    if row["command"].startswith("kvplan -m "):  # a decode instance's speed, per 910C package
        from lab.published import predict

        got = predict.per_package(payload)
        assert abs(got - float(row["predicted_tokens_per_s"])) <= ROUNDING_TOKENS_PER_S, (row["row"], got)
        return
    if is_simulated_prediction(row["command"]):  # the same seeded simulation as predict.py ran
        got = payload["throughput"]["output_tokens_per_s"]
        assert abs(got - float(row["predicted_tokens_per_s"])) <= ROUNDING_TOKENS_PER_S, (row["row"], got)
        return
    if row["command"].startswith("kvplan simulate "):  # open loop: the simulated run keeps up with the rate
        got = payload["throughput"]["output_tokens_per_s"]
        assert got == pytest.approx(float(row["predicted_tokens_per_s"]), rel=OPEN_LOOP_TOLERANCE), row["row"]
        return
    got = payload["instance_output_tokens_per_s"]
    assert abs(got - float(row["predicted_tokens_per_s"])) <= ROUNDING_TOKENS_PER_S, (row["row"], got)
