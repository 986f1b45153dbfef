"""Issue 25, "Clean, scriptable outputs": a command's artifact alone on stdout, tables and notes on stderr."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app

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
