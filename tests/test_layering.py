"""Module boundaries: the planner core and the CLI never import torch, streamlit or plotly, and conversion
literals live only in planner/units.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "torch_npu", "streamlit", "plotly")
CORE_MODULES = sorted(
    p.stem for p in (ROOT / "planner").glob("*.py") if not p.stem.startswith("cli") and p.stem != "__init__"
)


def imported_modules(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return set(out.stdout.split())


def test_cli_start_imports_nothing_heavy() -> None:
    loaded = imported_modules("import planner.cli")
    assert not [m for m in HEAVY if m in loaded]


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_only_allowed(module: str) -> None:
    loaded = imported_modules(f"import planner.{module}")
    forbidden = [m for m in (*HEAVY, "typer", "rich") if m in loaded]
    assert forbidden == [], f"planner.{module} pulls in {forbidden}"


def test_mission_command_imports_nothing_heavy() -> None:
    code = (
        "import sys\nfrom planner.cli import app\nsys.argv=['kvplan','--model','qwen3-27b','--ctx','32k',"
        "'--dtype','fp8']\ntry:\n    app()\nexcept SystemExit:\n    pass"
    )
    loaded = imported_modules(code)
    assert not [m for m in HEAVY if m in loaded]


# Unit conversions (GiB, GB, TFLOP, ms) belong in units.py; small epsilons such as 1e-6 are not conversions.
CONVERSION_LITERAL = re.compile(
    r"(1024\s*\*\*|2\s*\*\*\s*(20|30|40)\b|\b1e9\b|\b1e12\b|\b10\s*\*\*\s*(9|12)\b|[*/]\s*1000\b)"
)


def test_conversion_literals_only_in_units() -> None:
    offenders = []
    for path in (ROOT / "planner").glob("*.py"):
        if path.name == "units.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if CONVERSION_LITERAL.search(line.split("#")[0]) and '"""' not in line:
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert offenders == []
