"""Every page at 1024, 1280 and 1600 px wide in Chromium, sidebar open: no metric's value
or label is cut off (issue 27, Layout). Screenshots go to artifacts/screenshots/layout-*.

A cut is text wider than its box (scrollWidth > clientWidth), as Streamlit's ellipsis
shows it ("$2.…", "VRAM for specu…")."""

from __future__ import annotations

import pytest

from tests.app import test_browser as browser

pytestmark = pytest.mark.browser
server = browser.server
WIDTHS = (1024, 1280, 1600)
PAGES = (
    "ROI calculator",
    "Concurrency sizer",
    "Load & SLO",
    "Reports",
    "Profiles",
    "Acceptance from production",
    "Validation",
)
CUT = """els => els.filter(e => {
    const inner = e.querySelector('div, p, label') || e;
    return inner.scrollWidth > inner.clientWidth + 1 || e.scrollWidth > e.clientWidth + 1;
}).map(e => e.innerText)"""


def _cut(page) -> list[str]:
    metrics = page.get_by_test_id("stMain").locator(
        "[data-testid='stMetricValue'], [data-testid='stMetricLabel']"
    )
    return metrics.evaluate_all(CUT)


def test_no_metric_is_cut_at_common_widths(server):
    from playwright.sync_api import sync_playwright

    cut = {}
    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=browser.CHROMIUM, headless=True, args=browser.CHROMIUM_ARGS
        )
        try:
            for width in WIDTHS:
                page = chromium.new_page(viewport={"width": width, "height": 1400})
                page.goto(server + "/?method=eagle3&batch_size=32")
                browser._settle(page, charts=True)
                for title in PAGES:
                    browser._go(page, title)
                    browser._settle(page)
                    page.wait_for_timeout(800)
                    browser._no_exception(page, f"{title} at {width}")
                    slug = title.lower().replace(" ", "-").replace("&", "and")
                    browser._shot(page, f"layout-{width}-{slug}")
                    found = _cut(page)
                    if found:
                        cut[(width, title)] = found
                page.close()
        finally:
            chromium.close()
    assert not cut, cut
