"""SpecPlan dashboard entry point: page config, navigation and the calibration note.

Run from the repository root: `python -m streamlit run app/streamlit_app.py` (`make run`).
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    # `streamlit run app/streamlit_app.py` puts only app/ on the path; pages import
    # `app.*` and `simulator.*` from the repository root.
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import freeze_startup_objects, widgets  # noqa: E402

VIEWS = Path(__file__).resolve().parent / "views"

# The favicon as a data URL: an emoji or material icon is fetched from a CDN (the dashboard
# asks nothing of any host but its own), and a file path is decoded and re-encoded by
# Streamlit on every rerun (1-2 ms); a data URL passes through as it is.
ICON = (
    "data:image/png;base64," + base64.b64encode((ROOT / "app" / "icon.png").read_bytes()).decode()
)

st.set_page_config(
    page_title="SpecPlan",
    page_icon=ICON,
    layout="wide",
    initial_sidebar_state="expanded",
)
pages = [
    st.Page(VIEWS / "roi.py", title="ROI calculator", icon=":material/calculate:", default=True),
    st.Page(VIEWS / "sizer.py", title="Concurrency sizer", icon=":material/memory:"),
    st.Page(VIEWS / "profiles.py", title="Profiles", icon=":material/speed:"),
    st.Page(
        VIEWS / "acceptance.py", title="Acceptance from production", icon=":material/monitoring:"
    ),
    st.Page(VIEWS / "load.py", title="Load & SLO", icon=":material/query_stats:"),
    st.Page(VIEWS / "reports.py", title="Reports", icon=":material/table_view:"),
    st.Page(VIEWS / "validation.py", title="Validation", icon=":material/fact_check:"),
    st.Page(VIEWS / "search.py", title="Deployment search", icon=":material/travel_explore:"),
]
# The pages that plan with the sidebar's scenario: the entry point draws it for them.
PLANNING = {"ROI calculator", "Concurrency sizer", "Load & SLO", "Reports"}
page = st.navigation(pages)
widgets.layout_style()
widgets.calibration_note()
widgets.draw_scenario_sidebar(page.title in PLANNING)
try:
    page.run()
finally:
    # After the first page has imported what pages import (plotly among them); a page
    # may end in st.stop(), hence finally.
    freeze_startup_objects()
