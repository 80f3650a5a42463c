"""A link's scenario holds on every page, in Chromium: open a link, visit each planning
page in turn, and read the same sidebar on each, with the headline a fresh browser reads
when it opens that page's own address. Also: each page's own inputs travel in its link.

(Issue 27, wrong answer 1: the next page showed the sidebar's defaults and sized them.)"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.app import test_browser as browser

pytestmark = pytest.mark.browser
server = browser.server
LINK = (
    "/?target=llama-3.1-8b&method=draft_model&gpu=h200&num_gpus=1&batch_size=32&requests_per_s=50"
)
PAGES = ("Concurrency sizer", "Load & SLO", "Reports", "ROI calculator")


def _launch(p):
    return p.chromium.launch(
        executable_path=browser.CHROMIUM, headless=True, args=browser.CHROMIUM_ARGS
    )


def _sidebar(page) -> dict[str, str]:
    """Every scenario input in the sidebar: label -> the value it shows."""
    sb = page.get_by_test_id("stSidebar")
    shown = {}
    for box in sb.locator("input[role=combobox]").all():
        shown[box.get_attribute("aria-label")] = box.input_value()
    for box in sb.locator("input[type=number]").all():
        shown[box.get_attribute("aria-label")] = box.input_value()
    return shown


def _headline(page) -> list[str]:
    """What the page concludes: its metric values, and the Reports summary line (how many
    rows, and which saves the most)."""
    main = page.get_by_test_id("stMain")
    values = main.get_by_test_id("stMetricValue").all_inner_texts()
    summary = re.findall(r"\d+ scenarios?, each an alternative[^\n]*", main.inner_text())
    return values + summary


def _query(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(page.url).query).items()}


def _open(chromium, url: str):
    page = chromium.new_context(viewport=browser.VIEWPORT).new_page()
    page.goto(url)
    browser._settle(page)
    page.wait_for_timeout(500)
    browser._settle(page)
    browser._no_exception(page, url)
    return page


@pytest.mark.parametrize(
    ("link", "target", "method"),
    [
        (LINK, "llama-3.1-8b", "draft_model"),
        # 70B EAGLE-3 on 4x H100 at batch 32: the Sizer's operating point speculates, so
        # Reports' table has a row for it, which it took from the Sizer's session state.
        ("/?method=eagle3&batch_size=32", "llama-3.3-70b", "eagle3"),
    ],
)
def test_a_link_keeps_its_scenario_on_every_page(server, link, target, method):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = _launch(p)
        try:
            page = _open(chromium, server + link)
            first = _sidebar(page)
            assert first["Target model"] == target and first["Method"] == method
            if link == LINK:
                assert first["GPU"] == "h200" and first["GPUs per replica"] == "1"
                assert first["Requests/s"] == "50.00"
            assert first["Acceptance rate α (per token)"] != ""
            for title in PAGES:
                browser._go(page, title)
                browser._settle(page)
                page.wait_for_timeout(500)
                browser._settle(page)
                browser._no_exception(page, title)
                assert _sidebar(page) == first, title
                query = _query(page)
                assert query.get("target", target) == target, (title, page.url)
                assert query["method"] == method, (title, page.url)
                # The page's own address, opened afresh, concludes the same.
                fresh = _open(chromium, page.url)
                assert _sidebar(fresh) == first, title
                # Reports included: its rows come from the scenario, not from the Sizer's
                # result kept in the session (issue 27), so its summary line agrees too.
                assert _headline(fresh) == _headline(page), title
                fresh.context.close()
        finally:
            chromium.close()


def test_eagle3_from_a_link_reaches_the_reports_table(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = _launch(p)
        try:
            page = _open(chromium, server + "/?method=eagle3&batch_size=32")
            browser._go(page, "Reports")
            browser._settle(page)
            page.wait_for_timeout(500)
            browser._settle(page)
            assert _sidebar(page)["Method"] == "eagle3"
            summary = " ".join(_headline(page))
            assert "eagle3 K=" in summary and "batch 32" in summary, summary
        finally:
            chromium.close()


def test_the_load_pages_inputs_travel_in_its_link(server):
    from playwright.sync_api import sync_playwright

    link = (
        "/load?load_kind=concurrency+%28closed+loop%29&concurrency_range=2"
        "&concurrency_range=32&load_points=3&load_requests=400&slo_ttft=1500&slo_tpot=40"
        "&length_kind=fixed&acceptance_spread=0.05&load_k=2"
    )
    with sync_playwright() as p:
        chromium = _launch(p)
        try:
            page = _open(chromium, server + link)
            main = page.get_by_test_id("stMain")
            assert main.get_by_label("Load points", exact=True).input_value() == "3"
            assert main.get_by_label("Requests per point", exact=True).input_value() == "400"
            assert main.get_by_label("TTFT SLO, P99 (ms)", exact=True).input_value() == "1500"
            assert main.get_by_label("TPOT SLO, P99 (ms)", exact=True).input_value() == "40.00"
            assert (
                main.get_by_label("K (speculative tokens per step)", exact=True).input_value()
                == "2"
            )
            assert main.locator("input[aria-label=Lengths]").input_value() == "fixed"
            # Away and back: the inputs and their parameters stay.
            browser._go(page, "ROI calculator")
            browser._settle(page)
            browser._go(page, "Load & SLO")
            browser._settle(page)
            page.wait_for_timeout(500)
            browser._settle(page)
            query = _query(page)
            for key, value in {
                "load_points": "3",
                "load_requests": "400",
                "slo_tpot": "40.0",
                "load_k": "2",
                "length_kind": "fixed",
            }.items():
                assert query.get(key) == value, (key, page.url)
        finally:
            chromium.close()
