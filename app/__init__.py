"""SpecPlan's dashboard: Streamlit pages over the simulator (`streamlit_app.py` is the entry).

`views/` holds one module per page; `widgets` the sidebar shared by the planning pages;
`sim` the cached calls into the simulator; `figures*` plain functions from DataFrames to
plotly figures. May import `simulator`; nothing imports `app`."""

import gc

_frozen = False


def freeze_startup_objects() -> None:
    """Move every object alive now (what streamlit, pandas, plotly and the simulator
    import: about 116,000 tracked objects) out of the garbage collector's reach, once per
    server process. Otherwise each full collection walks them all again, a pause of about
    90 ms (measured: 92 ms, and 0.0 ms after `gc.freeze`) in whichever rerun triggers it."""
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True
