"""Profiles: upload measured profiles (JSON or CSV from `python -m profiler run`), see
each one's latency against the roofline, and choose the one that calibrates every page."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app import engine_imports, figures, library_ui, sim, widgets
from simulator.errors import InputError
from simulator.inputs.profile import MAX_PROFILE_BYTES
from simulator.model.calibration import summary
from simulator.validation.step_gap import copy_fraction_lines, flattery_warnings, verify_warnings

MAX_UPLOAD_MB = MAX_PROFILE_BYTES // (1024 * 1024)

st.title("Profiles")
st.caption(
    "A profile holds step latencies measured on one machine by `python -m profiler run`. "
    "Uploads are read as data only (JSON or CSV text, at most "
    f"{MAX_UPLOAD_MB} MB each) and checked field by field."
)

uploads = st.file_uploader(
    "Upload profile files",
    type=["json", "csv"],
    accept_multiple_files=True,
    max_upload_size=MAX_UPLOAD_MB,
    key="profile_upload",
    help="Several at once; a bad file is reported and the others still load.",
)
store = sim.uploaded_profiles()
for up in uploads or []:
    data = up.getvalue()
    if len(data) > MAX_PROFILE_BYTES:
        widgets.show_error(
            InputError(
                f"{len(data):,} bytes is over the {MAX_PROFILE_BYTES:,}-byte limit",
                file=up.name,
            ),
            "Rejected",
        )
        continue
    try:
        profile = sim.parse_profile(data, up.name)
    except InputError as exc:
        store.pop(up.name, None)
        widgets.show_error(exc, "Rejected")
        continue
    if store.get(up.name) != data:
        # A new file: show it in the plot below.
        st.session_state["plot_profile"] = f"uploaded: {up.name}"
    store[up.name] = data
    st.success(
        f"{widgets.plain(up.name)}: {widgets.plain(profile.device.name)} "
        f"({widgets.plain(profile.device.kind)}), {len(profile.measurements)} measurements of "
        f"{widgets.plain(', '.join(m.id for m in profile.models))}.",
        icon=":material/check:",
    )

engine_imports.upload_section()
library_ui.profiles_section(store)

options = sim.profile_options()
if not options:
    st.info(
        "No profiles yet: nothing is bundled under data/profiles/ and nothing is uploaded. "
        "Profile this machine with `python -m profiler run` and upload the file."
    )

# ---------------------------------------------------------------------------- table
rows, parsed = [], {}
for label, (name, data) in options.items():
    try:
        p = sim.parse_profile(data, name)
    except InputError as exc:
        st.warning(f"{widgets.plain(label)} cannot be read: {widgets.plain(exc)}")
        continue
    parsed[label] = (p, f"{label}:{sim.digest(data)}")
    ok = p.measurements[p.measurements["status"] == "ok"]
    rows.append(
        {
            "profile": label,
            "device": p.device.name,
            # Kind, dtype and graphs in one cell, the grid in another: eleven columns were
            # cut off at 1024 px (issue 27, Layout).
            "setup": f"{p.device.kind} {p.settings.dtype}"
            + (", CUDA graphs" if p.settings.cuda_graphs else ""),
            "models": ", ".join(m.id for m in p.models),
            "measured": f"{len(ok)} points"
            + (
                f", batch {ok['batch'].min()}-{ok['batch'].max()}, q "
                + ", ".join(str(v) for v in sorted(ok["query_len"].unique()))
                if len(ok)
                else ""
            ),
            "draft in loop": len(p.draft_in_loop),
            "created": str(p.created)[:10],
        }
    )
if rows:
    # A static table wraps long names and fits the page at 1024 px; a grid cut them off. Its
    # cells are Markdown: the names from a file are escaped to show as the characters they are.
    table = pd.DataFrame(rows)
    for column in ("profile", "device", "setup", "models", "measured", "created"):
        table[column] = table[column].map(widgets.plain)
    st.table(table.style.hide(axis="index"))


# ------------------------------------------------------- how close to the hardware each got
@st.cache_data(max_entries=32, show_spinner=False)
def _hardware_notes(key: str, _p) -> tuple[list[str], list[str]]:
    """(copy-fraction lines, warnings) of the parsed profile `_p`, once per profile
    (`key`: its label and content digest): the gaps to the kernel tables took a third of
    every rerun of the page."""
    return copy_fraction_lines(_p), flattery_warnings(_p) + verify_warnings(_p)


for label, (p, key) in parsed.items():
    speeds, warnings = _hardware_notes(key, p)
    for line in speeds:
        st.caption(f":material/speed: {widgets.plain(label)}: {widgets.plain(line)}")
    for line in warnings:
        st.warning(f"{widgets.plain(label)}: {widgets.plain(line)}", icon=":material/warning:")


def _forget_uploads() -> None:
    sim.uploaded_profiles().clear()
    st.session_state[sim.CALIBRATE_KEY] = sim.NO_PROFILE


c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
choices = [sim.NO_PROFILE, *parsed]
if st.session_state.get(sim.CALIBRATE_KEY, sim.NO_PROFILE) not in choices:
    st.session_state[sim.CALIBRATE_KEY] = sim.NO_PROFILE
c1.selectbox(
    "Calibrate every page with",
    choices,
    key=sim.CALIBRATE_KEY,
    persist_state="session",
    help="Scenarios on the profile's device then use its measured step times, and a "
    "roofline fitted to it wherever it measured nothing; on a GPU an engine's kernel tables "
    "cover, the tables' steps scaled to what the profile measured.",
)
if store:
    c2.button("Forget uploaded profiles", key="forget_uploads", on_click=_forget_uploads)
state = sim.current_calibration()
if state.calibration is not None:
    for line in summary(state.calibration):
        st.caption(f":material/tune: Fit: {widgets.plain(line)}")
    st.caption(
        ":material/tune: Calibrated: the forwards the profile timed (target decode and verify "
        "steps, a draft model's steps). Not calibrated: an EAGLE, Medusa or MTP head and the "
        "engine's host and sampler costs keep their uncalibrated prices. Each prediction's "
        "latency source says which (`head:uncalibrated`). Where an engine's kernel tables "
        "price the row, the profile scales the tables' steps by its measured/tables ratio "
        "and a verify step it did not time keeps the engine's verify/decode ratio "
        "(`target:profile verify:scaled head:kernels host:kernels "
        "base:kernels:vllm-0.24.0/h200`)."
    )

# ---------------------------------------------------------------------------- plot
if parsed:
    st.subheader("Latency against batch, measured and predicted")
    labels = list(parsed)
    uploaded = [lb for lb in labels if lb.startswith("uploaded: ")]
    if st.session_state.get("plot_profile") not in labels:
        # The box's value lives in the session state alone (an upload sets it above), so it
        # takes no default: Streamlit warns when a widget has both.
        st.session_state["plot_profile"] = (
            state.label if state.label in labels else (uploaded or labels)[0]
        )
    # Two rows: a profile's label and the query lengths were cut in four columns at 1024 px.
    c = st.columns([2, 1]) + st.columns([1, 2])
    label = c[0].selectbox("Profile", labels, key="plot_profile")
    profile, key = parsed[label]
    model_ids = [m.id for m in profile.models]
    model_id = c[1].selectbox("Model", model_ids, key=f"plot_model:{label}")
    ok = profile.measurements_for(model_id)
    if not len(ok):
        st.warning(
            f"{widgets.plain(label)} has no successful measurement of {widgets.plain(model_id)}."
        )
    else:
        contexts = sorted(int(v) for v in ok["context_len"].unique())
        context = c[2].selectbox("Context length", contexts, key=f"plot_context:{label}:{model_id}")
        at_context = ok[ok["context_len"] == context]
        q_all = sorted(int(v) for v in at_context["query_len"].unique())
        spread = sorted({q_all[round(i * (len(q_all) - 1) / 3)] for i in range(4)})
        q_shown = c[3].multiselect(
            "Query lengths", q_all, default=spread, key=f"plot_query_lens:{label}:{model_id}"
        )
        measured = at_context[at_context["query_len"].isin(q_shown or q_all)]
        lo, hi = int(measured["batch"].min()), int(measured["batch"].max())
        grid = np.unique(np.round(np.geomspace(lo, max(hi, lo + 1), 24)))
        predicted = sim.profile_prediction(
            key, profile, model_id, context, grid, sorted(measured["query_len"].unique())
        )
        st.plotly_chart(figures.profile_latency(measured, predicted), key="profile_latency")
        if predicted.empty:
            st.caption(
                f"{widgets.plain(model_id)} is not in the model catalog: no roofline to compare "
                "with."
            )
        else:
            st.caption(
                "Lines: the roofline fitted to this profile (solid) and, for a catalog GPU, "
                "the datasheet roofline the pages use without a profile (dotted)."
            )

    # ------------------------------------------------------------------ draft in the loop
    loop = profile.draft_in_loop
    if len(loop):
        st.subheader("The draft inside the speculative loop")
        # (draft, target) pairs, shown as 'draft after target': ids are user text and may
        # hold ' after ' themselves, so the choice is never split back out of its label.
        pairs = sorted({(str(r.draft), str(r.target)) for r in loop.itertuples()})
        d = st.columns([1.6, 0.8, 2])
        draft_id, target_id = d[0].selectbox(
            "Draft and target",
            pairs,
            format_func=lambda p: f"{p[0]} after {p[1]}",
            key=f"loop_pair:{label}",
        )
        pair = f"{draft_id} after {target_id}"
        rows = loop[(loop["draft"] == draft_id) & (loop["target"] == target_id)]
        loop_contexts = sorted(int(v) for v in rows["context_len"].unique())
        loop_context = d[1].selectbox(
            "Context length", loop_contexts, key=f"loop_context:{label}:{pair}"
        )
        rows = rows[rows["context_len"] == loop_context]
        alone = profile.measurements_for(draft_id)
        alone = alone[(alone["query_len"] == 1) & (alone["context_len"] == loop_context)]
        st.plotly_chart(figures.draft_in_loop(rows, alone), key="draft_in_loop")
        totals = rows.groupby("batch").agg(in_loop=("median_ms", "sum"), k=("position", "max"))
        iso = alone.set_index("batch")["median_ms"]
        ratio = (totals["in_loop"] / (totals["k"] * iso.reindex(totals.index))).dropna()
        st.caption(
            "Each round the draft starts right after the target's verify forward, on caches "
            "the target's weights have just flushed; position 1 also reads two tokens. The "
            "simulator prices a draft model's K steps as the sum of these times where they "
            "cover a scenario (`draft:in-loop` in the latency source)."
            + (
                f" Here a round of {int(totals['k'].max())} draft steps costs "
                f"{ratio.min():.2f}-{ratio.max():.2f}x the isolated steps across batches."
                if len(ratio)
                else ""
            )
        )
