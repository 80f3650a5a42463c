"""Every page at 1024, 1280, 1400 and 1600 px wide in Chromium, sidebar open (issue 27,
Layout): no metric's value or label, no button's label and no input's value is cut off, no
two texts of a chart (title, axis titles, notes) overlap, and no table meant to fit is
wider than its box.
Screenshots go to artifacts/screenshots/layout-*.

A cut is text wider than its box (scrollWidth > clientWidth), as Streamlit's ellipsis
shows it ("$2.…", "VRAM for specu…", "Download …")."""

from __future__ import annotations

import pytest

from tests.app import test_browser as browser

pytestmark = pytest.mark.browser
server = browser.server
WIDTHS = (1024, 1280, 1400, 1600)
PAGES = (
    "ROI calculator",
    "Concurrency sizer",
    "Load & SLO",
    "Reports",
    "Profiles",
    "Acceptance from production",
    "Validation",
)
CUT = """els => els.filter(e => e.innerText.trim() && [e, ...e.querySelectorAll('div, p, label')]
    .some(x => x.scrollWidth > x.clientWidth + 1)
).map(e => e.innerText)"""
"""Any box inside a text that is narrower than it: a button's first box is its icon, so
looking at the first box only missed 'Launch co…' on Reports at 1024 px. Icons alone (no
text) are not texts to cut."""


CHART_TEXTS = """charts => charts.flatMap(chart => {
    const texts = [...chart.querySelectorAll(
        '.gtitle, .g-xtitle text, .g-ytitle text, .g-x2title text, .g-y2title text, '
        + '.annotation-text'
    )].filter(t => t.textContent.trim());
    const boxes = texts.map(t => [t.textContent, t.getBoundingClientRect()]);
    const hits = [];
    for (let i = 0; i < boxes.length; i++) {
        for (let j = i + 1; j < boxes.length; j++) {
            const [a, r] = boxes[i], [b, q] = boxes[j];
            const w = Math.min(r.right, q.right) - Math.max(r.left, q.left);
            const h = Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top);
            if (w > 1 && h > 1) hits.push(a + ' / ' + b);
        }
    }
    const edge = chart.getBoundingClientRect().right;
    for (const [text, r] of boxes) {
        if (r.right > edge + 1) hits.push(text + ' runs past the chart');
    }
    return hits;
})"""
WIDE_TABLES = """tables => tables.filter(t => {
    if (!t.checkVisibility()) return false;  // in a closed expander
    const s = t.dataset.testid === 'stTable' ? t : t.querySelector('.dvn-scroller');
    if (!s) return false;  // a grid not drawn (closed expander): nothing to see
    return s.scrollWidth > s.clientWidth + 1;
}).map(t => [...t.querySelectorAll('[role=columnheader], th')]
    .map(h => h.textContent.trim()).filter(Boolean).slice(0, 3).join(', '))"""
SCROLLING_BY_DESIGN = ("target, method, draft", "#, method, K", "arm, rate, requests")
"""Grids of every input or output column (by their first headers): they scroll sideways,
with what a user decides on first (the Reports results) or beside them in a table that
fits (Load & SLO)."""


INPUT_CUT = """els => els.filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => (e.getAttribute('aria-label') || '') + ': ' + e.value)"""
"""Inputs whose value is wider than the box: the TTFT SLO's '2000.00' showed as '2000.0(' at
1024 px, the step buttons over its last digit."""


def _cut(page) -> list[str]:
    main = page.get_by_test_id("stMain")
    metrics = main.locator(
        "[data-testid='stMetricValue'], [data-testid='stMetricLabel'], "
        "[data-testid='stMetricDelta']"
    )
    buttons = main.locator(
        "[data-testid='stDownloadButton'] button, [data-testid='stButton'] button"
    )
    inputs = main.locator("[data-testid='stNumberInput'] input, [data-testid='stTextInput'] input")
    return metrics.evaluate_all(CUT) + buttons.evaluate_all(CUT) + inputs.evaluate_all(INPUT_CUT)


def _overlapping_chart_texts(page) -> list[str]:
    return page.get_by_test_id("stPlotlyChart").evaluate_all(CHART_TEXTS)


def _tables_wider_than_their_box(page) -> list[str]:
    tables = page.get_by_test_id("stMain").locator(
        "[data-testid='stDataFrame'], [data-testid='stTable']"
    )
    return [t for t in tables.evaluate_all(WIDE_TABLES) if not t.startswith(SCROLLING_BY_DESIGN)]


def _sidebar_save_box(page) -> list[str]:
    """Issue 34: at 1024 px the sidebar's 'Saved scenarios' bar put Name, Notes and the
    button side by side, each too narrow to read. The inputs narrower than 150 px and the
    button texts cut, on the ROI page at the narrowest width."""
    page.set_viewport_size({"width": WIDTHS[0], "height": 1400})
    browser._go(page, "ROI calculator")
    browser._settle(page)
    bar = (
        page.get_by_test_id("stSidebar")
        .get_by_test_id("stExpander")
        .filter(has_text="Saved scenarios")
    )
    bar.get_by_text("Saved scenarios", exact=True).click()
    page.wait_for_timeout(600)
    widths = bar.locator("input").evaluate_all(
        "els => els.map(e => [e.getAttribute('aria-label'), e.clientWidth])"
    )
    found = [f"{label}: {w} px" for label, w in widths if w < 150]
    return found + bar.locator("[data-testid='stButton'] button").evaluate_all(CUT)


def test_no_metric_is_cut_no_chart_text_overlaps_no_table_is_clipped(server):
    """Each page is opened once and looked at at every width: the window is resized, as a
    user drags it, and the layout settles (no script run: Streamlit lays out in the
    browser)."""
    from playwright.sync_api import sync_playwright

    cut, overlaps, clipped = {}, {}, {}
    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=browser.CHROMIUM, headless=True, args=browser.CHROMIUM_ARGS
        )
        try:
            page = chromium.new_page(viewport={"width": WIDTHS[0], "height": 1400})
            page.goto(server + "/?method=eagle3&batch_size=32")
            browser._settle(page, charts=True)
            for title in PAGES:
                page.set_viewport_size({"width": WIDTHS[0], "height": 1400})
                browser._go(page, title)
                browser._settle(page)
                for width in WIDTHS:
                    page.set_viewport_size({"width": width, "height": 1400})
                    page.wait_for_timeout(800)
                    browser._no_exception(page, f"{title} at {width}")
                    slug = title.lower().replace(" ", "-").replace("&", "and")
                    browser._shot(page, f"layout-{width}-{slug}")
                    for defects, found in (
                        (cut, _cut(page)),
                        (overlaps, _overlapping_chart_texts(page)),
                        (clipped, _tables_wider_than_their_box(page)),
                    ):
                        if found:
                            defects[(width, title)] = found
            narrow = _sidebar_save_box(page)
        finally:
            chromium.close()
    assert not narrow, f"the sidebar's save box at {WIDTHS[0]} px: {narrow}"
    assert not (cut or overlaps or clipped), {
        "cut": cut,
        "overlapping chart texts": overlaps,
        "tables wider than their box": clipped,
    }
