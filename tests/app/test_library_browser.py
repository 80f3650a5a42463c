"""Restart survival in Chromium: keep a profile, save a scenario and a report, stop the
server, start it again on the same library, and find them listed; calibrate from the kept
profile and reopen the report with the same numbers."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from library import open_library
from tests.app.browser_harness import CHROMIUM, require_browser, serve
from tests.app.test_browser import CHROMIUM_ARGS, VIEWPORT, _no_exception, _settle

pytestmark = pytest.mark.browser
PROFILE_NAME = "team cpu"
LINKED = "profile=" + quote("library:" + PROFILE_NAME, safe="")
SCENARIO = "gpu=cpu&target=llama-3.2-1b&method=ngram&num_gpus=1"
"""A scenario on the profile's device (a CPU), small enough to run there."""


def _serve(db_url: str, log_path):
    """The dashboard on a free 127.0.0.1 port with this library; stopped on exit."""
    return serve(log_path, env={"SPECPLAN_DB_URL": db_url, "SPECPLAN_USER": "ana"})


def _save_in_expander(page, expander: str, name: str, button: str) -> None:
    from playwright.sync_api import expect

    page.get_by_text(expander, exact=True).click()
    box = page.get_by_label("Name", exact=True)
    box.fill(name)
    box.press("Enter")
    _settle(page)
    page.get_by_role("button", name=button).click()
    _settle(page)
    expect(page.get_by_text(f"Saved as '{name}'")).to_be_visible()


def _before_restart(page, url: str, profile_path) -> None:
    from playwright.sync_api import expect

    page.goto(url + "/profiles")
    _settle(page)
    page.locator("[data-testid='stFileUploaderDropzoneInput']").first.set_input_files(
        str(profile_path)
    )
    _settle(page)
    page.get_by_label("Name (default: the file's)").fill(PROFILE_NAME)
    page.get_by_role("button", name="Save to library").click()
    _settle(page)
    expect(page.get_by_text(f"Kept as '{PROFILE_NAME}'")).to_be_visible()
    # A scenario on the profile's device: the link carries the kept profile.
    page.goto(f"{url}/?{SCENARIO}&batch_size=8&{LINKED}")
    _settle(page, charts=True)
    _no_exception(page, "ROI calibrated by the kept profile")
    _save_in_expander(page, "Saved scenarios", "cpu at 8", "Save scenario")
    page.goto(f"{url}/reports?{SCENARIO}&{LINKED}")
    _settle(page)
    _no_exception(page, "Reports calibrated by the kept profile")
    _save_in_expander(page, "Saved reports", "cpu plan", "Save table")


def _after_restart(page, url: str) -> None:
    from playwright.sync_api import expect

    page.goto(url + "/profiles")
    _settle(page)
    expect(page.get_by_text(f"profile '{PROFILE_NAME}', saved by ana")).to_be_visible()
    page.get_by_role("button", name="Calibrate with this").click()
    _settle(page)
    expect(page.get_by_text("Fit:").first).to_be_visible()
    _no_exception(page, "Profiles after the restart")

    page.goto(f"{url}/reports?report=cpu%20plan&{LINKED}")
    _settle(page)
    _no_exception(page, "Reports reopened")
    expect(page.get_by_text("'cpu plan': the outputs are those saved")).to_be_visible()

    page.goto(url + "/")
    _settle(page, charts=True)
    page.get_by_text("Saved scenarios", exact=True).click()
    link = page.get_by_role("link", name=re.compile("Open"))
    href = link.get_attribute("href")
    assert "gpu=cpu" in href and "batch_size=8" in href and "library" in href
    page.goto(url + href)
    _settle(page, charts=True)
    _no_exception(page, "the saved scenario's link")
    expect(page.get_by_role("heading", name="batch 8")).to_be_visible()
    expect(page.get_by_test_id("stSidebar").get_by_text("Calibrated by")).to_be_visible()


def test_profile_scenario_and_report_survive_a_restart(tmp_path, profile_json):
    from playwright.sync_api import sync_playwright

    require_browser()
    db_url = f"sqlite:///{tmp_path / 'team.db'}"
    profile_path = tmp_path / "cpu-profile.json"
    profile_path.write_bytes(profile_json)
    log = tmp_path / "server.log"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            with _serve(db_url, log) as url:
                _before_restart(browser.new_page(viewport=VIEWPORT), url, profile_path)
            kept = {(e.kind, e.name) for e in open_library(db_url).entries()}
            assert kept == {
                ("profile", PROFILE_NAME),
                ("scenario", "cpu at 8"),
                ("report", "cpu plan"),
            }
            with _serve(db_url, log) as url:
                _after_restart(browser.new_page(viewport=VIEWPORT), url)
        finally:
            browser.close()
