"""The dashboard in a real browser: `streamlit run app.py` headless on loopback, driven by Playwright in
Debian's Chromium (no browser downloads: executable_path points at /usr/bin/chromium).

Changes a control, checks the numbers and charts re-render with new values and that no exception text
appears, that the headline metrics are not cut off at 1024 and 1440 px, and takes a screenshot: into the
test's temporary folder, or to the path in KVPLAN_SCREENSHOT (`KVPLAN_SCREENSHOT=docs/dashboard.png` refreshes
the docs' picture; the tests never rewrite the tracked file on their own). Skips cleanly when chromium or
playwright is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboard.membar import BAR_CLASS
from planner.cli import dashboard as launch

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("KVPLAN_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOT_ENV = "KVPLAN_SCREENSHOT"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAGE_TIMEOUT_MS = 60_000
VIEWPORT = {"width": 1600, "height": 1500}
SCREENSHOT_VIEWPORT = {"width": 1600, "height": 1860}

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="Python package playwright is not installed"
)
if not CHROMIUM.is_file():
    pytest.skip(f"{CHROMIUM} not found (apt-get install chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard as `kvplan dashboard` starts it, from a directory without the project's
    .streamlit/config.toml (the launcher must carry every setting itself); always terminated."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    with launch.running(port=launch.free_port(), log=log, cwd=elsewhere) as url:
        yield url


@pytest.fixture
def page(server: str) -> Iterator[object]:
    """A fresh Chromium page on the dashboard, the first run rendered."""
    with playwright_sync.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page(viewport=VIEWPORT)
            tab.set_default_timeout(PAGE_TIMEOUT_MS)
            tab.goto(server)
            wait_loaded(tab)
            yield tab
        finally:
            browser.close()


def wait_loaded(tab: object) -> None:
    """Wait for the metrics and the Memory tab's bar, then for the script run to finish."""
    tab.wait_for_selector('[data-testid="stMetricValue"]')
    tab.wait_for_selector(f".{BAR_CLASS}", state="attached")
    wait_idle(tab)


def wait_idle(tab: object) -> None:
    """Wait for the script run to finish (Streamlit's running indicator gone)."""
    tab.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=PAGE_TIMEOUT_MS
    )
    tab.wait_for_timeout(500)


def metric(tab: object, label: str) -> str:
    """The displayed value of the st.metric whose label is `label`."""
    box = (
        tab.locator('[data-testid="stMetric"]')
        .filter(has=tab.locator('[data-testid="stMetricLabel"]', has_text=label))
        .first
    )
    return str(box.locator('[data-testid="stMetricValue"]').inner_text()).strip()


def chart_texts(tab: object) -> str:
    """Text inside the Memory tab's bar (segment labels are GiB values)."""
    return str(tab.locator(f".{BAR_CLASS}").first.inner_text())


def choose(tab: object, key: str, option: str) -> None:
    """Pick `option` in the selectbox with widget key `key` (Streamlit tags its container st-key-<key>)."""
    tab.locator(f'.st-key-{key} [role="combobox"]').click()
    tab.get_by_role("option", name=option, exact=True).click()


def assert_no_exception(tab: object) -> None:
    assert tab.locator('[data-testid="stException"]').count() == 0
    body = str(tab.locator("body").inner_text())
    assert "Traceback" not in body
    assert "Exception" not in body


def plotly_loaded(tab: object) -> bool:
    """Whether the page has fetched Streamlit's plotly chart bundle (plotly.js)."""
    return bool(
        tab.evaluate(
            "() => performance.getEntriesByType('resource').some(e => e.name.includes('PlotlyChart'))"
        )
    )


def test_changing_dtype_rerenders_numbers_and_charts(page: object, tmp_path: Path) -> None:
    assert_no_exception(page)
    assert not plotly_loaded(page)  # the first page (headline, Memory tab) needs no plotly.js
    batch_before, budget_before = metric(page, "max batch"), metric(page, "KV budget")
    chart_before = chart_texts(page)
    choose(page, "dtype", "bf16")  # from the default fp8 (the mission)
    page.wait_for_function(
        "(before) => [...document.querySelectorAll('[data-testid=\"stMetric\"]')]"
        ".some(e => e.innerText.includes('KV budget') && !e.innerText.includes(before))",
        arg=budget_before,
    )
    wait_loaded(page)
    assert_no_exception(page)
    assert int(metric(page, "max batch")) < int(batch_before)  # bf16 weights leave less room for KV
    assert metric(page, "KV budget") != budget_before
    assert chart_texts(page) != chart_before  # the stacked bar was redrawn with the new sizes
    choose(page, "dtype", "fp8")
    page.wait_for_function(
        "(before) => [...document.querySelectorAll('[data-testid=\"stMetric\"]')]"
        ".some(e => e.innerText.includes('KV budget') && e.innerText.includes(before))",
        arg=budget_before,
    )
    wait_loaded(page)
    page.get_by_role("tab", name="Speed").click()  # lazy tabs: the Speed tab's three charts replace Memory's
    page.wait_for_selector('[data-testid="stPlotlyChart"] >> nth=2')
    wait_idle(page)
    assert_no_exception(page)
    assert plotly_loaded(page)
    screenshot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "dashboard.png")
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size(SCREENSHOT_VIEWPORT)  # Streamlit scrolls inside the page: show it all at once
    wait_idle(page)
    page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.stat().st_size > 10_000


def speed_chart_text(tab: object) -> str:
    """The Speed tab's first chart as drawn (its legend names the plan's batch: "plan: batch N")."""
    return str(tab.locator(".js-plotly-plot").first.inner_text())


def test_speed_tab_charts_show_the_new_plan_after_a_change(page: object) -> None:
    """With the Speed tab open, a control change redraws its charts with the new numbers, not the old ones
    (Streamlit's frontend takes a new figure only when the chart's element id changes: a chart kept under
    a fixed id would keep its old picture while the run still finishes on time; docs/dashboard.md,
    2026-12-06)."""
    page.get_by_role("tab", name="Speed").click()
    page.wait_for_selector('[data-testid="stPlotlyChart"] >> nth=2')
    wait_idle(page)
    fp8_batch = metric(page, "max batch")
    assert f"plan: batch {fp8_batch}" in speed_chart_text(page)
    choose(page, "dtype", "bf16")
    page.wait_for_function(
        "(before) => [...document.querySelectorAll('[data-testid=\"stMetric\"]')]"
        ".some(e => e.innerText.includes('max batch') && !e.innerText.includes(before))",
        arg=fp8_batch,
    )
    wait_idle(page)
    bf16_batch = metric(page, "max batch")
    assert bf16_batch != fp8_batch
    assert f"plan: batch {bf16_batch}" in speed_chart_text(page)
    assert f"plan: batch {fp8_batch}" not in speed_chart_text(page)
    assert_no_exception(page)


@pytest.mark.parametrize("width", [1024, 1280, 1440])
def test_headline_metrics_are_not_cut_off(page: object, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 1000})
    wait_idle(page)
    selectors = ", ".join(
        f'[data-testid="{test_id}"] {inner}'.strip()
        for test_id, inner in (("stMetricValue", ""), ("stMetricValue", "div"), ("stMetricLabel", "p"))
    )
    clipped = page.evaluate(
        "(sel) => [...document.querySelectorAll(sel)]"
        ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)",
        selectors,
    )
    assert clipped == []
    body = str(page.locator("body").inner_text())
    # the badge in full (not "unc…"/"calib…"), whichever the default profile earns
    assert "calibrated" in body and "unc…" not in body and "calib…" not in body


def test_engine_settings_open_on_demand_and_keep_their_values(page: object) -> None:
    """The sidebar's Engine settings are drawn when their expander is opened (a rerun); a choice made
    there still applies once it is closed again."""
    assert page.locator('[data-testid="stSlider"]').count() == 0
    mindie_batch = metric(page, "max batch")
    page.get_by_text("Engine settings").click()
    page.wait_for_selector('[data-testid="stSlider"] >> nth=1')
    choose(page, "engine", "vllm")
    page.wait_for_function(
        "(before) => [...document.querySelectorAll('[data-testid=\"stMetric\"]')]"
        ".some(e => e.innerText.includes('max batch') && !e.innerText.includes(before))",
        arg=mindie_batch,
    )
    wait_idle(page)
    vllm_batch = metric(page, "max batch")
    page.get_by_text("Engine settings").click()
    page.wait_for_selector('[data-testid="stSlider"]', state="detached")
    wait_idle(page)
    assert metric(page, "max batch") == vllm_batch != mindie_batch
    assert_no_exception(page)


def test_infeasible_choice_shows_message_not_traceback(page: object) -> None:
    choose(page, "dtype", "bf16")
    # the page has re-planned with bf16 (its caption says so) before the next choice: under load the
    # first rerun can still be running when wait_loaded sees the previous run's metrics
    page.wait_for_selector("text=weights bf16")
    wait_loaded(page)
    error = '[data-testid="stAlertContentError"]'
    for _ in range(3):  # a click in the long model list can miss under load: the choice is made again
        choose(page, "model", "llama-3.1-70b")
        try:
            page.wait_for_selector(error, timeout=PAGE_TIMEOUT_MS // 3)
            break
        except playwright_sync.TimeoutError:
            continue
    page.wait_for_selector(error)
    wait_idle(page)
    text = str(page.locator(error).first.inner_text())
    assert "does not fit" in text
    assert_no_exception(page)


def test_load_tab_draws_in_a_1280_px_window(page: object) -> None:
    """The Load tab (simulations run only once it is open) draws its five charts and its table at 1280 px
    with nothing cut off on the right."""
    page.set_viewport_size({"width": 1280, "height": 1000})
    page.get_by_role("tab", name="Load").click()
    page.wait_for_selector('[data-testid="stPlotlyChart"] >> nth=4')
    page.wait_for_selector('[data-testid="stDataFrame"]')
    wait_idle(page)
    assert_no_exception(page)
    overflow = page.evaluate(
        "() => [...document.querySelectorAll('[data-testid=\"stDataFrame\"], .js-plotly-plot')]"
        ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).length"
    )
    assert overflow == 0


def frames_of_one_run(tab: object, frames: list[int], change: object) -> int:
    """Websocket messages the server sends for one rerun that `change()` starts (counted once the run is
    over and no message has come for half a second)."""
    before = len(frames)
    change()
    while len(frames) == before:
        tab.wait_for_timeout(20)
    wait_idle(tab)
    settled = -1
    while settled != len(frames):
        settled = len(frames)
        tab.wait_for_timeout(500)
    return len(frames) - before


def test_a_control_inside_a_tab_reruns_that_tab_alone(page: object) -> None:
    """The open tab is a fragment (dashboard/app.py tab_fragment): a Compare-tab control reruns the tab,
    not the sidebar and the headline, so the server sends a fraction of a full run's messages; a sidebar
    control still reruns the page (the headline changes, the tab follows)."""
    frames: list[int] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: frames.append(len(frame))))
    page.reload()  # the listener sees only websockets opened after it
    wait_loaded(page)
    page.get_by_role("tab", name="Compare").click()
    page.wait_for_selector('[data-testid="stPlotlyChart"] >> nth=2')
    wait_idle(page)
    full_run = frames_of_one_run(page, frames, lambda: choose(page, "dtype", "bf16"))
    tab_run = frames_of_one_run(page, frames, lambda: choose(page, "cmp1_dtype", "w8a16"))
    assert tab_run < full_run / 2, (tab_run, full_run)
    assert_no_exception(page)
