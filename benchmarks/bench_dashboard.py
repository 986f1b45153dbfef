"""Dashboard speed in a real browser: the first page of a new browser session, and a control change.

    python3 benchmarks/bench_dashboard.py [--sessions 5] [--changes 5] [--floor] [--chromium-arg=FLAG]

Starts the dashboard the way users do (`kvplan dashboard`, headless, on a free loopback port) and drives
Debian's Chromium (/usr/bin/chromium or $KVPLAN_CHROMIUM) through Playwright. What is timed is what a
user sees: from navigation until the headline metrics and the Memory tab's bar are in the page and
Streamlit's running indicator is gone (no fixed sleeps, no network-idle wait). Three cases:

- cold cache: a fresh browser profile (a new context) per session: Streamlit's script bundles come over
  the wire and are compiled;
- warm cache: new tabs in one profile that has loaded the dashboard once (each tab is a new Streamlit
  session on the warm server: the way a user opens the dashboard a second time);
- control change: in an open page, picking another weight dtype until the new KV budget is drawn and the
  run has finished;
- control change with the Speed tab open (an extra case, reported apart): the same change while the tab's
  three plotly charts are drawn, so they are rebuilt and redrawn too.

For each first page it also reads the browser's own timing (Navigation Timing: time to first byte,
DOMContentLoaded = the script bundles parsed and run; the first websocket message from the server;
CDP Performance.getMetrics: main-thread script and task time) and the CPU seconds the browser's processes
and the server spent, so a slow number can be attributed. The machine is shared: the load average is
printed with each case, and medians are reported. --floor first times a one-metric Streamlit page
(benchmarks/dashboard_floor_page.py) the same way: what any Streamlit page costs here. Goals (issue 25):
first page <= 2 s, control change <= 0.5 s. Needs the playwright Python package (no browser download).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, sync_playwright

from dashboard.membar import BAR_CLASS
from planner.cli import dashboard as launch

CHROMIUM = Path(os.environ.get("KVPLAN_CHROMIUM", "/usr/bin/chromium"))
IDLE_JS = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
TIMEOUT_MS = 120_000
VIEWPORT = {"width": 1280, "height": 1000}
FLOOR_PAGE = Path(__file__).resolve().parent / "dashboard_floor_page.py"
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# Records when the page's websocket to the server opens and first answers (performance.now(), ms).
WEBSOCKET_PROBE = """(() => { const Native = window.WebSocket; window.__kvplanWs = {};
  window.WebSocket = function (...args) { const ws = new Native(...args);
    ws.addEventListener('open', () => { window.__kvplanWs.open ??= performance.now(); });
    ws.addEventListener('message', () => { window.__kvplanWs.first ??= performance.now(); });
    return ws; };
  window.WebSocket.prototype = Native.prototype; Object.assign(window.WebSocket, Native); })()"""
PAGE_TIMING_JS = """() => { const n = performance.getEntriesByType('navigation')[0];
  return {ttfb: n.responseStart, dcl: n.domContentLoadedEventEnd, ws_open: window.__kvplanWs.open ?? -1,
          ws_first: window.__kvplanWs.first ?? -1}; }"""


@dataclass(frozen=True)
class FirstPage:
    """One first page: wall seconds to the drawn page, the browser's own timings (ms) and CPU seconds."""

    drawn_s: float
    headline_s: float
    ttfb_ms: float
    dom_loaded_ms: float
    ws_open_ms: float
    ws_first_ms: float
    script_s: float
    browser_cpu_s: float
    server_cpu_s: float


def process_cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far (/proc/PID/stat; gone processes count 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS_PER_S


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (the browser's processes are below this one)."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    children = [int(p) for p in out.split()]
    return [grand for child in children for grand in (child, *descendants(child))]


def streamlit_pid() -> int:
    """The dashboard server that launch.running() started below this process."""
    for pid in descendants(os.getpid()):
        try:
            if b"streamlit" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    raise RuntimeError("the streamlit server process was not found")


def drawn(page: Page) -> float:
    """Wait for the headline metrics, the Memory tab's bar and an idle app; seconds until the headline."""
    start = time.perf_counter()
    page.wait_for_selector('[data-testid="stMetricValue"]', timeout=TIMEOUT_MS)
    headline = time.perf_counter() - start
    page.wait_for_selector(f".{BAR_CLASS}", state="attached", timeout=TIMEOUT_MS)
    page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)
    return headline


def first_page(context: Any, url: str, *, server_pid: int) -> FirstPage:
    """Open `url` in a new tab of `context` and time it to a drawn, idle first page."""
    browser_pids = [p for p in descendants(os.getpid()) if p != server_pid]
    cpu_before, server_before = process_cpu_s(browser_pids), process_cpu_s([server_pid])
    page = context.new_page()
    page.add_init_script(WEBSOCKET_PROBE)
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    start = time.perf_counter()
    page.goto(url)
    goto_s = time.perf_counter() - start
    headline_s = goto_s + drawn(page)
    elapsed = time.perf_counter() - start
    timing = page.evaluate(PAGE_TIMING_JS)
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    browser_pids = [p for p in descendants(os.getpid()) if p != server_pid]
    result = FirstPage(
        drawn_s=elapsed,
        headline_s=headline_s,
        ttfb_ms=timing["ttfb"],
        dom_loaded_ms=timing["dcl"],
        ws_open_ms=timing["ws_open"],
        ws_first_ms=timing["ws_first"],
        script_s=metrics.get("ScriptDuration", 0.0),
        browser_cpu_s=process_cpu_s(browser_pids) - cpu_before,
        server_cpu_s=process_cpu_s([server_pid]) - server_before,
    )
    page.close()
    return result


def control_change_s(page: Page, dtype: str) -> float:
    """Seconds from choosing weight dtype `dtype` (another than the current one) to the new KV budget
    drawn and the run finished."""
    before = page.locator('[data-testid="stMetricValue"]').nth(2).inner_text()
    page.locator('.st-key-dtype [role="combobox"]').click()
    start = time.perf_counter()
    page.get_by_role("option", name=dtype, exact=True).click()
    page.wait_for_function(
        "(b) => { const v = document.querySelectorAll('[data-testid=\"stMetricValue\"]');"
        " return v.length > 2 && v[2].innerText !== b; }",
        arg=before,
        timeout=TIMEOUT_MS,
    )
    page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)
    return time.perf_counter() - start


def speed_tab_changes_s(page: Page, changes: int, *, done: int) -> list[float]:
    """Open the Speed tab of an open page, wait for its charts, then time `changes` weight-dtype changes
    (fp8 <-> bf16, after `done` changes from fp8) with the tab open; the charts' redraw is in the run."""
    page.get_by_role("tab", name="Speed").click()
    page.wait_for_selector(".js-plotly-plot", timeout=TIMEOUT_MS)
    page.wait_for_function(IDLE_JS, timeout=TIMEOUT_MS)
    return [control_change_s(page, ("bf16", "fp8")[(done + i) % 2]) for i in range(changes)]


def median_of(rows: list[FirstPage], field: Callable[[FirstPage], float]) -> float:
    return statistics.median(field(r) for r in rows)


def report(label: str, rows: list[FirstPage], load: tuple[float, float]) -> None:
    """Medians of one case, with the load average before and after it."""
    drawn_s = [r.drawn_s for r in rows]
    print(
        f"first page, {label}: median {statistics.median(drawn_s):.2f} s (min {min(drawn_s):.2f}, "
        f"max {max(drawn_s):.2f}, {len(rows)} sessions; goal <= 2 s); headline at "
        f"{median_of(rows, lambda r: r.headline_s):.2f} s; load average {load[0]:.1f} -> {load[1]:.1f}"
    )
    print(
        f"  browser timing (median ms): first byte {median_of(rows, lambda r: r.ttfb_ms):.0f}, "
        f"scripts parsed (DOMContentLoaded) {median_of(rows, lambda r: r.dom_loaded_ms):.0f}, "
        f"websocket open {median_of(rows, lambda r: r.ws_open_ms):.0f}, "
        f"first server message {median_of(rows, lambda r: r.ws_first_ms):.0f}; "
        f"main-thread script {median_of(rows, lambda r: r.script_s):.2f} s; CPU: browser "
        f"{median_of(rows, lambda r: r.browser_cpu_s):.2f} s, "
        f"server {median_of(rows, lambda r: r.server_cpu_s):.2f} s"
    )


def first_pages(url: str, *, flags: list[str], sessions: int, changes: int) -> None:
    """Time and print every case against the server at `url` (control changes when `changes` > 0)."""
    with sync_playwright() as pw:
        server_pid = streamlit_pid()
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=flags)
        warmup = browser.new_context(viewport=VIEWPORT)
        server_first = first_page(warmup, url, server_pid=server_pid)  # the server's first session
        load0 = os.getloadavg()[0]
        cold = []
        for _ in range(sessions):
            context = browser.new_context(viewport=VIEWPORT)
            cold.append(first_page(context, url, server_pid=server_pid))
            context.close()
        load1 = os.getloadavg()[0]
        warm = [first_page(warmup, url, server_pid=server_pid) for _ in range(sessions)]
        load2 = os.getloadavg()[0]
        if changes:
            page = warmup.new_page()
            page.goto(url)
            drawn(page)
            times = [control_change_s(page, ("bf16", "fp8")[i % 2]) for i in range(changes)]  # from fp8
            load3 = os.getloadavg()[0]
            speed_times = speed_tab_changes_s(page, changes, done=changes)
            load4 = os.getloadavg()[0]
        browser.close()
    print(
        f"first page of the server's first session (cold cache, server imports): {server_first.drawn_s:.2f} s"
    )
    report("cold cache (fresh browser profile)", cold, (load0, load1))
    report("warm cache (new tab, a profile that loaded it once)", warm, (load1, load2))
    if changes:
        print(
            f"control change (weight dtype fp8 <-> bf16): median {statistics.median(times):.2f} s "
            f"(min {min(times):.2f}, max {max(times):.2f}, {len(times)} changes; goal <= 0.5 s); "
            f"load average {load2:.1f} -> {load3:.1f}"
        )
        print(
            f"control change with the Speed tab open (its three plotly charts redrawn): median "
            f"{statistics.median(speed_times):.2f} s (min {min(speed_times):.2f}, "
            f"max {max(speed_times):.2f}, {len(speed_times)} changes); "
            f"load average {load3:.1f} -> {load4:.1f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=5, help="browser sessions per case (1-50)")
    parser.add_argument("--changes", type=int, default=5, help="control changes to time (1-50)")
    parser.add_argument("--chromium-arg", action="append", default=[], help="extra Chromium flag")
    parser.add_argument(
        "--floor", action="store_true", help="first time a one-metric Streamlit page the same way"
    )
    args = parser.parse_args()
    if not (1 <= args.sessions <= 50 and 1 <= args.changes <= 50):
        print("--sessions and --changes: must be 1-50", file=sys.stderr)
        return 2
    if not CHROMIUM.is_file():
        print(f"{CHROMIUM} not found (apt-get install chromium)", file=sys.stderr)
        return 2
    flags = ["--headless", "--no-sandbox", *args.chromium_arg]
    print(f"chromium {' '.join(flags)}; {os.cpu_count()} CPUs")
    if args.floor:
        print(f"== floor: {FLOOR_PAGE.name} (one metric, one HTML element)")
        with launch.running(port=launch.free_port(), script=FLOOR_PAGE) as url:
            first_pages(url, flags=flags, sessions=args.sessions, changes=0)
        print("== the dashboard")
    with launch.running(port=launch.free_port()) as url:
        first_pages(url, flags=flags, sessions=args.sessions, changes=args.changes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
