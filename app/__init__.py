"""SpecPlan's dashboard: Streamlit pages over the simulator (`streamlit_app.py` is the entry)."""
