"""The dashboard freezes what it imported at start-up, so a full garbage collection no
longer walks streamlit's, pandas' and plotly's objects in the middle of a rerun."""

import gc

import app as dashboard


def test_the_first_run_freezes_the_startup_objects_once(app):
    gc.unfreeze()
    dashboard._frozen = False
    at = app()
    assert not at.exception
    frozen = gc.get_freeze_count()
    assert dashboard._frozen and frozen > 10_000
    at.run()
    # Once per process: a rerun freezes nothing more (frozen objects may still be freed).
    assert gc.get_freeze_count() <= frozen
