"""A link reproduces the scenario: the method in the link picks its own acceptance, the
per-position rates and the bundled calibration profile travel in the URL, and a fresh
session opening a link shows the numbers of the session that made it. Also: changing the
method sets the acceptance input without Streamlit's default-plus-Session-State warning."""

from __future__ import annotations

import csv
import math

import pytest
from streamlit.testing.v1.element_tree import Selectbox

from app import sim, widgets
from app.presets import pick_prior
from simulator.inputs.catalog import default_models, load_acceptance_priors

BUNDLED = "bundled: cpu/specplan-byte-pair.json"
CPU_SCENARIO = {
    "gpu": "cpu",
    "num_gpus": 1,
    "target": "specplan-byte-target",
    "method": "draft_model",
    "draft": "specplan-byte-draft",
    "k": "4",
}
"""A scenario the bundled byte-level profile calibrates (its device, its two models)."""


def _prior(method: str, target: str = "llama-3.3-70b", workload: str = "chat"):
    models = default_models()
    draft = models[widgets.DEFAULT_DRAFT]  # a draft model's prior is picked by the pair
    return pick_prior(load_acceptance_priors(), workload, method, models[target], draft=draft)


def _link(at) -> dict[str, str]:
    """The address a browser would show: what the app wrote (`at.query_params`) plus each
    bound widget's value where it is not the widget's default, as Streamlit's frontend
    writes it. AppTest has no frontend, so a bound widget's own changes stay out of
    `at.query_params` (tests/app/test_links_browser.py checks the real address)."""
    link = dict(at.query_params)
    for w in [*at.selectbox, *at.number_input]:
        key = w.proto.query_param_key
        if not key:
            continue
        if isinstance(w, Selectbox):
            default = w.proto.options[w.proto.default]
            changed = str(w.value) != default
        else:
            changed = not w.proto.HasField("default") or w.value != w.proto.default
        if changed and w.value is not None:
            link[key] = str(w.value)
        else:
            link.pop(key, None)
    return link


def _same(a, b) -> bool:
    """Equal, NaN included (a row has NaN in the acceptance column it does not use)."""
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return both_nan or a == b


def _rates(text: str) -> list[float]:
    return [float(r) for r in text.split(";")]


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _sidebar_text(at) -> list[str]:
    return [c.value for c in at.sidebar.caption] + [w.value for w in at.sidebar.warning]


def _same_page(made, opened) -> None:
    """Same numbers, same acceptance inputs, same calibration."""
    assert not opened.exception, [e.value for e in opened.exception]
    assert _metric(opened, "Speedup") == _metric(made, "Speedup")
    assert [m.value for m in opened.metric] == [m.value for m in made.metric]
    row, expected = opened.session_state["roi_row"], made.session_state["roi_row"]
    for col in (
        "speedup",
        "tau",
        "k",
        "latency_source",
        "acceptance_rate",
        "acceptance_per_position",
    ):
        assert _same(row[col], expected[col]), (col, row[col], expected[col])
    for key in ("workload", "method", "target", "gpu", "k"):
        assert opened.selectbox(key=key).value == made.selectbox(key=key).value
    alpha, alpha_made = (a.number_input(key="acceptance_rate") for a in (opened, made))
    assert alpha.value == pytest.approx(alpha_made.value)
    assert alpha.disabled == alpha_made.disabled
    assert _sidebar_text(opened) == _sidebar_text(made)


# --------------------------------------------------------------------- the method in a link
@pytest.mark.parametrize("method", ["ngram", "draft_model", "eagle3", "medusa"])
def test_a_method_in_the_link_gets_its_own_published_acceptance(app, method):
    prior = _prior(method)
    at = app(query={"method": method})
    assert at.number_input(key="acceptance_rate").value == pytest.approx(prior.alpha)
    row = at.session_state["roi_row"]
    assert row["acceptance_per_position"] == prior.positions_text
    assert not any("edited" in c for c in _sidebar_text(at))
    assert at.query_params["pos"] == widgets.positions_param(prior.positions_text)


@pytest.mark.parametrize("bad", ["", "abc", "1.5", "-0.2"])
def test_a_broken_alpha_in_the_link_gets_the_published_one(app, bad):
    at = app(query={"method": "ngram", "acceptance_rate": bad})
    assert at.number_input(key="acceptance_rate").value == pytest.approx(_prior("ngram").alpha)
    assert at.session_state["roi_row"]["acceptance_per_position"] == _prior("ngram").positions_text


def test_ngram_from_the_link_matches_ngram_chosen_in_the_sidebar(app):
    linked = app(query={"method": "ngram"})
    chosen = app()
    chosen.selectbox(key="method").set_value("ngram").run()
    _same_page(chosen, linked)


# ---------------------------------------------------------------- no Session State warning
def test_changing_method_target_and_workload_logs_no_session_state_warning(app, state_warnings):
    at = app()
    for key, value in [
        ("method", "ngram"),
        ("method", "draft_model"),
        ("target", "llama-3.1-8b"),
        ("workload", "code"),
        ("method", "eagle"),
    ]:
        at.selectbox(key=key).set_value(value).run()
        assert not at.exception
    assert at.number_input(key="acceptance_rate").value == pytest.approx(
        _prior("eagle", "llama-3.1-8b", "code").alpha
    )
    at.number_input(key="acceptance_rate").set_value(None).run()
    assert at.number_input(key="acceptance_rate").value == pytest.approx(
        _prior("eagle", "llama-3.1-8b", "code").alpha
    )
    assert not [r for r in state_warnings if "default value" in r], state_warnings


def test_the_acceptance_input_the_callbacks_set_has_no_default(app):
    at = app()
    assert not at.number_input(key=widgets.ALPHA_KEY).proto.HasField("default")


def test_measured_figures_on_every_page_log_no_session_state_warning(app, state_warnings):
    at = app("acceptance")
    at.button(key="load_example").click().run()
    at.button(key="use_measured").click().run()
    at.switch_page("views/roi.py").run()
    at.selectbox(key="method").set_value("ngram").run()
    assert not at.exception
    assert not [r for r in state_warnings if "default value" in r], state_warnings


# ------------------------------------------------------------------------------ round trip
def _build(app, *, edit_alpha: bool):
    """A scenario built by hand: a bundled profile, then device, models, method, K, batch,
    traffic, and (or not) an acceptance rate typed over the published one."""
    at = app("profiles")
    at.selectbox(key=sim.CALIBRATE_KEY).set_value(BUNDLED).run()
    at.switch_page("views/roi.py").run()
    for key, value in CPU_SCENARIO.items():
        at.selectbox(key=key).set_value(value).run()
    for key, value in (("batch_size", 8), ("prompt_len", 256), ("output_len", 128)):
        at.number_input(key=key).set_value(value).run()
    if edit_alpha:
        at.number_input(key="acceptance_rate").set_value(0.66).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["roi_row"]["status"] == "ok"
    return at


@pytest.mark.parametrize("edit_alpha", [True, False], ids=["typed-alpha", "published-prior"])
def test_a_link_shows_the_same_numbers_in_a_fresh_session(app, edit_alpha):
    made = _build(app, edit_alpha=edit_alpha)
    link = _link(made)
    assert link["profile"] == "cpu/specplan-byte-pair.json"
    assert ("pos" in link) is not edit_alpha
    assert made.session_state["roi_row"]["latency_source"] != "roofline"
    opened = app(query=link)
    _same_page(made, opened)
    assert opened.session_state[sim.CALIBRATE_KEY] == BUNDLED
    assert _link(opened) == link


def test_the_link_keeps_only_what_differs_from_fixed_defaults(app):
    at = _build(app, edit_alpha=True)
    link = _link(at)
    assert set(link) == {
        *CPU_SCENARIO,
        "profile",
        "acceptance_rate",
        "batch_size",
        "prompt_len",
        "output_len",
    }
    assert link["acceptance_rate"] == "0.66"


# ------------------------------------------------------------------------- measured rates
def test_measured_per_position_rates_travel_in_the_link(app):
    made = app("acceptance")
    made.button(key="load_example").click().run()
    made.button(key="use_measured").click().run()
    made.switch_page("views/roi.py").run()
    measured = made.session_state[sim.MEASURED_KEY]["acceptance_per_position"]
    link = _link(made)
    assert link["workload"] == "measured"
    assert link["pos"] == widgets.positions_param(measured)
    assert link["pos"].count("_") == measured.count(";")

    opened = app(query=link)
    assert sim.MEASURED_KEY not in opened.session_state
    row = opened.session_state["roi_row"]
    assert _rates(row["acceptance_per_position"]) == _rates(measured)
    assert _metric(opened, "Speedup") == _metric(made, "Speedup")
    assert row["speedup"] == pytest.approx(made.session_state["roi_row"]["speedup"])
    assert opened.number_input(key="acceptance_rate").value == pytest.approx(
        made.number_input(key="acceptance_rate").value
    )
    assert opened.number_input(key="acceptance_rate").disabled
    assert any("Per-position rates from the link" in c for c in _sidebar_text(opened))
    assert not opened.sidebar.info


# --------------------------------------------------------------------------- priors change
def test_a_link_keeps_its_numbers_after_the_published_figure_changes(app, monkeypatch, tmp_path):
    made = app()
    link = _link(made)
    assert "pos" in link
    rows = [dict(r) for r in load_acceptance_priors()]
    for r in rows:
        if r["workload"] == "chat" and r["method"] == "eagle" and "3.3-70B" in r["draft_hint"]:
            r["mean_accepted_tokens"] = "2.5"
    # The priors file is edited: the app's cached reads see the new figure.
    edited = tmp_path / "acceptance_priors.csv"
    with edited.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    monkeypatch.setattr(sim, "PRIORS_CSV", edited)
    assert sim.priors() == rows

    opened = app(query=link)
    assert not opened.exception
    row = opened.session_state["roi_row"]
    assert row["speedup"] == pytest.approx(made.session_state["roi_row"]["speedup"], rel=1e-4)
    assert _metric(opened, "Speedup") == _metric(made, "Speedup")
    assert row["acceptance_per_position"] == ";".join(link["pos"].split("_"))
    assert any(
        c.startswith("Per-position rates from the link") and "published figure is now α" in c
        for c in _sidebar_text(opened)
    )

    # The user changes the method: the link's rates give way to the new method's figure.
    opened.selectbox(key="method").set_value("ngram").run()
    fresh = pick_prior(rows, "chat", "ngram", default_models()["llama-3.3-70b"])
    assert opened.session_state["roi_row"]["acceptance_per_position"] == fresh.positions_text


def test_typing_an_alpha_drops_the_links_rates(app):
    opened = app(query={"pos": "0.9_0.8_0.7", "acceptance_rate": "0.797"})
    assert opened.session_state["roi_row"]["acceptance_per_position"] == "0.9;0.8;0.7"
    opened.number_input(key="acceptance_rate").set_value(0.8).run()
    assert opened.session_state["roi_row"]["acceptance_rate"] == pytest.approx(0.8)
    assert "pos" not in opened.query_params


@pytest.mark.parametrize("bad", ["0.5_0.7", "1.2_0.5", "abc", "nan", ""])
def test_a_broken_pos_in_the_link_is_ignored_and_said(app, bad):
    at = app(query={"pos": bad})
    prior = _prior("eagle")
    assert at.session_state["roi_row"]["acceptance_per_position"] == prior.positions_text
    assert any("Ignored the link's per-position rates" in w.value for w in at.sidebar.warning)
    assert at.query_params["pos"] == widgets.positions_param(prior.positions_text)


# ------------------------------------------------------------------- calibration profiles
def test_an_uploaded_profile_stays_out_of_the_link_and_the_sidebar_says_so(app, profile_json):
    at = app("profiles")
    at.file_uploader(key="profile_upload").set_value(
        [("cpu.json", profile_json, "application/json")]
    ).run()
    at.selectbox(key=sim.CALIBRATE_KEY).set_value("uploaded: cpu.json").run()
    assert "profile" not in at.query_params
    assert any("cannot travel in a link" in c.value for c in at.sidebar.caption)
    at.selectbox(key=sim.CALIBRATE_KEY).set_value(BUNDLED).run()
    assert at.query_params["profile"] == "cpu/specplan-byte-pair.json"
    assert not any("cannot travel in a link" in c.value for c in at.sidebar.caption)


@pytest.mark.parametrize(
    ("name", "shown"),
    [("gpu/missing.json", "`gpu/missing.json`"), ("[x](https://example.com)", "it names")],
)
def test_a_link_to_a_profile_not_bundled_here_says_so(app, name, shown):
    at = app(query={"profile": name})
    warning = next(w.value for w in at.sidebar.warning if "not bundled" in w.value)
    assert shown in warning and "example.com" not in warning
    assert "profile" not in at.query_params
    assert at.session_state[sim.CALIBRATE_KEY] == sim.NO_PROFILE


# --------------------------------------------------------------------------- the format
def test_positions_param_is_compact_and_reads_back():
    assert widgets.positions_param("0.790000;0.620000;0.510000") == "0.79_0.62_0.51"
    assert widgets.positions_param("1.0;0.00004;0") == "1_0_0"
    assert widgets.positions_from_param("0.79_0.62_0.51") == "0.79;0.62;0.51"
    assert widgets.positions_from_param("0.79,0.62, 0.51") == "0.79;0.62;0.51"
    assert widgets.positions_from_param("0.79;0.62;0.51") == "0.79;0.62;0.51"
    long = "_".join(["0.5"] * 20)
    assert widgets.positions_from_param(long) == ";".join(["0.5"] * 16)
    for bad in ("0.5_0.7", "1.2", "-0.1", "abc", "", "inf"):
        assert widgets.positions_from_param(bad) is None, bad


def test_a_dropdown_value_the_sidebar_does_not_offer_is_ignored_and_said(app):
    at = app(query={"target": "gpt-5", "gpu": "H100-SXM", "method": "eagle", "num_gpus": "3"})
    said = " ".join(w.value for w in at.sidebar.warning)
    for key in ("target", "gpu", "num_gpus"):
        assert f"Ignored the link's {widgets.plain(key)} " in said
    assert "link's method" not in said
    assert at.selectbox(key="method").value == "eagle"
    assert at.selectbox(key="target").value == widgets.DEFAULT_TARGET
    assert not at.exception


def test_a_parameter_the_dashboard_does_not_read_is_named_with_the_nearest_one(app):
    at = app(query={"batchsize": "64", "![x](http://127.0.0.1:9/p.png)": "1"})
    said = " ".join(w.value for w in at.sidebar.warning)
    assert "batchsize" in said and "did you mean `batch_size`" in said
    # The name is the link's own text: shown as text, never as an image to fetch.
    assert widgets.plain("![x](http://127.0.0.1:9/p.png)") in said
    assert "batchsize" not in at.query_params
    assert at.number_input(key="batch_size").value == 16
    assert not at.exception


def test_link_params_lists_every_input_bound_to_the_url():
    # LINK_PARAMS is written out by hand; this finds every widget given **BIND in app/
    # and fails when one is missing from it, or it names an input that no longer exists.
    import ast
    from pathlib import Path

    bound = set()
    for path in Path(widgets.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            spread = [kw.value for kw in node.keywords if kw.arg is None]
            if not any(ast.unparse(v) in ("BIND", "widgets.BIND") for v in spread):
                continue
            key = next(kw.value for kw in node.keywords if kw.arg == "key")
            bound.add(key.value if isinstance(key, ast.Constant) else getattr(widgets, key.id))
    read_by_pages = {widgets.ALPHA_KEY, widgets.POS_PARAM, widgets.PROFILE_PARAM}
    read_by_pages |= {widgets.REPORT_PARAM, widgets.DAY_PARAM}
    streamlits = {"embed", "embed_options"}
    assert set(widgets.LINK_PARAMS) == bound | read_by_pages | streamlits
