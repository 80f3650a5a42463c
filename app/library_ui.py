"""The team's library on the dashboard: opening it once per server, what every page says
when there is no database, and the Profiles page's list (search, rename, annotate,
delete, calibrate), and the rename and delete of a saved scenario or report. Saving and
opening those: `app/library_saves.py`.

The library is opened once per server process (`SPECPLAN_DB_URL`, else the SQLite file
under the user's data directory). When it cannot be opened the pages keep working on the
session alone and say why nothing is kept; a failed open is retried after RETRY_S.
Everything a user typed is shown through `widgets.plain`.
"""

from __future__ import annotations

import functools
from urllib.parse import quote

import pandas as pd
import streamlit as st

from app import own_models, sim, widgets
from app.library_open import library, who
from library.errors import LibraryError
from simulator.errors import InputError


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


def session_only_note(lib, why: str, what: str = "Uploads") -> None:
    if lib is None:
        st.info(
            f":material/cloud_off: No library: {widgets.plain(why)}. {what} last for this "
            "browser session only; nothing is kept.",
        )


def rerun_message(kind: str, text: str, ok: bool = True) -> None:
    st.session_state[f"library_msg:{kind}"] = (ok, text)


def show_message(kind: str) -> None:
    msg = st.session_state.pop(f"library_msg:{kind}", None)
    if msg:
        ok, text = msg
        (st.success if ok else st.error)(widgets.plain(text))


def when(t) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC")


# ---------------------------------------------------------------------------- profiles
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
    st.session_state[sim.CALIBRATE_KEY] = sim.LIBRARY + name


def _rename(lib, kind: str, name: str, key: str) -> None:
    new = st.session_state.get(key, "")
    try:
        lib.rename(kind, name, new)
        rerun_message("profiles", f"Renamed '{name}' to '{new.strip()}'.")
        st.session_state["library_entry"] = f"{kind}: {new.strip()}"
        if st.session_state.get(sim.CALIBRATE_KEY) == sim.LIBRARY + name:
            st.session_state[sim.CALIBRATE_KEY] = sim.LIBRARY + new.strip()
    except InputError as exc:
        rerun_message("profiles", f"Not renamed: {exc}", ok=False)


def _annotate(lib, kind: str, name: str, key: str) -> None:
    try:
        lib.annotate(kind, name, st.session_state.get(key, ""))
        rerun_message("profiles", f"Notes of '{name}' saved.")
    except InputError as exc:
        rerun_message("profiles", f"Notes not saved: {exc}", ok=False)


def _delete(lib, kind: str, name: str) -> None:
    try:
        lib.delete(kind, name)
        rerun_message("profiles", f"Deleted '{name}'.")
        st.session_state.pop("library_entry", None)
        if st.session_state.get(sim.CALIBRATE_KEY) == sim.LIBRARY + name:
            st.session_state[sim.CALIBRATE_KEY] = sim.NO_PROFILE
    except InputError as exc:
        rerun_message("profiles", f"Not deleted: {exc}", ok=False)


def _rename_picked(lib, kind: str, name: str, key: str, where: str, pick_key: str) -> None:
    new = st.session_state.get(key, "")
    try:
        lib.rename(kind, name, new)
    except InputError as exc:
        rerun_message(where, f"Not renamed: {exc}", ok=False)
        return
    rerun_message(where, f"Renamed '{name}' to '{new.strip()}'.")
    st.session_state[pick_key] = new.strip()


def _delete_picked(lib, kind: str, name: str, where: str, pick_key: str) -> None:
    try:
        lib.delete(kind, name)
    except InputError as exc:
        rerun_message(where, f"Not deleted: {exc}", ok=False)
        return
    rerun_message(where, f"Deleted '{name}'.")
    st.session_state.pop(pick_key, None)


def rename_delete_row(lib, e, *, where: str, pick_key: str) -> None:
    """A saved scenario's or report's rename and delete (behind a confirmation), as the
    Profiles page's list has them; `pick_key` is the selectbox that picked `e`, moved to
    the new name or cleared, and `where` the `show_message` slot the outcome goes to."""
    c = st.columns([3, 1, 2, 1], vertical_alignment="bottom")
    new_key = f"{where}_new_name:{e.id}"
    c[0].text_input("New name", key=new_key, max_chars=200)
    c[1].button(
        "Rename",
        key=f"{where}_rename",
        on_click=_rename_picked,
        args=(lib, e.kind, e.name, new_key, where, pick_key),
    )
    confirm = c[2].checkbox(
        f"Yes, delete '{widgets.plain(e.name[:40])}'", key=f"{where}_confirm:{e.id}"
    )
    c[3].button(
        "Delete",
        key=f"{where}_delete",
        disabled=not confirm,
        on_click=_delete_picked,
        args=(lib, e.kind, e.name, where, pick_key),
        type="primary",
    )


def listing_frame(table: pd.DataFrame) -> pd.DataFrame:
    """The Profiles page's table of kept profiles, engine results and models
    (`Library.table`)."""
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


LISTED = ("profile", "benchmark", "model")
"""The kinds the Profiles page lists: measurements, and the own models (config.json)."""


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
    show_message("profiles")
    search = st.text_input(
        "Search by device, model, engine, name or notes", key="library_search", max_chars=200
    )
    table = listing(lib, LISTED, search)
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
        f"{widgets.plain(e.created_by)} at {when(e.created_at)}; sha256 {e.content_hash[:16]}…; "
        f"{e.size_bytes:,} bytes."
    )
    c = st.columns(4, vertical_alignment="bottom")
    if e.kind == "profile":
        c[0].button(
            "Calibrate with this", key="library_calibrate", on_click=_calibrate, args=(e.name,)
        )
        c[0].markdown(f"[Link](/profiles?profile={quote(sim.LINK_PREFIX + e.name, safe='')})")
    if e.kind == "model":
        # A kept model is a target choice on every planning page: its link opens one.
        target = quote(own_models.model_id(e.name), safe="")
        c[0].markdown(f"[Plan with it](/?target={target})")
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
