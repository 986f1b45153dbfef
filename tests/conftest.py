"""Test tiers (README "Tests"; issue 24).

- `python3 -m pytest`: the whole suite, what CI (.ci/run) runs.
- `python3 -m pytest -m "not slow"`: the fast tier for the inner loop.
- `python3 -m pytest -m lab`: the lab checks alone (tests that read the published corpora, reference data or
  lab scripts). They run in the default suite; a `lab` test is also `slow`, so the fast tier leaves them out.

Besides the `slow` marks written on tests, two rules are applied here, at collection:
- tests/test_hostile_cases.py: each test function keeps its first case in the fast tier; its other cases
  (the same root cause on more inputs) are `slow`. Every root cause still runs in the fast tier.
- tests/test_fuzz_cli.py: every test is `slow` (hypothesis runs of every command, each example a process).
"""

from __future__ import annotations

import pytest

HOSTILE = "test_hostile_cases.py"
FUZZ = "test_fuzz_cli.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seen: set[tuple[str, str]] = set()
    for item in items:
        file = item.path.name
        function = getattr(item, "originalname", item.name)
        if item.get_closest_marker("lab") is not None or file == FUZZ:
            item.add_marker(pytest.mark.slow)
        elif file == HOSTILE:
            if (file, function) in seen:
                item.add_marker(pytest.mark.slow)
            seen.add((file, function))
