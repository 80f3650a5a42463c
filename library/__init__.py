"""The team's library: profiles, engine benchmark results, acceptance scrapes, named
scenarios, report tables and validation runs, kept in a database that outlives a browser
session and a server restart.

- `location.py`: which database (embedded SQLite under the user's data directory by
  default, `SPECPLAN_DB_URL` for a server such as `postgresql+psycopg://...`).
- `schema.py`: the SQLAlchemy tables; `migrations/`: the Alembic revisions that build them,
  run (`upgrade head`) every time a library is opened.
- `store.py`: `open_library()` and the `Library` whose methods save, list, rename,
  annotate and delete entries, each write in one transaction, SQL through bound parameters.
- `kinds.py`: saving and reading back each kind (profile, engine result, scrape, scenario,
  report, validation run) and the model version a report is computed by.
- `entries.py`: what one entry is (frozen dataclasses), name and size checks, content hash.
- `export.py`: an entry as JSON or CSV, and back; `cli.py`: `python -m simulator library`.
- `jsontext.py`: JSON read with its nesting bounded before the parser sees it.
- `errors.py`: `LibraryError` and its kinds; each is an `InputError`, so a command exits 2.

Imports SQLAlchemy, Alembic and `simulator` (profile parsing, errors); never Streamlit.
"""

from library.errors import LibraryError, LibraryUnavailable, NameTaken

__all__ = ["Library", "LibraryError", "LibraryUnavailable", "NameTaken", "open_library"]


def __getattr__(name: str):
    # SQLAlchemy and Alembic load when the store is first used, not when a CLI's --help
    # imports the package.
    if name in ("Library", "open_library"):
        from library import store

        return getattr(store, name)
    raise AttributeError(name)
