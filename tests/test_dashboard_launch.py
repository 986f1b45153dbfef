"""`kvplan dashboard` (planner/cli/dashboard.py) and the dashboard's pure helpers for the Compare and Load
tabs (dashboard/compare.py, dashboard/bands.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashboard import bands, compare, view
from planner import records
from planner.cli import app
from planner.cli import dashboard as launch
from planner.errors import KvplanError
from planner.inputs import PlanRequest
from planner.results import Performance, SpeedRange

ROOT = Path(__file__).resolve().parents[1]


def test_launch_command_carries_every_safe_setting() -> None:
    cmd = launch.command(port=8600)
    assert cmd[:4] == [sys.executable, "-m", "dashboard.serve", "run"]
    assert Path(cmd[4]).is_file() and Path(cmd[4]).name == "streamlit_app.py"
    flags = set(cmd[5:])
    assert {
        "--server.address=127.0.0.1",
        "--browser.gatherUsageStats=false",
        "--client.showErrorDetails=none",
        "--server.maxUploadSize=2",
        "--server.port=8600",
    } <= flags


def test_launch_command_runs_another_page_with_the_same_settings(tmp_path: Path) -> None:
    """bench_dashboard.py --floor runs its one-metric page through the same launcher settings."""
    page = tmp_path / "page.py"
    cmd = launch.command(port=8600, script=page)
    assert cmd[:4] == [sys.executable, "-m", "streamlit", "run"]  # Streamlit alone: no planner imports
    assert cmd[4] == str(page) and cmd[5:] == launch.command(port=8600)[5:]


def test_the_dashboard_server_imports_the_planner_before_it_listens() -> None:
    """dashboard/serve.py is Streamlit's command line (its --help is Streamlit's) in a process that has
    imported the planner modules the page's first run needs, and none of the dashboard's own modules
    (they declare Streamlit caches, which want the running server)."""
    import subprocess

    probe = (
        "import sys, dashboard.serve as s; "
        "needed = ('planner.plan.compose', 'planner.sim.run', 'plotly.graph_objects'); "
        "print(all(m in sys.modules for m in needed), "
        "any(m.startswith('dashboard.') and m != 'dashboard.serve' for m in sys.modules))"
    )
    env = launch.child_environment()
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "False"], out.stderr
    helped = subprocess.run(
        [sys.executable, "-m", launch.SERVER_MODULE, "run", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert helped.returncode == 0 and "Run a Python script" in helped.stdout


def test_repository_config_matches_the_launcher() -> None:
    """`streamlit run app.py` in the repository root gets the same safety settings as `kvplan dashboard`."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["browser"]["gatherUsageStats"] is False
    assert str(config["client"]["showErrorDetails"]) == launch.SETTINGS["client.showErrorDetails"]
    assert str(config["server"]["maxUploadSize"]) == launch.SETTINGS["server.maxUploadSize"]
    assert config["server"]["fileWatcherType"] == launch.SETTINGS["server.fileWatcherType"]
    assert config["client"]["toolbarMode"] == launch.SETTINGS["client.toolbarMode"]
    assert config["server"]["address"] in ("localhost", launch.LOOPBACK)


def test_child_sees_the_package_first_on_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    path = launch.child_environment()["PYTHONPATH"].split(":")
    assert path[0] == str(launch.page_script().parent.parent) and path[-1] == "/somewhere"


@pytest.mark.parametrize("port", ["80", "70000", "x"])
def test_dashboard_port_is_checked(port: str) -> None:
    result = CliRunner().invoke(app, ["dashboard", "--port", port])
    assert result.exit_code == 2
    assert "--port" in result.output


@pytest.mark.parametrize(
    ("dtype", "native", "expected"),
    [
        ("fp8", ("bf16", "fp16", "int8", "fp8"), "int8"),
        ("int8", ("bf16", "fp16", "int8", "fp8"), "fp8"),
        ("int8", ("bf16", "fp16", "int8"), "bf16"),  # a 910B: no fp8 units
        ("bf16", ("bf16", "fp16", "int8"), "int8"),
        ("w4a8", ("bf16", "int8"), "int8"),
    ],
)
def test_compare_b_starts_on_another_dtype_the_card_runs(dtype: str, native: tuple, expected: str) -> None:
    assert compare.alternative_dtype(dtype, native_dtypes=native) == expected


@pytest.mark.parametrize(("tp", "expected"), [(1, 2), (4, 8), (16, 8)])
def test_compare_c_starts_on_the_next_tp(tp: int, expected: int) -> None:
    assert compare.alternative_tp(tp) == expected


def test_compare_c_skips_a_tp_the_engine_refuses() -> None:
    """transformers plans tensor parallelism within one node only: from tp 8 on an 8-NPU node, C starts on
    tp 4, not on the tp 16 that the column would show as an error."""
    base = PlanRequest(model="qwen3-8b", card="ascend-910b3", tp=8, engine="transformers", dtype="bf16")

    def plans(tp: int) -> bool:
        try:
            view.plan_for(records.replace(base, tp=tp))
        except KvplanError:
            return False
        return True

    assert not plans(16) and plans(4)
    assert compare.alternative_tp(8, plans=plans) == 4
    assert compare.alternative_tp(4, plans=lambda tp: tp != 8) == 16
    assert compare.alternative_tp(4, plans=lambda _: False) == 8  # none plans: the column shows why


def test_time_factors_turn_a_rate_range_into_a_time_range() -> None:
    band = SpeedRange(
        source="s", label="l", decode_step_s_low=0.08, decode_step_s_high=0.2, tpot_s_low=0.08,
        tpot_s_high=0.2, tokens_per_s_low=50.0, tokens_per_s_high=125.0, per_user_tokens_per_s_low=5.0,
        per_user_tokens_per_s_high=12.5,
        ttft_s_low=0.5, ttft_s_high=2.0, ttft_source="t", extrapolated=False, notes=[],
    )  # fmt: skip
    perf = Performance(
        batch=10, ctx_tokens=1024, decode_step_s=0.1, tokens_per_step=1.0, tpot_s=0.1,
        ttft_s=1.0, calibrated=True, speed_range=band,
    )  # fmt: skip
    factors = bands.time_factors(perf)
    # per-user 10 tok/s in [5, 12.5]: a time x [10/12.5, 10/5] = [0.8, 2]; TTFT 1 s in [0.5, 2]
    assert factors == pytest.approx((0.8, 2.0, 0.5, 2.0))
    assert bands.time_factors(None) == bands.NO_RANGE


def test_failures_name_the_widget_or_section_and_no_path() -> None:
    from pydantic import BaseModel, ValidationError

    from dashboard import failures
    from planner.errors import PlanInputError

    class Request(BaseModel):  # a model with the sidebar's field names
        tp: int

    planner_error = failures.failure_message(PlanInputError("--tp: must divide 4 (got 3)"), where="x")
    assert planner_error.startswith("Tensor parallel (tp)")
    with pytest.raises(ValidationError) as invalid:
        Request(tp="three")  # type: ignore[arg-type]
    assert failures.failure_message(invalid.value, where="x") == (
        "Tensor parallel (tp): Input should be a valid integer, unable to parse string as an integer "
        "(got 'three')"
    )
    bug = failures.failure_message(
        TypeError("bad operand in /srv/app/dashboard/load.py"), where="The Load tab"
    )
    assert bug.startswith(
        "The Load tab: could not be drawn for these settings (TypeError: bad operand in <path>"
    )
    assert "/srv" not in bug and "rest of the page" in bug


def test_prompt_longer_than_the_context_is_one_line_in_the_dashboards_words() -> None:
    """Issue 26 W9: the prompt box took '1024m' at a 32k context and showed a TTFT of 7.6e11 ms; the plan
    (plan.compose.build_plan, shared with the CLI) refuses it, named by the widget."""
    from dashboard import failures
    from dashboard import view as dashboard
    from planner.errors import PlanInputError
    from planner.inputs import PlanRequest

    with pytest.raises(PlanInputError) as refused:
        dashboard.plan_for(PlanRequest(model="qwen3-8b", ctx="32k"), prompt_tokens=1024 * 2**20)
    line = failures.failure_message(refused.value, where="The plan")
    assert line.startswith("Prompt tokens for TTFT: longer than the context (got 1073741824")


@pytest.mark.parametrize("typed", ["--batch 5", '"--tp 4"', "--weights-path /x"])
def test_a_value_the_user_typed_is_echoed_as_typed(typed: str) -> None:
    """The flag names outside the echoed value become widget names; the value the user typed is shown
    as typed (before, a context of '--batch 5' was echoed as 'Batch = 5')."""
    from dashboard import failures
    from dashboard import view as dashboard
    from planner.errors import PlanInputError
    from planner.inputs import PlanRequest

    with pytest.raises(PlanInputError) as refused:
        dashboard.plan_for(PlanRequest(model="qwen3-8b", ctx=typed))
    line = failures.failure_message(refused.value, where="The plan")
    assert line.startswith(f"Context length: not a token count (got {typed!r}")


def test_the_checkpoint_flag_is_named_by_its_widget() -> None:
    from dashboard.words import dashboard_words

    said = dashboard_words("--weights-path: empty (got ''), expected the checkpoint folder")
    assert said.startswith("Checkpoint path on the server: empty (got '')")


@pytest.mark.slow
def test_terminating_kvplan_dashboard_stops_its_server() -> None:
    """SIGTERM to `kvplan dashboard` reaches the Streamlit server it started: the port closes (before, the
    server was re-parented to init and kept listening)."""
    import signal
    import socket
    import subprocess
    import time

    if importlib.util.find_spec("streamlit") is None:
        pytest.skip("streamlit not installed")
    port = launch.free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "planner.cli", "dashboard", "--port", str(port)],
        env=launch.child_environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def listening() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex((launch.LOOPBACK, port)) == 0

    try:
        deadline = time.monotonic() + 60
        while not listening() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert listening(), "the dashboard never listened"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while listening() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not listening(), "the server outlived kvplan dashboard"
    finally:
        if proc.poll() is None:
            proc.kill()
