"""`kvplan calibrate --check` and the HCCL all-reduce workers on the fake NPU (tests/fake_npu)."""

from __future__ import annotations

import importlib.util
import json
import os
import time

import pytest

from calibration import npu_check
from calibration.allreduce import run_allreduce
from tests.fake_npu.harness import fake_npu_fixture  # noqa: F401  (registers the fake_npu fixture)

if importlib.util.find_spec("torch") is None:  # not imported here: torch costs ~4 s of CPU at collection
    pytest.skip("torch is not installed", allow_module_level=True)


def test_check_prints_environment_plan_and_nothing_missing_fast(fake_npu: pytest.MonkeyPatch) -> None:
    report = npu_check.check("npu:0", card_id="ascend-910b4")  # its speed: a benchmark's job, not a test's
    text = "\n".join(report.lines)
    assert report.missing == []
    assert "plan on Ascend910B4 (family 910b" in text and "graph capture" in text and "works" in text
    assert any(line.strip().startswith("all-reduce") and "skip" in line for line in report.lines)


def test_check_names_what_is_missing(fake_npu: pytest.MonkeyPatch) -> None:
    fake_npu.setenv("TASK_QUEUE_ENABLE", "2")
    report = npu_check.check("npu:0", card_id="atlas-300i-duo")  # a 310P profile on a 910B4
    text = "\n".join(report.lines)
    assert "set TASK_QUEUE_ENABLE=1 to time graphs" in text
    assert len(report.missing) == 2  # not "ready": the setting would time decode eager
    assert report.missing[0].startswith("TASK_QUEUE_ENABLE=2 makes torch_npu refuse graph capture")
    assert report.missing[1] == (
        "--card atlas-300i-duo describes a 310p but the device is Ascend910B4 (910b); "
        "pass the matching --card"
    )
    assert "ready to run" not in text


def test_check_through_the_cli_exits_2_when_something_is_missing(fake_npu: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from planner.cli import app

    fake_npu.setenv("FAKE_NPU_VERSION", "2.5.1")  # built for another torch
    result = CliRunner().invoke(app, ["calibrate", "--card", "ascend-910b4", "--device", "npu:0", "--check"])
    assert result.exit_code == 2
    assert "missing" in result.output and "does not match torch_npu 2.5.1" in result.output
    as_json = CliRunner().invoke(
        app, ["calibrate", "--card", "ascend-910b4", "--device", "npu:0", "--check", "--json"]
    )
    assert as_json.exit_code == 2  # the same exit code; the report one object on stdout
    report = json.loads(as_json.stdout)
    assert (report["card"], report["device"], report["ready"]) == ("ascend-910b4", "npu:0", False)
    assert report["lines"] == result.output.splitlines()
    assert any("does not match torch_npu 2.5.1" in line for line in report["missing"])
    assert all(f"  - {line}" in report["lines"] for line in report["missing"])


def test_hccl_allreduce_over_the_fake_and_fail_fast_worker_import(fake_npu: pytest.MonkeyPatch) -> None:
    fake_npu.setenv("FAKE_NPU_COUNT", "2")
    fake_npu.setenv("FAKE_NPU_PARENT_PID", str(os.getpid()))
    rows = run_allreduce("npu", world=2, sizes=(8192, 65536), warmup=1, repeats=2)
    assert isinstance(rows, list) and {(r["mode"], r["bytes"]) for r in rows} >= {
        ("eager", 8192),
        ("eager", 65536),
    }
    fake_npu.setenv("FAKE_NPU_FAIL", "worker_import_runtime")  # torch_npu raises RuntimeError in the ranks
    start = time.perf_counter()
    error = run_allreduce("npu", world=2, sizes=(8192,), warmup=1, repeats=2)
    assert time.perf_counter() - start < 60  # not the 120 s queue timeout (two torch starts)
    assert isinstance(error, str) and "RuntimeError: fake torch_npu: libascendcl.so" in error
