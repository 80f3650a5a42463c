"""Alembic environment: runs on the connection `library.store` passes in
(`config.attributes["connection"]`), inside its transaction. No alembic.ini is needed."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
