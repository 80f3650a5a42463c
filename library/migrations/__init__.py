"""Alembic revisions of the library's schema, run by `library.store.open_library`."""
