"""The whole repository (product, lab, benchmarks and tests) passes the linter and the formatter under
pyproject.toml's [tool.ruff] rules: 110-character lines, sorted imports, complexity <= 10. The test runs the
ruff the dev extras install; without it (a bare install) it skips."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m ruff ARGS .` at the repository root."""
    pytest.importorskip("ruff", reason="ruff comes with the dev extras (pip install -e '.[dev]')")
    command = [sys.executable, "-m", "ruff", *args, "."]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def test_every_python_file_passes_the_linter() -> None:
    result = ruff("check", "--output-format", "concise", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_python_file_is_formatted() -> None:
    result = ruff("format", "--check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
