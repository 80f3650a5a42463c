"""Issue 34's wrong answers, redone in Chromium as the new user met them: the engine chosen
in the sidebar reaches Reports' CSV and launch config (1), the headline range widens
when the acceptance is a tree's prior planned as a chain, on ROI and in the report (2),
an engine result faster than the GPU can read the weights is refused (3), and the method
chosen for a file that records none is kept (4).

One page per check, opened from its link: Llama-3.3-70B + EAGLE-3 on 4x H100 at batch 32,
K = 3."""

from __future__ import annotations

import csv
import io
import re

import pytest

from tests.app import test_browser as browser

pytestmark = pytest.mark.browser
server = browser.server
LINK = "/{page}?target=llama-3.3-70b&method=eagle3&gpu=h100-sxm&num_gpus=4&batch_size=32&k=3"


def _launch(p):
    return p.chromium.launch(
        executable_path=browser.CHROMIUM, headless=True, args=browser.CHROMIUM_ARGS
    )


def _open(chromium, url: str):
    page = chromium.new_page(viewport=browser.VIEWPORT)
    page.goto(url)
    browser._settle(page)
    page.wait_for_timeout(400)
    browser._settle(page)
    browser._no_exception(page, url)
    return page


def _metric(page, label: str) -> str:
    box = page.get_by_test_id("stMetric").filter(has_text=label).first
    return box.get_by_test_id("stMetricValue").inner_text().strip()


def _download(page, button: str) -> str:
    with page.expect_download() as dl:
        page.get_by_role("button", name=button).click()
    with open(dl.value.path(), encoding="utf-8") as fh:
        return fh.read()


def _range_text(page) -> str:
    return page.get_by_text(re.compile("With the model's typical error at batch")).inner_text()


def _speedups(text: str) -> tuple[float, float]:
    lo, hi = re.search(r"speedup (\d+\.\d+)-(\d+\.\d+)x", text).groups()
    return float(lo), float(hi)


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_reports_downloads_the_engine_and_speedup_roi_shows(server, engine):
    """Wrong answer 1: with SGLang chosen ROI said 1.65x; Reports' CSV said 1.91x with
    engine=vllm, and its launch config was vLLM's."""
    from playwright.sync_api import sync_playwright

    query = LINK + f"&engine={engine}"
    with sync_playwright() as p:
        chromium = _launch(p)
        try:
            roi = _open(chromium, server + query.format(page=""))
            speedup = _metric(roi, "Speedup")
            reports = _open(chromium, server + query.format(page="reports"))
            rows = list(csv.DictReader(io.StringIO(_download(reports, "Report (CSV)"))))
            assert {r["engine"] for r in rows} == {engine}
            spec = next(r for r in rows if r["method"] == "eagle3" and r["k [tokens]"] == "3")
            assert f"{float(spec['speedup [x]']):.2f}x" == speedup
            launch = _download(reports, "Launch config")
            if engine == "sglang":
                assert "python -m sglang.launch_server" in launch
            else:
                assert "trtllm-serve" in launch and "decoding_type: Eagle3" in launch
            assert "vllm serve" not in launch
        finally:
            chromium.close()


def test_a_tree_prior_widens_the_range_on_roi_and_in_the_report(server):
    """Wrong answer 2: the range was the step-time error's ±6% alone though the prior is a
    dynamic tree's and the launch runs a chain. ROI's range reaches lower than the step
    error allows; the report's row carries the same range; an α typed instead is taken as
    given."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = _launch(p)
        try:
            roi = _open(chromium, server + LINK.format(page=""))
            text = _range_text(roi)
            low, high = _speedups(text)
            speedup = float(_metric(roi, "Speedup").rstrip("x"))
            error = float(re.search(r"±(\d+)%", text).group(1)) / 100
            assert low < speedup * (1 - error) - 0.05, text
            assert "planned as a chain" in text
            reports = _open(chromium, server + LINK.format(page="reports"))
            rows = list(csv.DictReader(io.StringIO(_download(reports, "Report (CSV)"))))
            spec = next(r for r in rows if r["method"] == "eagle3" and r["k [tokens]"] == "3")
            assert f"{float(spec['speedup_low [x]']):.2f}" == f"{low:.2f}"
            assert f"{float(spec['speedup_high [x]']):.2f}" == f"{high:.2f}"
            typed = _open(chromium, server + LINK.format(page="") + "&acceptance_rate=0.7")
            text = _range_text(typed)
            assert "taken as given" in text and "planned as a chain" not in text
        finally:
            chromium.close()


def _pick(page, label: str, option: str) -> None:
    """Choose `option` in the engine import's selectbox `label` (the page has another
    'Model' box: the import's start at '(as the files record it)')."""
    box = f"input[role=combobox][aria-label='{label}'][value='(as the files record it)']"
    page.get_by_test_id("stMain").locator(box).click()
    page.keyboard.type(option)
    page.get_by_role("option", name=option, exact=True).click()
    browser._settle(page)


def _upload(page, path) -> None:
    uploader = page.get_by_test_id("stFileUploader").filter(
        has_text="Benchmark result files of one engine"
    )
    uploader.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(path))
    browser._settle(page)
    page.wait_for_timeout(500)
    browser._settle(page)
    browser._no_exception(page, f"Profiles after uploading {path.name}")


def _open_import(chromium, server: str):
    page = _open(chromium, server + "/profiles")
    page.get_by_text("Upload your engine's own benchmark results").click()
    browser._settle(page)
    return page


def test_the_method_chosen_for_a_plain_looking_file_is_kept(server):
    """Wrong answer 4: a `vllm bench serve` result without acceptance keys, uploaded with
    the method MTP, was stored as a plain run, and plain runs are what the host cost is
    fitted on. It is kept as a speculative run, unpriced with the reason until its
    acceptance length is given, then priced."""
    from playwright.sync_api import sync_playwright

    from tests.profiler.test_imports import FIXTURES, SERVE

    with sync_playwright() as p:
        chromium = _launch(p)
        try:
            page = _open_import(chromium, server)
            _pick(page, "GPU", "h200")
            _pick(page, "Speculative method of the server", "mtp")
            browser._number(page, "K (0: as recorded)", "3")
            browser._settle(page)
            _upload(page, FIXTURES / SERVE[0])
            notes = " ".join(page.get_by_test_id("stText").all_inner_texts())
            assert "not priced" in notes and "'Acceptance length'" in notes, notes
            browser._number(page, "Acceptance length (0: as recorded)", "2.4")
            browser._settle(page)
            page.wait_for_timeout(500)
            browser._settle(page)
            browser._no_exception(page, "Profiles with the acceptance length")
            notes = " ".join(page.get_by_test_id("stText").all_inner_texts())
            assert "not priced" not in notes, notes
        finally:
            chromium.close()


def test_an_impossible_engine_result_is_refused_on_the_profiles_page(server, tmp_path):
    """Wrong answer 3: an SGLang bench_one_batch of Qwen3-30B-A3B (a 3.3 ms decode step)
    uploaded as the dense qwen3-32b on GB200, whose weights take 8 ms to read, calibrated a
    3.3 ms step and every page then showed 4 replicas instead of 7."""
    from playwright.sync_api import sync_playwright

    from tests.app.test_engine_uploads import _one_batch

    name, data, _ = _one_batch(0.0033)
    upload = tmp_path / name
    upload.write_bytes(data)
    with sync_playwright() as p:
        chromium = _launch(p)
        try:
            page = _open_import(chromium, server)
            _pick(page, "Model", "qwen3-32b")
            _pick(page, "GPU", "gb200")
            _pick(page, "Speculative method of the server", "mtp")
            _upload(page, upload)
            errors = " ".join(page.get_by_test_id("stAlertContentError").all_inner_texts())
            assert "decode step at batch 1" in errors and "3.3 ms" in errors, errors
            assert "8.03 ms" in errors and "one_batch.jsonl" in errors, errors
        finally:
            chromium.close()
