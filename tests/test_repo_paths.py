"""Every repository path named in the README, docs/*.md and the shipped code's text exists, and the wheel
ships no lab script (the lab and benchmarks are not packages of the distribution)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]
TOP = ("planner", "dashboard", "calibration", "lab", "benchmarks", "tests", "docs", "hwprofiles")
TOP += ("modelcards",)
PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(TOP)})/[\w./*-]*[\w*/])")
SOURCES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "planner").rglob("*.py")),
    *sorted((ROOT / "dashboard").rglob("*.py")),
    *sorted((ROOT / "calibration").rglob("*.py")),
]


# Paths of other repositories, cited as sources (MindIE-LLM docs, vLLM / vllm-ascend trees, GenAI-Perf's
# tests), and an example file name inside an error message.
EXTERNAL = (
    "docs/zh/",
    "docs/source/",
    "docs/en/",
    "tests/e2e/",
    "tests/test_csv_exporter.py",
    "benchmarks/benchmark_serving.py",
    "hwprofiles/x.yaml",
)


def named_paths(text: str) -> set[str]:
    """Repository paths in a text: top-level folder/..., without placeholders (<card>, {name}, NN)."""
    found = {m for m in PATH.findall(text) if not re.search(r"[<>{}]|NN|\.\.\.", m)}
    return {m for m in found if not m.startswith(EXTERNAL)}


def exists(path: str) -> bool:
    """The path, a glob of it, or (module paths such as planner/perf/roofline) the .py file exists."""
    if "*" in path:
        return any(ROOT.glob(path))
    module = path.rsplit(".", 1)[0] + ".py"  # planner/memory.kv_budget_bytes names a function of memory.py
    return any((ROOT / candidate).exists() for candidate in (path, path + ".py", path.rstrip("."), module))


def test_every_named_path_exists() -> None:
    missing = sorted(
        f"{source.relative_to(ROOT)}: {path}"
        for source in SOURCES
        for path in named_paths(source.read_text(encoding="utf-8"))
        if not exists(path)
    )
    assert missing == []


def test_the_path_check_sees_a_missing_path() -> None:
    assert named_paths("see planner/vllm_memory.py and calibration/ref_common.py") == {
        "planner/vllm_memory.py",
        "calibration/ref_common.py",
    }
    assert not exists("planner/vllm_memory.py") and exists("planner/engines/vllm/pool.py")


def test_wheel_packages_hold_no_lab_or_benchmark_script() -> None:
    """The packages setuptools puts in the wheel (pyproject's find include list): none under lab/ or
    benchmarks/, and every shipped folder is a product folder."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = find_packages(where=str(ROOT), include=include)
    assert packages and "planner" in packages and "calibration" in packages
    assert [p for p in packages if p.split(".")[0] in ("lab", "benchmarks", "tests")] == []
    shipped = {Path(*p.split(".")) for p in packages}
    assert not [p for p in shipped if (ROOT / p).resolve().is_relative_to(ROOT / "lab")]


ACCURACY_REPORT_MAX_LINES = 300  # issue 24: a present-tense report a user reads in five minutes


def test_the_accuracy_report_stays_a_five_minute_read() -> None:
    """docs/accuracy.md holds at most ACCURACY_REPORT_MAX_LINES lines; history goes to lab/notebook.md."""
    lines = (ROOT / "docs" / "accuracy.md").read_text(encoding="utf-8").splitlines()
    assert 0 < len(lines) <= ACCURACY_REPORT_MAX_LINES, (
        f"docs/accuracy.md has {len(lines)} lines (limit {ACCURACY_REPORT_MAX_LINES}): "
        f"move detail and history to lab/notebook.md"
    )
