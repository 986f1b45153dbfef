"""`kvplan dashboard`: start the Streamlit app with the project's settings, from any directory.

`streamlit run app.py` reads .streamlit/config.toml only from the directory it is started in; started
elsewhere (or from an installed wheel, which has no such folder) it takes Streamlit's defaults: full
tracebacks, 200 MB uploads, usage statistics sent, and the listening address Streamlit's version picks
(1.67 binds localhost, older ones every address). The launcher passes each setting on the
command line instead, so the page runs the same wherever it is started. Standard library only: the CLI
imports this module, and streamlit is imported by the child process alone.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from planner.cli.options import FlagCommand
from planner.errors import PlanInputError

PAGE_SCRIPT_NAME = "streamlit_app.py"
SERVER_MODULE = "dashboard.serve"  # `streamlit run` after the planner's imports
LOOPBACK = "127.0.0.1"
# Each of these is also in .streamlit/config.toml (for `streamlit run app.py` in the repository root).
SETTINGS: dict[str, str] = {
    "server.address": LOOPBACK,  # loopback only; expose it deliberately behind a proxy
    "server.maxUploadSize": "2",  # MB: model cards, profiles and bench CSVs are kilobytes
    "server.fileWatcherType": "none",
    "browser.gatherUsageStats": "false",  # no usage statistics leave the machine
    "client.showErrorDetails": "none",  # never a traceback with server paths in the page
    "client.toolbarMode": "viewer",
}
HEALTH_TIMEOUT_S = 60.0


def page_script() -> Path:
    """dashboard/streamlit_app.py of the installed (or checked-out) dashboard package, found without
    importing it (importing it would import streamlit)."""
    spec = importlib.util.find_spec("dashboard")
    if spec is None or not spec.submodule_search_locations:
        raise PlanInputError("dashboard: the dashboard package is not installed (pip install kvplan-ascend)")
    return Path(next(iter(spec.submodule_search_locations))) / PAGE_SCRIPT_NAME


def command(*, port: int, headless: bool = True, script: Path | None = None) -> list[str]:
    """The `python -m streamlit run` command line with every project setting, for the dashboard (or, for
    benchmarks/bench_dashboard.py's baseline, another page `script`)."""
    flags = [f"--{name}={value}" for name, value in SETTINGS.items()]
    # the dashboard's server imports the planner before it listens (dashboard/serve.py); another page
    # (the benchmark's one-metric floor) runs on Streamlit alone
    server = "streamlit" if script else SERVER_MODULE
    return [
        sys.executable, "-m", server, "run", str(script or page_script()), *flags,
        f"--server.port={port}", f"--server.headless={str(headless).lower()}",
    ]  # fmt: skip


def child_environment() -> dict[str, str]:
    """The caller's environment with this package's parent folder first on PYTHONPATH (Streamlit puts
    only the page's own folder on sys.path)."""
    root = str(page_script().parent.parent)
    current = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root if not current else f"{root}{os.pathsep}{current}"}


def free_port() -> int:
    """A TCP port nobody listens on at the moment, on loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen[bytes], *, timeout_s: float) -> None:
    """Poll Streamlit's health endpoint until it answers ok, the server dies, or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PlanInputError(f"dashboard: streamlit exited with {proc.returncode} before it was ready")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response,
        ):
            if response.read().strip() == b"ok":
                return
        time.sleep(0.25)
    raise PlanInputError(f"dashboard: not ready at {url} after {timeout_s:g} s")


@contextlib.contextmanager
def running(
    *, port: int, log: Path | None = None, cwd: Path | None = None, script: Path | None = None
) -> Iterator[str]:
    """A headless dashboard (or page `script`) on loopback for tests and benchmarks, started in `cwd`
    (default: here); yields its URL, always terminated."""
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log.open("wb")) if log else subprocess.DEVNULL
        cmd = command(port=port, script=script)
        proc = subprocess.Popen(cmd, env=child_environment(), stdout=out, stderr=out, cwd=cwd)
        try:
            url = f"http://{LOOPBACK}:{port}"
            wait_healthy(url, proc, timeout_s=HEALTH_TIMEOUT_S)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def register(app: typer.Typer) -> None:
    """Add `kvplan dashboard` to the app."""
    app.command("dashboard", cls=FlagCommand)(dashboard)


def dashboard(
    port: Annotated[int, typer.Option(min=1024, max=65535, help="Loopback port to listen on.")] = 8501,
    open_browser: Annotated[
        bool, typer.Option("--open-browser/--no-browser", help="Open a browser tab on this machine.")
    ] = False,
) -> None:
    """Start the what-if dashboard on http://localhost:PORT (loopback only), with the project's settings."""
    from planner.cli.options import fail

    try:
        cmd = command(port=port, headless=not open_browser)
    except PlanInputError as exc:
        fail(exc)
    print(f"kvplan dashboard on http://localhost:{port} (loopback only; Ctrl+C stops it)", file=sys.stderr)
    raise typer.Exit(run_server(cmd))


def run_server(cmd: list[str]) -> int:
    """Run the server until it exits; a SIGTERM or SIGHUP sent to kvplan is passed on to it (else the server
    would outlive its launcher, still listening), Ctrl+C reaches both through the process group."""
    import signal

    proc = subprocess.Popen(cmd, env=child_environment())

    def forward(signum: int, _frame: object) -> None:
        proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            with contextlib.suppress(KeyboardInterrupt):
                return proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
