"""Profiles page, issue 25: how close to the hardware each profile got (its copy rate and
the fraction of it the batch-1 decode steps reached), the warning that a slow profile will
flatter speculation, and which parts calibration prices."""

from __future__ import annotations

from bench.reference_profile import main as reference_profile


def test_bundled_engine_grade_profile_shows_its_copy_fraction_and_no_flattery_warning(app):
    """Its decode steps are engine-grade; its verify forwards are not (3.65x the decode
    step at batch 64 against vLLM's tables' 1.24x), which the page says."""
    at = app("profiles")
    captions = [c.value for c in at.caption]
    fused = [
        c.replace("\\:", ":")
        for c in captions
        if c.startswith(":material/speed:") and "nvidia-h200/fused-reference.json" in c
    ]
    assert any("NVIDIA H200: copy rate 4,095 GB/s" in c for c in fused)
    assert any("llama-3.1-8b: decode at batch 1 moves its bytes at 0.72-0.73" in c for c in fused)
    mine = [w.value for w in at.warning if "fused-reference" in w.value]
    assert not [w for w in mine if "flatter" in w]
    assert len(mine) == 2 and all("understate speculation" in w for w in mine)


def test_a_slow_upload_is_warned_about(app, tmp_path):
    path = tmp_path / "old.json"
    assert reference_profile(["--series", "profiler_c9957ef", "--out", str(path)]) == 0
    at = app("profiles")
    at.file_uploader(key="profile_upload").set_value(
        [("old.json", path.read_bytes(), "application/json")]
    ).run()
    assert not at.exception
    warned = [w.value for w in at.warning if "old.json" in w.value]
    assert len(warned) == 2
    assert "flatter speculation" in warned[0] and "1.70x what engines reach" in warned[0]


def test_calibrating_says_what_it_does_not_touch(app):
    at = app("profiles", state={"calibrate_with": "bundled: nvidia-h200/fused-reference.json"})
    text = " ".join(c.value for c in at.caption)
    assert "Not calibrated: an EAGLE, Medusa or MTP head" in text
