"""Issue 25, "Clean, scriptable outputs": a command's artifact alone on stdout, tables and notes on stderr."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app, sweep

runner = CliRunner()
MINDIE = ["mindie", "--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8", "--weights-path", "/w"]


def test_mindie_writes_the_config_alone_on_stdout() -> None:
    result = runner.invoke(app, MINDIE)
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)  # the whole of stdout is the config.json
    assert config["BackendConfig"]["ModelDeployConfig"]["maxSeqLen"] == 32768  # --ctx 32k
    assert "Memory per device" in result.stderr and "maxBatchSize" in result.stderr


def test_mindie_out_leaves_stdout_empty(tmp_path: Path) -> None:
    out = tmp_path / "config.json"
    result = runner.invoke(app, [*MINDIE, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and f"wrote {out}" in result.stderr
    assert json.loads(out.read_text())["BackendConfig"]["ModelDeployConfig"]["maxSeqLen"] == 32768


def test_a_large_sweep_table_shows_its_frontier_and_says_what_it_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sweep, "MAX_TABLE_ROWS", 10)
    grid = ["sweep", "-m", "qwen3-27b", "--dtype", "fp8", "--batch", "1-64", "--ctx", "4k,128k"]
    table = runner.invoke(app, grid, terminal_width=200)
    assert table.exit_code == 0, table.output
    rows = [line.split("│")[1:-1] for line in table.stdout.splitlines() if line.startswith("│ fp8")]
    assert 2 <= len(rows) <= 10
    assert all(cells[-1].strip() == "yes" for cells in rows)  # the frontier fits memory
    assert (
        f"{len(rows)} of 128 points shown" in table.stdout and f"{128 - len(rows)} left out" in table.stdout
    )
    every = list(csv.DictReader(io.StringIO(runner.invoke(app, [*grid, "--format", "csv"]).stdout)))
    assert len(every) == 128  # csv keeps every point
    for ctx in ("4096", "131072"):  # the frontier's aggregate rises with batch
        shown = [float(c[6].split()[0]) for c in rows if c[2].strip() == ctx]
        assert shown == sorted(shown)


def test_a_small_sweep_table_shows_every_point() -> None:
    grid = ["sweep", "-m", "qwen3-27b", "--dtype", "fp8", "--batch", "1,4", "--ctx", "4k"]
    table = runner.invoke(app, grid, terminal_width=200)
    assert sum(line.startswith("│ fp8") for line in table.stdout.splitlines()) == 2
    assert "left out" not in table.stdout
