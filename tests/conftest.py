"""Fixtures shared by the simulator's and the dashboard's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def serving_runs(monkeypatch) -> list[int]:
    """The K of every `simulator.serving.run` call made while the test runs, in order
    (K 0: a baseline): the request-level simulations a page or a command asked for."""
    from simulator import serving

    ran: list[int] = []
    real = serving.run

    def counted(model, *args, **kwargs):
        ran.append(model.k)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(serving, "run", counted)
    return ran
