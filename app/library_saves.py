"""Named scenarios (ROI, Sizer) and report tables (Reports) kept in the team's library:
save under a name, open a saved one, and the link of each.

A scenario is what a link carries (the bound widgets' values and the app's own
parameters); opening one is following its link. A report keeps the edited rows and the
outputs as computed, with the model version; reopening it says whether today's outputs
are the same. Without a database the sections say that nothing is kept.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

import numpy as np
import pandas as pd
import streamlit as st

from app import widgets
from app.library_open import library
from app.library_ui import (
    guarded,
    rename_delete_row,
    rerun_message,
    session_only_note,
    show_message,
    when,
    who,
)
from library.errors import LibraryUnavailable, NameTaken
from simulator.errors import InputError

REPORT_PARAM = widgets.REPORT_PARAM
SCENARIO_KEYS = tuple(
    sorted(
        widgets.LINK_PARAMS
        - {widgets.POS_PARAM, widgets.PROFILE_PARAM, REPORT_PARAM, "embed", "embed_options"}
    )
)
"""Widgets bound to query parameters (`widgets.BIND`): a scenario is their values plus
the app-owned parameters (`pos`, `profile`)."""
PAGE_PATHS = {"roi": "/", "sizer": "/sizer", "reports": "/reports", "profiles": "/profiles"}
TEXT_COLUMNS = (
    "target", "method", "draft", "gpu", "engine", "weight_dtype", "kv_dtype",
    "acceptance_per_position",
)  # fmt: skip
"""A report table's text columns (the rest are numbers)."""


# ---------------------------------------------------------------------------- scenarios
def scenario_params() -> dict[str, str]:
    """The scenario as a link carries it: the link's parameters, then each bound widget's
    value in this session."""
    params = {k: str(v) for k, v in st.query_params.to_dict().items()}
    for key in SCENARIO_KEYS:
        value = st.session_state.get(key)
        if value is not None:
            params[key] = str(value)
    return params


def scenario_link(page: str, params: dict[str, str]) -> str:
    return PAGE_PATHS.get(page, "/") + ("?" + urlencode(params) if params else "")


@guarded
def scenario_bar(page: str) -> None:
    """Save the page's scenario under a name; open a saved one (its link)."""
    lib, why = library()
    with st.expander("Saved scenarios", icon=":material/bookmark:"):
        if lib is None:
            session_only_note(lib, why, "Scenarios")
            return
        # Stacked: the bar sits in the sidebar, too narrow for three columns at 1024 px.
        name = st.text_input("Name", key=f"scenario_name:{page}", max_chars=200)
        notes = st.text_input("Notes", key=f"scenario_notes:{page}")
        save = st.button(
            "Save scenario", key=f"scenario_save:{page}", icon=":material/save:", width="stretch"
        )
        if save:
            _save_scenario(lib, page, name, notes)
        where = f"scenario:{page}"
        show_message(where)
        saved = lib.entries("scenario")
        if not saved:
            st.caption("No saved scenarios yet.")
            return
        by_name = {e.name: e for e in saved}
        pick_key = f"scenario_open:{page}"
        if st.session_state.get(pick_key) not in by_name:
            st.session_state.pop(pick_key, None)
        pick = st.selectbox("Open a saved scenario", list(by_name), key=pick_key)
        _scenario_link(lib, by_name[pick])
        rename_delete_row(lib, by_name[pick], where=where, pick_key=pick_key)


def _save_scenario(lib, page: str, name: str, notes: str) -> None:
    from library.kinds import save_scenario

    try:
        saved = save_scenario(lib, name, page, scenario_params(), notes=notes, who=who())
    except NameTaken as exc:
        st.error(f"Not saved: {widgets.plain(exc)}", icon=":material/error:")
    except InputError as exc:
        st.error(f"Not saved: {widgets.plain(exc)}", icon=":material/error:")
    else:
        said = "Already saved as" if saved.existed else "Saved as"
        st.success(f"{said} '{widgets.plain(saved.entry.name)}'.", icon=":material/check:")


def _scenario_link(lib, entry) -> None:
    """The picked scenario's page, who saved it, and its link; a scenario whose content
    is not one (an older copy, a hand edit) is shown as unreadable."""
    from library.kinds import load_scenario

    try:
        page, params = load_scenario(lib, entry.name)
    except LibraryUnavailable:
        raise
    except InputError as exc:
        st.warning(
            f":material/broken_image: '{widgets.plain(entry.name)}' is unreadable: "
            f"{widgets.plain(exc)}. Saved by {widgets.plain(entry.created_by)} at "
            f"{when(entry.created_at)}. Pick another; `python -m simulator library delete` "
            "removes it.",
        )
        return
    st.caption(
        f"{widgets.plain(page)} page, saved by {widgets.plain(entry.created_by)} at "
        f"{when(entry.created_at)}. {widgets.plain(entry.notes)}"
    )
    st.link_button("Open", scenario_link(page, params), icon=":material/open_in_new:")


# ---------------------------------------------------------------------------- reports
def _open_report(lib, name: str, rows_key: str, clear: tuple[str, ...], columns) -> None:
    from library.kinds import load_report

    try:
        rows, outputs, version = load_report(lib, name)
    except LibraryUnavailable:
        raise
    except InputError as exc:
        rerun_message("reports", f"Not opened: '{name}' is unreadable: {exc}", ok=False)
        return
    for key in clear:
        st.session_state.pop(key, None)
    st.session_state[rows_key] = editor_rows(rows, columns)
    st.session_state["report_opened"] = (name, outputs, version)
    st.query_params[REPORT_PARAM] = name


def editor_rows(rows: pd.DataFrame, columns) -> pd.DataFrame:
    """A kept report's rows in the editor's columns and types."""
    rows = rows.reindex(columns=list(columns))
    for col in rows.columns:
        if col in TEXT_COLUMNS:
            rows[col] = rows[col].astype(object).where(rows[col].notna(), "").astype(str)
        else:
            rows[col] = pd.to_numeric(rows[col], errors="coerce").astype(float)
    return rows.reset_index(drop=True)


@guarded
def report_from_link(rows_key: str, clear: tuple[str, ...], columns) -> None:
    """A link's `report=NAME` opens that kept table, once per session."""
    name = st.query_params.get(REPORT_PARAM)
    if not name or st.session_state.get("report_link_read") == name:
        return
    st.session_state["report_link_read"] = name
    lib, why = library()
    if lib is None:
        st.warning(f"The link names the report '{widgets.plain(name)}', but {widgets.plain(why)}")
        return
    _open_report(lib, name, rows_key, clear, columns)


@guarded
def report_bar(rows: pd.DataFrame, report: pd.DataFrame, *, rows_key, clear, columns) -> None:
    """Save the table (rows and outputs as computed); reopen a saved one."""
    lib, why = library()
    _compare_with_saved(report)
    with st.expander("Saved reports", icon=":material/bookmark:"):
        if lib is None:
            session_only_note(lib, why, "Report tables")
            return
        show_message("reports")
        c = st.columns([2, 3, 1], vertical_alignment="bottom")
        name = c[0].text_input("Name", key="report_save_name", max_chars=200)
        notes = c[1].text_input("Notes", key="report_save_notes")
        if c[2].button("Save table", key="report_save", icon=":material/save:"):
            from library.kinds import save_report

            try:
                saved = save_report(lib, name, rows, report, notes=notes, who=who())
            except InputError as exc:
                st.error(f"Not saved: {widgets.plain(exc)}", icon=":material/error:")
            else:
                said = "Already saved as" if saved.existed else "Saved as"
                st.success(f"{said} '{widgets.plain(saved.entry.name)}'.")
        kept = lib.entries("report")
        if not kept:
            st.caption("No saved reports yet.")
            return
        by_name = {e.name: e for e in kept}
        if st.session_state.get("report_pick") not in by_name:
            st.session_state.pop("report_pick", None)
        pick = st.selectbox("Open a saved report", list(by_name), key="report_pick")
        e = by_name[pick]
        st.caption(
            f"Saved by {widgets.plain(e.created_by)} at {when(e.created_at)}, model "
            f"{e.model_version}. {widgets.plain(e.notes)} "
            f"[Link](/reports?{REPORT_PARAM}={quote(e.name, safe='')})"
        )
        st.button(
            "Open",
            key="report_open",
            on_click=_open_report,
            args=(lib, e.name, rows_key, clear, columns),
        )
        rename_delete_row(lib, e, where="reports", pick_key="report_pick")


def _compare_with_saved(report: pd.DataFrame) -> None:
    """After a reopen: whether today's outputs are the ones saved."""
    opened = st.session_state.get("report_opened")
    if not opened:
        return
    name, outputs, version = opened
    from library.kinds import model_version

    cols = [c for c in ("speedup", "spec_tpot_ms", "cost_per_mtok_spec") if c in outputs]
    same = len(outputs) == len(report) and all(
        np.allclose(
            pd.to_numeric(outputs[c], errors="coerce").to_numpy(float),
            pd.to_numeric(report[c], errors="coerce").to_numpy(float),
            rtol=1e-9,
            atol=0.0,
            equal_nan=True,  # a figure the model cannot give (no price) is missing in both
        )
        for c in cols
    )
    note = "" if version == model_version() else f" (saved by model {version})"
    if same:
        st.caption(f":material/check: '{widgets.plain(name)}': the outputs are those saved{note}.")
    else:
        st.warning(
            f"'{widgets.plain(name)}': the outputs differ from those saved{note}: the model or "
            "the calibration changed, or the table was edited since."
        )
