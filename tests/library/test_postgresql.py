"""The PostgreSQL half of the library's tests: the one place that says it was skipped."""

from __future__ import annotations

from sqlalchemy import create_engine, text


def test_the_throwaway_postgresql_cluster_answers(pg_cluster):
    engine = create_engine(pg_cluster)
    try:
        with engine.connect() as c:
            assert c.execute(text("SELECT current_user")).scalar() == "specplan"
            assert c.execute(text("SHOW server_version")).scalar().split(".")[0].isdigit()
    finally:
        engine.dispose()
