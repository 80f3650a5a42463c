"""The address a real browser shows reproduces the scenario: build one in Chromium, open
the page's URL in a fresh browser context, and read the same numbers. AppTest cannot check
this (a bound widget's own changes reach the URL through Streamlit's frontend)."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.app import test_browser as browser

pytestmark = pytest.mark.browser
server = browser.server
ALPHA = "Acceptance rate α (per token)"


def _speedup(page) -> str:
    metric = page.get_by_test_id("stMetric").filter(has_text="Speedup")
    return metric.get_by_test_id("stMetricValue").inner_text()


def _alpha(page) -> str:
    return page.get_by_label(ALPHA, exact=True).input_value()


def _pick(page, label: str, option: str) -> None:
    page.get_by_test_id("stSelectbox").filter(has_text=label).click()
    page.get_by_role("option", name=option, exact=True).click()
    browser._settle(page, charts=True)


def _query(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(page.url).query).items()}


def _reopen(chromium, url: str):
    page = chromium.new_context(viewport=browser.VIEWPORT).new_page()
    page.goto(url)
    browser._settle(page, charts=True)
    browser._no_exception(page, f"reopened {url}")
    return page


def test_a_browser_address_reproduces_the_scenario(server):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=browser.CHROMIUM, headless=True, args=browser.CHROMIUM_ARGS
        )
        try:
            page = chromium.new_page(viewport=browser.VIEWPORT)
            page.goto(server + "/?method=ngram")
            browser._settle(page, charts=True)
            # n-gram's own published figure (chat x ngram), not EAGLE's α.
            assert _alpha(page) == "0.387"
            expect(page).to_have_url(re.compile(r"[?&]pos=0\.3865_0\.1494_"))

            _pick(page, "Method", "draft_model")
            _pick(page, "Target model", "llama-3.1-8b")
            _pick(page, "K (speculative tokens per step)", "4")
            browser._number(page, "Batch size (concurrent sequences per replica)", "32")
            browser._settle(page, charts=True)
            browser._number(page, ALPHA, "0.66")
            browser._settle(page, charts=True)
            browser._go(page, "Profiles")
            browser._settle(page)
            _pick(page, "Calibrate every page with", "bundled: cpu/tiny.json")
            browser._go(page, "ROI calculator")
            browser._settle(page, charts=True)
            browser._no_exception(page, "ROI calculator")
            query = _query(page)
            assert query["profile"] == "cpu/tiny.json"
            assert query["acceptance_rate"] == "0.66" and "pos" not in query
            assert {"method", "target", "k", "batch_size"} <= set(query)

            opened = _reopen(chromium, page.url)
            assert _speedup(opened) == _speedup(page)
            assert _alpha(opened) == "0.660"
            assert _query(opened) == query
            expect(opened.get_by_text("Calibrated by")).to_be_visible()

            # Measured figures: the per-position rates travel, the scrape does not.
            browser._go(page, "Acceptance from production")
            browser._settle(page)
            page.get_by_role("button", name="Load an example scrape").click()
            browser._settle(page, charts=True)
            page.get_by_role("button", name="Use these figures on every page").click()
            browser._settle(page, charts=True)
            browser._go(page, "ROI calculator")
            browser._settle(page, charts=True)
            query = _query(page)
            assert query["workload"] == "measured"
            assert query["pos"] == "0.7799_0.64_0.4879"

            opened = _reopen(chromium, page.url)
            assert _speedup(opened) == _speedup(page)
            assert _alpha(opened) == _alpha(page)
            sidebar = opened.get_by_test_id("stSidebar")
            expect(sidebar.get_by_text("Per-position rates from the link")).to_be_visible()
        finally:
            chromium.close()
