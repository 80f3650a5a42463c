"""Fixtures shared by the simulator's and the dashboard's tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def library_in_a_temporary_folder(tmp_path_factory):
    """The dashboard and the CLI keep their library in a file of this test session, never
    in the user's data directory (a test that needs another sets SPECPLAN_DB_URL itself)."""
    before = os.environ.get("SPECPLAN_DB_URL")
    folder = tmp_path_factory.mktemp("library")
    os.environ["SPECPLAN_DB_URL"] = f"sqlite:///{folder / 'library.db'}"
    yield
    if before is None:
        os.environ.pop("SPECPLAN_DB_URL", None)
    else:
        os.environ["SPECPLAN_DB_URL"] = before


@pytest.fixture
def serving_runs(monkeypatch) -> list[int]:
    """The K of every `simulator.serving.engine.run` call made while the test runs, in order
    (K 0: a baseline): the request-level simulations a page or a command asked for."""
    from simulator.serving import engine as serving

    ran: list[int] = []
    real = serving.run

    def counted(model, *args, **kwargs):
        ran.append(model.k)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(serving, "run", counted)
    return ran


def pytest_collection_modifyitems(config, items):
    """Browser tests first. Each of their files takes one to four minutes; under `make
    test`'s processes (a file to a process) they then start at once and the many short
    files fill in around them, instead of the last long file running alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is None)
