"""Where the library lives: `SPECPLAN_DB_URL` when set, else an embedded SQLite file under
the user's data directory ($XDG_DATA_HOME/specplan/library.db, by default
~/.local/share/specplan/library.db)."""

from __future__ import annotations

import os
from pathlib import Path

ENV_URL = "SPECPLAN_DB_URL"
OFF = "off"
"""`SPECPLAN_DB_URL=off`: no library; the dashboard keeps uploads for the session only."""
FILE_NAME = "library.db"


def data_dir() -> Path:
    """The user's data directory for SpecPlan (XDG base directory rules)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "specplan"


def default_url() -> str:
    """The SQLAlchemy URL of the embedded default, an SQLite file under `data_dir()`."""
    return f"sqlite:///{data_dir() / FILE_NAME}"


def configured_url() -> str | None:
    """The URL to open: `SPECPLAN_DB_URL`, the default file, or None when set to `off`."""
    url = os.environ.get(ENV_URL, "").strip()
    if url.lower() == OFF:
        return None
    return url or default_url()


def shown_url(url: str) -> str:
    """A URL safe to print: the password replaced by ***."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(an unreadable URL)"
