"""README's "Where things live" map names every module of planner/ and dashboard/, names nothing that is not
there, and fits on one screen."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCREEN_LINES = 50


def module_map() -> str:
    """The code block under the README's `## Where things live` heading."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Where things live", 1)[1]
    return section.split("```", 2)[1]


def map_entries() -> dict[str, set[str]]:
    """Per folder heading of the map (`planner/perf/`), the file names listed under it (`roofline.py`)."""
    entries: dict[str, set[str]] = {}
    folder = ""
    for line in module_map().splitlines():
        head = re.match(r"(\S+/)\s", line + " ")
        if head:
            folder = head.group(1)
        names = set(re.findall(r"[\w*]+\.py\b|\b\w+/(?= |$)", line))
        entries.setdefault(folder, set()).update(names)
    return entries


def test_map_fits_one_screen() -> None:
    assert 0 < len(module_map().strip().splitlines()) <= SCREEN_LINES


def test_every_planner_and_dashboard_module_is_in_the_map() -> None:
    entries = map_entries()
    packages = [
        ROOT / "planner",
        ROOT / "dashboard",
        *sorted(p.parent for p in ROOT.glob("planner/*/__init__.py")),
    ]
    missing = []
    for package in packages:
        folder = f"{package.relative_to(ROOT).as_posix()}/"
        listed = entries.get(folder, set())
        for path in sorted(package.glob("*.py")):
            if path.name != "__init__.py" and path.name not in listed:
                missing.append(f"{folder}{path.name}")
        if package.parent.name == "planner" and folder not in entries:
            missing.append(folder)
    assert missing == [], f"README 'Where things live' lacks: {', '.join(missing)}"


def test_every_module_the_map_names_exists() -> None:
    stale = []
    for folder, names in map_entries().items():
        for name in names:
            if name.endswith(".py") and "*" not in name:
                found = list((ROOT / folder).rglob(name)) if folder else []
                if not found:
                    stale.append(f"{folder}{name}")
    assert stale == [], f"README 'Where things live' names modules that are not there: {', '.join(stale)}"
