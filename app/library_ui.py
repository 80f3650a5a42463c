"""The team's library on the dashboard: the Profiles page's list (search, rename, annotate,
delete, calibrate), saving and opening named scenarios (ROI, Sizer) and report tables
(Reports), and what every page says when there is no database.

The library is opened once per server process (`SPECPLAN_DB_URL`, else the SQLite file
under the user's data directory). When it cannot be opened the pages keep working on the
session alone and say why nothing is kept; a failed open is retried after RETRY_S.
Everything a user typed is shown through `widgets.plain`.
"""

from __future__ import annotations

import functools
import time
from urllib.parse import quote, urlencode

import numpy as np
import pandas as pd
import streamlit as st

from app import sim, widgets
from library.errors import LibraryError, NameTaken
from simulator.errors import InputError

LIBRARY = "library: "
"""Calibration label prefix of a kept profile: LIBRARY plus its name."""
LINK_PREFIX = "library:"
"""A link's `profile=library:NAME` names a kept profile."""
REPORT_PARAM = widgets.REPORT_PARAM
RETRY_S = 30.0
"""After a failed open, how long pages use the session alone before trying again."""
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
    "target", "method", "draft", "gpu", "weight_dtype", "kv_dtype", "acceptance_per_position",
)  # fmt: skip
"""A report table's text columns (the rest are numbers)."""
_failed: dict[str, tuple[float, str]] = {}


@st.cache_resource(show_spinner=False)
def _open(url: str):
    from library.store import open_library

    return open_library(url)


def library():
    """(the open Library or None, why there is none)."""
    from library.location import configured_url, shown_url

    url = configured_url()
    if url is None:
        return None, "the library is switched off (SPECPLAN_DB_URL=off)"
    failed = _failed.get(url)
    if failed and time.monotonic() - failed[0] < RETRY_S:
        return None, failed[1]
    try:
        lib = _open(url)
    except LibraryError as exc:
        _failed[url] = (time.monotonic(), str(exc))
        return None, str(exc)
    except Exception as exc:  # a driver error the store did not foresee: still start
        why = f"cannot open {shown_url(url)}: {type(exc).__name__}: {exc}"
        _failed[url] = (time.monotonic(), why)
        return None, why
    _failed.pop(url, None)
    return lib, ""


def guarded(section):
    """A page section that reads or writes the library: when the database stops answering
    mid-session (a server restarted, a disk gone), the section says so and the page goes
    on."""

    @functools.wraps(section)
    def run(*args, **kwargs):
        try:
            return section(*args, **kwargs)
        except LibraryError as exc:
            st.warning(
                f":material/cloud_off: The library did not answer: {widgets.plain(exc)}. "
                "Nothing stored was changed; what you do now lasts for this session only."
            )
            return None

    return run


USER_HEADERS = ("X-Forwarded-Email", "X-Forwarded-User", "X-Auth-Request-Email")
"""Headers an authenticating proxy in front of the dashboard (oauth2-proxy and the like)
sets to the signed-in user; they name who saved an entry when present."""


def who() -> str | None:
    """The signed-in user (Streamlit's own login, else a proxy's header), or None: the
    library then records SPECPLAN_USER or the server's user name."""
    try:
        if st.user.is_logged_in:
            return str(st.user.get("email") or st.user.get("name"))[:200]
    except Exception:  # no login configured on this server
        pass
    headers = st.context.headers or {}
    for name in USER_HEADERS:
        value = headers.get(name)
        if value:
            return str(value).strip()[:200]
    return None


def session_only_note(lib, why: str, what: str = "Uploads") -> None:
    if lib is None:
        st.info(
            f":material/cloud_off: No library: {widgets.plain(why)}. {what} last for this "
            "browser session only; nothing is kept.",
        )


def _rerun_message(kind: str, text: str, ok: bool = True) -> None:
    st.session_state[f"library_msg:{kind}"] = (ok, text)


def _show_message(kind: str) -> None:
    msg = st.session_state.pop(f"library_msg:{kind}", None)
    if msg:
        ok, text = msg
        (st.success if ok else st.error)(widgets.plain(text))


def _when(t) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC")


# ---------------------------------------------------------------------------- profiles
@st.cache_data(show_spinner=False, max_entries=32)
def _kept_bytes(url_key: str, name: str, content_hash: str) -> bytes:
    lib, _ = library()
    return lib.content("profile", name)


def kept_profile(name: str) -> tuple[str, bytes] | None:
    """(name, bytes) of the kept profile `name`, or None (no library, or no such entry)."""
    lib, _ = library()
    if lib is None:
        return None
    try:
        entry = lib.get("profile", name)
        return name, _kept_bytes(lib.where, name, entry.content_hash)
    except LibraryError:
        return None


def link_profile(label: str) -> str | None:
    """The link's `profile` value for a kept profile's calibration label, else None."""
    return LINK_PREFIX + label.removeprefix(LIBRARY) if label.startswith(LIBRARY) else None


def label_from_link(value: str) -> str | None:
    """The calibration label a link's `profile=library:NAME` stands for, if it is kept."""
    if not value.startswith(LINK_PREFIX):
        return None
    name = value.removeprefix(LINK_PREFIX)
    return LIBRARY + name if kept_profile(name) is not None else None


def _save_uploads(lib, store: dict[str, bytes]) -> None:
    """A form that keeps one of this session's uploads under a name, with notes."""
    if not store:
        return
    with st.form("library_keep_upload", clear_on_submit=False, border=True):
        st.markdown("**Keep an upload in the library**")
        c = st.columns([1.2, 1.2, 2])
        file = c[0].selectbox("Uploaded file", list(store), key="library_keep_file")
        name = c[1].text_input("Name (default: the file's)", key="library_keep_name")
        notes = c[2].text_input("Notes", key="library_keep_notes")
        if st.form_submit_button("Save to library", icon=":material/save:"):
            from library.kinds import save_profile

            try:
                saved = save_profile(lib, name.strip() or file, store[file], notes=notes, who=who())
            except InputError as exc:
                st.error(f"Not saved: {widgets.plain(exc)}", icon=":material/error:")
            else:
                e = saved.entry
                said = "Already kept as" if saved.existed else "Kept as"
                st.success(f"{said} '{widgets.plain(e.name)}'.", icon=":material/check:")


def _calibrate(name: str) -> None:
    st.session_state[sim.CALIBRATE_KEY] = LIBRARY + name


def _rename(lib, kind: str, name: str, key: str) -> None:
    new = st.session_state.get(key, "")
    try:
        lib.rename(kind, name, new)
        _rerun_message("profiles", f"Renamed '{name}' to '{new.strip()}'.")
        st.session_state["library_entry"] = f"{kind}: {new.strip()}"
        if st.session_state.get(sim.CALIBRATE_KEY) == LIBRARY + name:
            st.session_state[sim.CALIBRATE_KEY] = LIBRARY + new.strip()
    except InputError as exc:
        _rerun_message("profiles", f"Not renamed: {exc}", ok=False)


def _annotate(lib, kind: str, name: str, key: str) -> None:
    try:
        lib.annotate(kind, name, st.session_state.get(key, ""))
        _rerun_message("profiles", f"Notes of '{name}' saved.")
    except InputError as exc:
        _rerun_message("profiles", f"Notes not saved: {exc}", ok=False)


def _delete(lib, kind: str, name: str) -> None:
    try:
        lib.delete(kind, name)
        _rerun_message("profiles", f"Deleted '{name}'.")
        st.session_state.pop("library_entry", None)
        if st.session_state.get(sim.CALIBRATE_KEY) == LIBRARY + name:
            st.session_state[sim.CALIBRATE_KEY] = sim.NO_PROFILE
    except InputError as exc:
        _rerun_message("profiles", f"Not deleted: {exc}", ok=False)


def listing_frame(table: pd.DataFrame) -> pd.DataFrame:
    """The Profiles page's table of kept profiles and engine results (`Library.table`)."""
    engine = (table["engine"] + " " + table["engine_version"]).str.strip()
    return pd.DataFrame(
        {
            "name": table["name"],
            "kind": table["kind"],
            "device": table["device"],
            "model": table["model"],
            "engine": engine,
            "saved by": table["created_by"],
            "saved": table["created_at"].dt.strftime("%Y-%m-%d %H:%M UTC"),
            "notes": table["notes"],
        }
    )


@st.cache_data(show_spinner=False, max_entries=16)
def _listing(where: str, kinds: tuple[str, ...], search: str, version: tuple) -> pd.DataFrame:
    lib, _ = library()
    return lib.table(kinds, search)


def listing(lib, kinds: tuple[str, ...], search: str) -> pd.DataFrame:
    """`lib.table(kinds, search)`, read again only when the rows changed (any session's
    save, rename, note or delete changes `table_version`)."""
    return _listing(lib.where, kinds, search, lib.table_version(kinds))


@guarded
def profiles_section(store: dict[str, bytes]) -> None:
    """The Profiles page's library: keep an upload, search, act on one entry."""
    st.subheader("Library")
    lib, why = library()
    if lib is None:
        session_only_note(lib, why)
        return
    st.caption(
        f"Kept in {widgets.plain(lib.where)}: every teammate on this server sees the same list."
    )
    _save_uploads(lib, store)
    _show_message("profiles")
    search = st.text_input(
        "Search by device, model, engine, name or notes", key="library_search", max_chars=200
    )
    table = listing(lib, ("profile", "benchmark"), search)
    if table.empty:
        st.caption("Nothing kept matches." if search else "Nothing kept yet.")
        return
    st.dataframe(listing_frame(table), hide_index=True, key="library_table")
    _entry_actions(lib, table)


def _entry_actions(lib, table: pd.DataFrame) -> None:
    labels = (table["kind"] + ": " + table["name"]).tolist()
    label = st.selectbox("Entry", labels, key="library_entry")
    kind, name = label.split(": ", 1)
    try:
        e = lib.get(kind, name)
    except LibraryError as exc:  # deleted by a teammate since the list was read
        st.warning(widgets.plain(exc))
        return
    st.caption(
        f"{widgets.plain(e.kind)} '{widgets.plain(e.name)}', saved by "
        f"{widgets.plain(e.created_by)} at {_when(e.created_at)}; sha256 {e.content_hash[:16]}…; "
        f"{e.size_bytes:,} bytes."
    )
    c = st.columns(4, vertical_alignment="bottom")
    if e.kind == "profile":
        c[0].button(
            "Calibrate with this", key="library_calibrate", on_click=_calibrate, args=(e.name,)
        )
        c[0].markdown(f"[Link](/profiles?profile={quote(LINK_PREFIX + e.name, safe='')})")
    # Keys per entry: choosing another entry never carries a typed name, notes or a
    # ticked confirmation over to it.
    new_key, notes_key = f"library_new_name:{e.id}", f"library_notes:{e.id}"
    c[1].text_input("New name", key=new_key, max_chars=200)
    c[1].button(
        "Rename", key="library_rename", on_click=_rename, args=(lib, e.kind, e.name, new_key)
    )
    c[2].text_input("Notes", value=e.notes, key=notes_key)
    c[2].button(
        "Save notes",
        key="library_annotate",
        on_click=_annotate,
        args=(lib, e.kind, e.name, notes_key),
    )
    confirm = c[3].checkbox(
        f"Yes, delete '{widgets.plain(e.name[:40])}'", key=f"library_confirm:{e.id}"
    )
    c[3].button(
        "Delete",
        key="library_delete",
        disabled=not confirm,
        on_click=_delete,
        args=(lib, e.kind, e.name),
        type="primary",
    )


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
        c = st.columns([2, 3, 1], vertical_alignment="bottom")
        name = c[0].text_input("Name", key=f"scenario_name:{page}", max_chars=200)
        notes = c[1].text_input("Notes", key=f"scenario_notes:{page}")
        if c[2].button("Save scenario", key=f"scenario_save:{page}", icon=":material/save:"):
            _save_scenario(lib, page, name, notes)
        saved = lib.entries("scenario")
        if not saved:
            st.caption("No saved scenarios yet.")
            return
        by_name = {e.name: e for e in saved}
        pick = st.selectbox("Open a saved scenario", list(by_name), key=f"scenario_open:{page}")
        _scenario_link(lib, by_name[pick])


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
    from library.kinds import load_scenario

    page, params = load_scenario(lib, entry.name)
    st.caption(
        f"{widgets.plain(page)} page, saved by {widgets.plain(entry.created_by)} at "
        f"{_when(entry.created_at)}. {widgets.plain(entry.notes)}"
    )
    st.link_button("Open", scenario_link(page, params), icon=":material/open_in_new:")


# ---------------------------------------------------------------------------- reports
def _open_report(lib, name: str, rows_key: str, clear: tuple[str, ...], columns) -> None:
    from library.kinds import load_report

    try:
        rows, outputs, version = load_report(lib, name)
    except InputError as exc:
        _rerun_message("reports", f"Not opened: {exc}", ok=False)
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
        _show_message("reports")
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
        pick = st.selectbox("Open a saved report", list(by_name), key="report_pick")
        e = by_name[pick]
        st.caption(
            f"Saved by {widgets.plain(e.created_by)} at {_when(e.created_at)}, model "
            f"{e.model_version}. {widgets.plain(e.notes)} "
            f"[Link](/reports?{REPORT_PARAM}={quote(e.name, safe='')})"
        )
        st.button(
            "Open",
            key="report_open",
            on_click=_open_report,
            args=(lib, e.name, rows_key, clear, columns),
        )


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
