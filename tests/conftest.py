"""Test tiers (README "Tests"; issue 24).

- `python3 -m pytest`: the whole suite, what CI (.ci/run) runs.
- `python3 -m pytest -m "not slow"`: the fast tier for the inner loop.
- `python3 -m pytest -m lab`: the lab checks alone (tests that read the published corpora, reference data or
  lab scripts). They run in the default suite; a `lab` test is also `slow`, so the fast tier leaves them out.

Besides the `slow` marks written on tests, these rules are applied here, at collection (each measured over
2 s per test, or over 2 s per file of sub-second processes, on the 2-core machine):
- FIRST_CASE_ONLY: a parametrized test keeps its first case in the fast tier and its other cases (the same
  check on more inputs, each in a process of its own) are `slow`: every hostile root cause and the import
  rule of one core module still run in the fast tier.
- APP_FAST: of the tests of tests/test_app.py that render the whole page through Streamlit's AppTest (the
  `app` fixture, ~1 s of CPU each), the default render and one error render stay in the fast tier; the
  other widget interactions are `slow`.
- SLOW_FILES: whole files whose every test runs torch (`kvplan calibrate`'s code path over tests/fake_npu and
  its HCCL double: importing torch alone is ~4 s of CPU) or hypothesis runs of every command, each example a
  process. In the other calibration files only the tests that import torch are marked `slow` (a comment says
  so), so calibration's arithmetic, device parsing and refusals stay in the fast tier.

Parallel runs (pytest-xdist, `-n auto` in pyproject's addopts; README "Tests"): each worker is one process
per core, so a worker's own thread pools get one thread (OMP_NUM_THREADS=1, read by torch and OpenBLAS when
they load, which is after this file): with a pool per core in every worker, OpenMP's spinning threads made
the fake NPU's tiny torch kernels time 1 000x slow (a fraction under the schema's 1e-7 floor) on two cores.
"""

from __future__ import annotations

import os

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

FIRST_CASE_ONLY = {
    "test_hostile_cases.py": None,  # every test function of the file
    "test_layering.py": {"test_core_module_imports_only_allowed"},
}
APP_FAST = {
    "test_default_render_has_no_exception",
    "test_model_that_does_not_fit_shows_an_error_not_a_traceback",
}
SLOW_FILES = {
    "test_fuzz_cli.py",
    "test_npu_calibrate.py",
    "test_npu_check_allreduce.py",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seen: set[tuple[str, str]] = set()
    for item in items:
        file = item.path.name
        function = getattr(item, "originalname", item.name)
        renders_page = file == "test_app.py" and "app" in getattr(item, "fixturenames", ())
        if (
            item.get_closest_marker("lab") is not None
            or file in SLOW_FILES
            or (renders_page and function not in APP_FAST)
        ):
            item.add_marker(pytest.mark.slow)
        elif file in FIRST_CASE_ONLY:
            functions = FIRST_CASE_ONLY[file]
            if functions is not None and function not in functions:
                continue
            if (file, function) in seen:
                item.add_marker(pytest.mark.slow)
            seen.add((file, function))
