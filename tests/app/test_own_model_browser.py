"""A user's own model in Chromium: upload a real checkpoint's config.json in the sidebar,
plan with it (the ROI page shows its numbers), save it to the library, restart the server
on the same library and plan with it again from the target choice."""

from __future__ import annotations

import shutil

import pytest

from library import open_library
from tests.app.browser_harness import CHROMIUM, require_browser, serve
from tests.app.test_browser import CHROMIUM_ARGS, SHOTS, VIEWPORT, _no_exception, _settle
from tests.library.test_models import CONFIGS

pytestmark = pytest.mark.browser
CONFIG = CONFIGS / "Qwen--Qwen3-30B-A3B_config.json"
"""A real MoE checkpoint's config.json (48 layers, 128 experts), as aiconfigurator-core
ships it; uploaded under another name, which names the model."""
NAME = "team-qwen3-moe"
MODEL_ID = "user:" + NAME
EXPANDER = "Your model (config.json)"


def _serve(db_url: str, log_path):
    return serve(log_path, env={"SPECPLAN_DB_URL": db_url, "SPECPLAN_USER": "ana"})


def _shows_numbers(page, where: str) -> list[str]:
    from playwright.sync_api import expect

    _no_exception(page, where)
    values = page.get_by_test_id("stMetricValue")
    expect(values.first).to_be_visible()
    shown = [t.strip() for t in values.all_inner_texts()]
    assert shown and all(any(ch.isdigit() for ch in t) for t in shown[:3]), (where, shown)
    return shown


def _target(page):
    return page.get_by_test_id("stSidebar").get_by_role("combobox", name="Target model")


def _upload_plan_save(page, url: str, config_path) -> list[str]:
    from playwright.sync_api import expect

    page.goto(url + "/")
    _settle(page)
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text(EXPANDER, exact=True).click()
    sidebar.locator("[data-testid='stFileUploaderDropzoneInput']").first.set_input_files(
        str(config_path)
    )
    _settle(page)
    expect(sidebar.get_by_text(f"Planning with {MODEL_ID}")).to_be_visible()
    expect(_target(page)).to_have_value(MODEL_ID)
    _shows_numbers(page, "ROI with the uploaded model")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_timeout(500)  # the expander's height animates as its content grows
    page.screenshot(path=str(SHOTS / "own_model_uploaded.png"))
    sidebar.get_by_role("button", name="Save model to library").click()
    _settle(page)
    expect(sidebar.get_by_text(f"Saved as '{NAME}'")).to_be_visible()
    return _shows_numbers(page, "ROI after the save")


def _reopen(page, url: str) -> list[str]:
    from playwright.sync_api import expect

    page.goto(url + "/")
    _settle(page)
    _target(page).click()
    page.keyboard.type(NAME)  # the list is long: typing filters it
    page.get_by_role("option", name=MODEL_ID, exact=True).click()
    _settle(page)
    expect(_target(page)).to_have_value(MODEL_ID)
    shown = _shows_numbers(page, "ROI with the kept model after the restart")
    page.get_by_test_id("stSidebar").get_by_text(EXPANDER, exact=True).click()
    expect(page.get_by_text(f"In the library (target choices): {MODEL_ID}")).to_be_visible()
    page.wait_for_timeout(500)  # the expander opens with an animation
    page.screenshot(path=str(SHOTS / "own_model_reopened.png"))
    return shown


def test_an_uploaded_config_plans_is_kept_and_reopens_after_a_restart(tmp_path):
    from playwright.sync_api import sync_playwright

    require_browser()
    db_url = f"sqlite:///{tmp_path / 'team.db'}"
    config_path = tmp_path / f"{NAME}.json"
    shutil.copyfile(CONFIG, config_path)
    log = tmp_path / "server.log"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            with _serve(db_url, log) as url:
                before = _upload_plan_save(browser.new_page(viewport=VIEWPORT), url, config_path)
            kept = [(e.kind, e.name, e.created_by) for e in open_library(db_url).entries()]
            assert kept == [("model", NAME, "ana")]
            with _serve(db_url, log) as url:
                after = _reopen(browser.new_page(viewport=VIEWPORT), url)
            # The kept model plans as the uploaded one did: the same headline figures.
            assert after[:6] == before[:6], (before, after)
        finally:
            browser.close()
