"""The dashboard in a real browser: start it on a free loopback port, drive Debian's
headless Chromium with Playwright, open every page, change one input on each, check that
no exception box appears, and save a screenshot per page.

Skips only where Chromium is absent and CI is not set; under CI a missing Chromium fails.
Screenshots go to artifacts/screenshots/ (gitignored); their paths are printed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.app.browser_harness import CHROMIUM, ROOT, require_browser, serve

SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
VIEWPORT = {"width": 1600, "height": 2000}
"""Tall: Streamlit scrolls an inner container, so a full-page screenshot is the viewport."""

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The app served by `python -m streamlit run` on a free 127.0.0.1 port."""
    require_browser()
    with serve(tmp_path_factory.mktemp("streamlit") / "server.log") as url:
        yield url


def _settle(page, *, charts: bool = False) -> None:
    """Wait as Streamlit's own e2e suite does: connected, script finished, no skeleton."""
    from playwright.sync_api import expect

    page.wait_for_selector("[data-testid='stAppViewContainer']", state="attached", timeout=30_000)
    page.locator("[data-testid='stApp'][data-test-connection-state='CONNECTED']").wait_for(
        state="attached", timeout=30_000
    )
    page.wait_for_timeout(400)
    page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(
        state="attached", timeout=30_000
    )
    expect(page.get_by_test_id("stSkeleton")).to_have_count(0, timeout=30_000)
    if charts:
        page.wait_for_selector("[data-testid='stPlotlyChart'] .main-svg", timeout=30_000)
        page.wait_for_timeout(600)  # let plotly finish laying out before the screenshot


def _no_exception(page, where: str) -> None:
    boxes = page.get_by_test_id("stException")
    assert boxes.count() == 0, f"{where}: {boxes.first.inner_text()}"


def _go(page, title: str) -> None:
    page.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()


def _number(page, label: str, value: str) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(value)
    box.press("Enter")


def _shot(page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    print(f"screenshot: {path}")
    return path


def test_every_page_in_chromium(server, tmp_path, profile_json):
    from playwright.sync_api import expect, sync_playwright

    profile_path = tmp_path / "cpu-profile.json"
    profile_path.write_bytes(profile_json)
    shots = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            # The dashboard asks nothing of any host but its own server (a material or
            # emoji favicon is fetched from Google's or a CDN's, which also fails offline).
            elsewhere = []
            page.on(
                "request",
                lambda r: (
                    None
                    if r.url.startswith((server, "data:", "blob:"))
                    else elsewhere.append(r.url)
                ),
            )
            # A link reproduces a scenario: the query parameters set the widgets.
            page.goto(server + "/?batch_size=32&target=llama-3.1-70b")
            _settle(page, charts=True)
            _no_exception(page, "ROI calculator")
            expect(page.get_by_text("Pre-flight checklist")).to_be_visible()
            expect(page.get_by_role("heading", name="batch 32")).to_be_visible()
            expect(page.get_by_test_id("stSidebar").get_by_text("Llama 3.1 70B")).to_be_visible()

            # ROI: raise the acceptance rate; the URL now carries it.
            _number(page, "Acceptance rate α (per token)", "0.85")
            _settle(page, charts=True)
            _no_exception(page, "ROI calculator after a change")
            expect(page).to_have_url(re.compile(r"acceptance_rate=0\.85"))
            assert page.get_by_test_id("stPlotlyChart").count() == 3
            shots.append(_shot(page, "1-roi"))

            # Sizer: switch the SLO to tokens/s per user.
            _go(page, "Concurrency sizer")
            _settle(page, charts=True)
            # The scenario follows the user to the next page, URL included.
            expect(page).to_have_url(re.compile(r"/sizer\?.*acceptance_rate=0\.85"))
            page.get_by_test_id("stRadio").get_by_text("tokens/s per user").click()
            _settle(page, charts=True)
            _no_exception(page, "Concurrency sizer")
            shots.append(_shot(page, "2-sizer"))
            launch = page.get_by_text("vllm serve").first
            launch.scroll_into_view_if_needed()
            expect(launch).to_be_visible()
            shots.append(_shot(page, "2b-sizer-launch"))

            # Profiles: upload a profile through the file chooser, then calibrate with it.
            _go(page, "Profiles")
            _settle(page)
            page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(profile_path))
            _settle(page, charts=True)
            _no_exception(page, "Profiles")
            expect(page.get_by_text("cpu-profile.json: Test CPU")).to_be_visible()
            page.get_by_test_id("stSelectbox").filter(has_text="Calibrate every page with").click()
            page.get_by_role("option", name="uploaded: cpu-profile.json").click()
            _settle(page, charts=True)
            _no_exception(page, "Profiles after calibrating")
            expect(page.get_by_text("Calibrated by")).to_be_visible()
            shots.append(_shot(page, "3-profiles"))

            # Acceptance: load the example scrape.
            _go(page, "Acceptance from production")
            _settle(page)
            page.get_by_role("button", name="Load an example scrape").click()
            _settle(page, charts=True)
            _no_exception(page, "Acceptance")
            expect(page.get_by_text("Mean accepted tokens τ")).to_be_visible()
            shots.append(_shot(page, "4-acceptance"))

            # Reports: reset the table from the scenario, then show row 1's checklist.
            _go(page, "Reports")
            _settle(page)
            page.get_by_role("button", name="Reset from the current scenario").click()
            _settle(page)
            page.get_by_test_id("stSelectbox").filter(
                has_text="Pre-flight checklist for row"
            ).click()
            page.get_by_role("option", name="1", exact=True).click()
            _settle(page)
            _no_exception(page, "Reports")
            expect(page.get_by_text("Tokenizers match")).to_be_visible()
            with page.expect_download() as dl:
                page.get_by_role("button", name="Report (CSV)").click()
            saved = tmp_path / "report.csv"
            dl.value.save_as(saved)
            assert dl.value.suggested_filename == "specplan-report.csv"
            assert "speedup [x]" in saved.read_text().splitlines()[0]
            shots.append(_shot(page, "5-reports"))

            for extra in page.get_by_test_id("stSidebarNavLink").all_inner_texts():
                title = extra.strip().splitlines()[-1].strip()
                if title in {
                    "ROI calculator",
                    "Concurrency sizer",
                    "Profiles",
                    "Acceptance from production",
                    "Reports",
                }:
                    continue
                # Another page (Validation): open it and nudge its first number input, or
                # else pick another option of its first selectbox, if it has either.
                _go(page, title)
                _settle(page)
                shots.append(_shot(page, f"6-{title.lower().replace(' ', '-')}-first-tab"))
                tabs = page.get_by_role("tab")
                if tabs.count() > 1:
                    tabs.nth(tabs.count() - 1).click()
                    _settle(page)
                step_up = page.get_by_test_id("stNumberInputStepUp").filter(visible=True)
                select = (
                    page.get_by_test_id("stMain").get_by_test_id("stSelectbox").filter(visible=True)
                )
                if step_up.count():
                    step_up.first.click()
                    _settle(page)
                elif select.count():
                    select.first.click()
                    options = page.get_by_role("option")
                    options.nth(options.count() - 1).click()
                    _settle(page)
                _no_exception(page, title)
                shots.append(_shot(page, f"6-{title.lower().replace(' ', '-')}"))
        finally:
            browser.close()
    assert all(s.stat().st_size > 10_000 for s in shots)
    assert not elsewhere, f"requests beyond the app's server: {elsewhere}"


@pytest.fixture
def pixel_server():
    """A loopback HTTP server that records every path asked of it: the URL a Markdown
    image in user text would make the browser fetch."""
    import http.server
    import threading

    hits: list[str] = []

    class Record(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Record)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", hits
    finally:
        httpd.shutdown()
        httpd.server_close()


def _shown(locator) -> str:
    """The text a user reads, without the invisible word joiners `widgets.plain` puts into
    what Markdown would otherwise link (`://`, `www.`, `@`)."""
    from app.text import WORD_JOINER

    return locator.inner_text().replace(WORD_JOINER, "")


def test_text_from_uploads_shows_literally_and_fetches_nothing(server, pixel_server):
    """A profile's device name, an upload's file name and a scrape's file name that hold
    Markdown images, links and HTML show as the characters they are, on the Profiles page,
    in the sidebar of a planning page (the device joins the GPU list) and on the Acceptance
    page; the browser never requests the URLs they name."""
    import json

    from playwright.sync_api import sync_playwright

    from app.samples import EXAMPLE_SCRAPE
    from tests.app.conftest import sample_profile_doc

    pixel, hits = pixel_server
    device = f"![t]({pixel}/pixel.png) <img src='{pixel}/img.png'> [a]({pixel}/link)"
    doc = sample_profile_doc()
    doc["device"]["name"] = device
    # A file name cannot hold '/', so its image is relative: it would hit the app's server.
    profile_name = "![f](file-pixel.png) <b>x</b>.json"
    scrape_name = "![s](scrape-pixel.png).prom"
    requested: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.on("request", lambda r: requested.append(r.url))
            page.goto(server + "/")
            _settle(page)

            _go(page, "Profiles")
            _settle(page)
            page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
                {
                    "name": profile_name,
                    "mimeType": "application/json",
                    "buffer": json.dumps(doc).encode(),
                }
            )
            _settle(page, charts=True)
            _no_exception(page, "Profiles")
            main = page.get_by_test_id("stMain")
            assert f"{profile_name}: {device} (cpu)" in _shown(main)
            page.get_by_test_id("stSelectbox").filter(has_text="Calibrate every page with").click()
            page.get_by_role("option", name=f"uploaded: {profile_name}").click()
            _settle(page, charts=True)
            _no_exception(page, "Profiles after calibrating")
            sidebar = page.get_by_test_id("stSidebar")
            # The scenario (an h100-sxm) is not the profiled device: the note names both.
            assert f"uploaded: {profile_name} (device: cpu)" in _shown(sidebar)

            # The profile's device joins the GPU list under its own name: choose it.
            _go(page, "ROI calculator")
            _settle(page, charts=True)
            sidebar.get_by_test_id("stSelectbox").filter(
                has=page.get_by_text("GPU", exact=True)
            ).click()
            page.get_by_role("option", name="cpu", exact=True).click()
            _settle(page)  # a 70B model on an 8 GB CPU: a reason, not charts
            _no_exception(page, "ROI calculator on the profiled device")
            assert f"{device}: " in _shown(sidebar)
            assert f"{device} has no catalog price" in _shown(sidebar)

            _go(page, "Acceptance from production")
            _settle(page)
            page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
                {"name": scrape_name, "mimeType": "text/plain", "buffer": EXAMPLE_SCRAPE.encode()}
            )
            _settle(page, charts=True)
            _no_exception(page, "Acceptance")
            assert f"From {scrape_name}" in _shown(main)
            _shot(page, "7-literal-user-text")

            images = page.locator("img").evaluate_all("els => els.map(e => e.src)")
            links = page.locator("a").evaluate_all("els => els.map(e => e.href)")
        finally:
            browser.close()
    named = [pixel, "pixel.png", "img.png"]
    assert not hits, hits
    assert not [u for u in requested if any(n in u for n in named)], requested
    assert not [u for u in images + links if any(n in u for n in named)]
