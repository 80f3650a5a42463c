"""The team's library, opened once per server process (`SPECPLAN_DB_URL`, else the SQLite
file under the user's data directory). When it cannot be opened the pages keep working on
the session alone; a failed open is retried after RETRY_S. Imports nothing of the app, so
every page module may use it (`app.sim` for the calibration's kept profiles, the library
page in `app.library_ui`).
"""

from __future__ import annotations

import time

import streamlit as st

from library.errors import LibraryError

RETRY_S = 30.0
"""After a failed open, how long pages use the session alone before trying again."""
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
