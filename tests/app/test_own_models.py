"""The sidebar's "Your model (config.json)": an upload or a paste becomes the target on
every planning page for the session; a bad file gets a message naming the field, never a
traceback; a model saved to the library is a target choice of every later session."""

from __future__ import annotations

import json

import pytest

from app import own_models
from library import open_library
from tests.app.conftest import visit_and_return
from tests.library.test_models import DENSE

NAME = "my-qwen3"
MODEL_ID = "user:" + NAME


@pytest.fixture(autouse=True)
def own_library(tmp_path, monkeypatch):
    """A library of this test alone: no other test's models among the target choices."""
    url = f"sqlite:///{tmp_path / 'team.db'}"
    monkeypatch.setenv("SPECPLAN_DB_URL", url)
    monkeypatch.setenv("SPECPLAN_USER", "ana")
    return url


def _upload(at, data: bytes, name: str = f"{NAME}.json"):
    at.file_uploader(key="own_config_file").set_value((name, data, "application/json")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _numbers(at) -> list[str]:
    return [m.value for m in at.metric]


def test_an_uploaded_config_is_the_target_on_every_planning_page(app, state_warnings):
    at = _upload(app(), DENSE.read_bytes())
    assert at.session_state["target"] == MODEL_ID
    assert MODEL_ID in at.selectbox(key="target").options
    assert any("36 layers" in s.value for s in at.success), [s.value for s in at.success]
    numbers = _numbers(at)
    assert numbers and all(n not in ("", "-", "nan") for n in numbers[:3]), numbers
    for page in ("sizer", "reports"):
        visit_and_return(at, page)
        assert at.selectbox(key="target").value == MODEL_ID
    assert not [r for r in state_warnings if "default value" in r], state_warnings


def test_a_pasted_config_plans_as_an_upload_does(app):
    at = app()
    at.text_area(key="own_config_text").set_value(DENSE.read_text()).run()
    at.button(key="own_use_paste").click().run()
    assert not at.exception
    # No file name: the config's model_type names it.
    assert at.session_state["target"] == "user:qwen3"
    assert _numbers(at)


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ("drop:num_hidden_layers", "num_hidden_layers"),
        ("drop:hidden_size", "hidden_size"),
        (b"{not json", "config.json"),
        (b"\xff\xfe\x00", "UTF-8"),
    ],
)
def test_a_bad_config_says_which_field_and_keeps_the_target(app, data, named):
    if isinstance(data, str):
        value = json.loads(DENSE.read_text())
        value.pop(data.removeprefix("drop:"))
        data = json.dumps(value).encode()
    at = app()
    before = at.selectbox(key="target").value
    _upload(at, data)
    errors = [e.value for e in at.error]
    assert any(e.startswith("Not read") and named.replace("_", "\\_") in e for e in errors), errors
    assert at.selectbox(key="target").value == before
    assert not any(o.startswith("user:") for o in at.selectbox(key="target").options)


def test_an_uploads_name_is_shown_as_text(app):
    at = _upload(app(), DENSE.read_bytes(), name="[x](javascript:y)<img src=y>.json")
    shown = " ".join(s.value for s in at.success)
    # Escaped for Markdown: no link, no image, no HTML.
    assert "\\[x\\]" in shown and "\\<img" in shown, shown


def test_a_saved_model_is_a_choice_in_a_new_session_and_listed(app, own_library):
    at = _upload(app(), DENSE.read_bytes())
    at.text_input(
        key=next(t.key for t in at.text_input if t.key.startswith("own_save_name"))
    ).set_value("team qwen").run()
    at.button(key="own_save").click().run()
    assert not at.exception
    assert any("Saved as 'team qwen'" in s.value for s in at.success), [s.value for s in at.success]
    assert at.session_state["target"] == "user:team qwen"
    e = open_library(own_library).get("model", "team qwen")
    assert (e.created_by, e.facts["num_layers"]) == ("ana", 36)

    fresh = app()  # another browser session: nothing uploaded there
    assert "user:team qwen" in fresh.selectbox(key="target").options
    fresh.selectbox(key="target").set_value("user:team qwen").run()
    assert not fresh.exception and _numbers(fresh)
    assert any("In the library" in c.value and "team qwen" in c.value for c in fresh.caption)

    profiles = app("profiles")
    profiles.selectbox(key="library_entry").set_value("model: team qwen").run()
    links = [m.value for m in profiles.markdown if "Plan with it" in m.value]
    assert links == ["[Plan with it](/?target=user%3Ateam%20qwen)"]


def test_a_model_deleted_by_a_teammate_drops_back_to_the_default(app, own_library):
    at = _upload(app(), DENSE.read_bytes())
    at.button(key="own_save").click().run()
    assert at.session_state["target"] == MODEL_ID
    open_library(own_library).delete("model", NAME)
    own_models.forget_kept_list()  # other sessions' changes show within KEPT_TTL_S
    at.run()
    assert not at.exception
    assert at.selectbox(key="target").value != MODEL_ID
    assert any("no longer kept" in w.value for w in at.sidebar.warning)
