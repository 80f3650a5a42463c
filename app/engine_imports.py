"""The user's own engine benchmarks on the dashboard: the upload section of the Profiles page
and the "Your engine" tab of the Validation page.

Files are parsed by `profiler.imports` as data (JSON or CSV text; nothing is executed),
shown as plain text and tables (nothing from a file is rendered as Markdown or HTML), and
the profile they build joins the session's uploaded profiles, so it can calibrate every
page and the Validation page finds its serving points.
"""

from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from app import figures_validation as fv
from app import sim, widgets
from profiler.imports import FORMATS
from profiler.imports.build import Imported, build, refit, speedups
from profiler.imports.cli import parse_shapes
from profiler.imports.common import MAX_FILE_BYTES
from profiler.imports.files import parse_each
from profiler.imports.fit import EngineFit
from simulator.errors import InputError
from simulator.inputs.profile import Profile, profile_to_json

AS_RECORDED = "(as the files record it)"
METHODS = ("eagle", "eagle3", "mtp", "medusa", "ngram", "draft_model")
UPLOAD_KEY = "engine_upload"
LAST_KEY = "engine_import_last"
PICK_KEY = "your_engine_pick"
TOGGLE_KEY = "engine_upload_on"
"""Session key: (profile name, summary lines) of the last import, shown again on return."""
POINT_COLUMNS = {
    "source": "file",
    "concurrency": "concurrency",
    "request_rate": "request rate (req/s)",
    "speculative": "speculative",
    "acceptance_length": "acceptance length",
    "measured_tpot_ms": "measured TPOT (ms)",
    "predicted_before_ms": "predicted, default costs (ms)",
    "predicted_after_ms": "predicted, host cost fitted (ms)",
    "error_before": "error before",
    "error_after": "error after",
    "fitted_on": "fitted on",
    "reason": "not priced because",
}


@st.cache_data(show_spinner="Reading the benchmark files and fitting...", max_entries=8)
def _import(files: tuple[tuple[str, bytes], ...], options: tuple) -> Imported:
    target, gpu, version, method, k, acceptance, num_gpus, shapes_text = options
    shapes = parse_shapes([line.strip() for line in shapes_text.splitlines() if line.strip()])
    each = parse_each([(name, lambda data=data: data) for name, data in files], "", shapes)
    names = ", ".join(name for name, _ in files)
    return build(
        list(each.parsed),
        target=target,
        gpu=gpu,
        engine_version=version,
        method=method,
        k=k,
        acceptance=acceptance,
        num_gpus=num_gpus,
        command=f"uploaded to the Profiles page: {names}"[:500],
        refused=each.notes(),
    )


CONTROLS = {
    "num-gpus": "'GPUs per replica'",
    "engine-version": "'Engine version'",
    "latency-shape": "the 'vllm bench latency shapes' box",
    "acceptance": "'Acceptance length'",
    "method": "'Speculative method of the server'",
    "target": "'Model'",
    "draft": "--draft (of python -m profiler import: an upload cannot name a draft)",
    "format": "the format (told from the content)",
    "gpu": "'GPU'",
    "k": "'K'",
}
"""The import's CLI flags -> the controls above that set the same thing."""
_FLAG = re.compile(r"'?(?<![\w-])--(" + "|".join(CONTROLS) + r")\b(?!-)'?")


def in_controls(text: str) -> str:
    """A message of the import with each CLI flag named as the control that sets it here."""
    return _FLAG.sub(lambda m: CONTROLS[m.group(1)], text)


def _options(container) -> tuple:
    c = container.columns(3)
    target = c[0].selectbox(
        "Model", [AS_RECORDED, *sorted(sim.models())], key="engine_target", persist_state="session"
    )
    gpu = c[1].selectbox(
        "GPU", [AS_RECORDED, *sorted(sim.catalog_gpus())], key="engine_gpu", persist_state="session"
    )
    method = c[2].selectbox(
        "Speculative method of the server",
        [AS_RECORDED, *METHODS],
        key="engine_method",
        persist_state="session",
    )
    d = container.columns([1, 1, 1, 2])
    k = d[0].number_input("K (0: as recorded)", 0, 16, 0, key="engine_k", persist_state="session")
    acceptance = d[1].number_input(
        "Acceptance length (0: as recorded)",
        0.0,
        17.0,
        0.0,
        0.1,
        key="engine_acceptance",
        persist_state="session",
        help="Mean tokens per verify step (1 to K + 1) of a speculating server whose files "
        "do not record it; without it such points stay unpriced.",
    )
    version = d[2].text_input(
        "Engine version", "", max_chars=40, key="engine_version", persist_state="session"
    )
    num_gpus = d[2].number_input(
        "GPUs per replica (0: as recorded)",
        0,
        1024,
        0,
        key="engine_num_gpus",
        persist_state="session",
        help="The tensor-parallel size the engine ran with, where the files do not record it.",
    )
    shapes = d[3].text_area(
        "vllm bench latency shapes, one per file: NAME=BATCH,INPUT,OUTPUT",
        "",
        max_chars=2000,
        height=80,
        key="engine_shapes",
        persist_state="session",
        help="Its JSON does not record --batch-size, --input-len or --output-len.",
    )
    given = float(acceptance) or None
    return (
        _given(target),
        _given(gpu),
        version.strip(),
        _given(method),
        int(k) or None,
        given,
        int(num_gpus) or None,
        shapes,
    )


def _given(choice: str) -> str:
    return "" if choice == AS_RECORDED else choice


def _profile_name(imported: Imported) -> str:
    e = imported.profile.engine or {}
    first = str(e.get("files", ["files"])[0]).rsplit(".", 1)[0]
    return f"{e.get('name', 'engine')}-import-{first}.json"


def upload_section() -> None:
    """Upload an engine's benchmark results; the profile they make joins the uploads."""
    # A toggle, not an expander: a collapsed expander still puts its uploader in the page,
    # a second file input beside the profile uploader.
    if not st.toggle(
        "Upload your engine's own benchmark results (SGLang, vLLM, TensorRT-LLM, speculators)",
        key=TOGGLE_KEY,
        persist_state="session",
    ):
        return
    with st.container(border=True):
        st.text("Formats read (told from the content):\n" + "\n".join(FORMATS.values()))
        uploads = st.file_uploader(
            "Benchmark result files of one engine",
            type=["json", "jsonl", "csv"],
            accept_multiple_files=True,
            max_upload_size=max(1, MAX_FILE_BYTES // (1024 * 1024)),
            key=UPLOAD_KEY,
        )
        options = _options(st)
        if uploads:
            files = tuple((up.name, up.getvalue()) for up in uploads)
            try:
                imported = _import(files, options)
            except InputError as exc:
                st.session_state.pop(LAST_KEY, None)
                widgets.show_error(InputError(in_controls(str(exc))), "Rejected")
                return
            name = _profile_name(imported)
            data = profile_to_json(imported.profile).encode()
            store = sim.uploaded_profiles()
            if store.get(name) != data:
                # A new import: the Validation page shows it next.
                st.session_state[PICK_KEY] = sim.UPLOADED + name
            store[name] = data
            st.session_state[LAST_KEY] = name
            _show(imported, name)
        elif st.session_state.get(LAST_KEY) in sim.uploaded_profiles():
            st.caption("The last import stays among the uploaded profiles (the table below).")


def _show(imported: Imported, name: str) -> None:
    p = imported.profile
    e = p.engine or {}
    st.success(
        f"{widgets.plain(e.get('name'))} {widgets.plain(e.get('version'))}: "
        f"{len(p.measurements)} forwards and {len(p.serving_points)} serving points of "
        f"{widgets.plain(p.models[0].id)} on {widgets.plain(p.device.name)}, added to the "
        f"profiles as {widgets.plain(name)}.",
        icon=":material/check:",
    )
    for line in imported.warnings:
        st.warning(widgets.plain(in_controls(line)), icon=":material/warning:")
    notes = [n for n in imported.notes if n not in imported.warnings]
    st.text(in_controls("\n".join([*imported.fit.lines(), *notes])))
    if len(imported.fit.table):
        st.dataframe(_points(imported.fit), hide_index=True, key="engine_points")
    if len(imported.speedups):
        st.markdown("**Measured speedups** (speculative against plain at the same load)")
        st.dataframe(imported.speedups.round(3), hide_index=True, key="engine_speedups")
    if len(p.measurements):
        steps = p.measurements[["batch", "query_len", "context_len", "median_ms", "repeats"]]
        st.markdown("**Forwards the engine timed** (query_len 1: a decode step)")
        st.dataframe(steps, hide_index=True, key="engine_steps")


def _points(fit: EngineFit) -> pd.DataFrame:
    """The points by concurrency (then request rate), plain before speculative."""
    table = fit.table[list(POINT_COLUMNS)].assign(reason=fit.table["reason"].map(in_controls))
    table = table.sort_values(["concurrency", "request_rate", "speculative"], kind="stable")
    return table.rename(columns=POINT_COLUMNS).round(3).reset_index(drop=True)


@st.cache_data(show_spinner=False, max_entries=8)
def _refit(key: str, _profile: Profile) -> EngineFit | None:
    return refit(_profile)


def _engine_profiles() -> dict[str, tuple[str, Profile]]:
    """Profiles (bundled and uploaded) that hold serving points: label -> (key, profile)."""
    out = {}
    for label, (name, data) in sim.profile_options().items():
        try:
            p = sim.parse_profile(data, name)
        except InputError:
            continue
        if len(p.serving_points):
            out[label] = (f"{label}:{sim.digest(data)}", p)
    return out


def validation_section() -> None:
    """The "your engine" rows: the engine's measured TPOT against the prediction with the
    default engine costs and with its per-step host cost fitted."""
    st.caption(
        "Your engine's own serving benchmarks (`vllm bench serve`, `trtllm-bench`, "
        "speculators' throughput_interactivity CSV), uploaded on the Profiles page or "
        "imported with `python -m profiler import`. The fit moves one term, the engine's "
        "host cost per step, to match the plain points; speculative points are then "
        "predicted with it. Choosing the profile on the Profiles page applies the fitted "
        "cost to every scenario on its GPU. Error = predicted / measured - 1."
    )
    found = _engine_profiles()
    if not found:
        st.info(
            "No engine benchmarks yet: upload your engine's results on the Profiles page, "
            "or import them with `python -m profiler import FILE... --out profile.json`."
        )
        return
    labels = list(found)
    if st.session_state.get(PICK_KEY) not in labels:
        st.session_state[PICK_KEY] = labels[-1]
    label = st.selectbox("Engine profile", labels, key=PICK_KEY, persist_state="session")
    key, profile = found[label]
    try:
        fit = _refit(key, profile)
    except InputError as exc:
        widgets.show_error(exc, "Cannot price these points")
        return
    if fit is None:
        st.warning("This profile records no scenario to price its serving points with.")
        return
    e = profile.engine or {}
    st.text(
        f"{e.get('name', '')} {e.get('version', '')} ({e.get('format', '')}): "
        f"{profile.models[0].id} on {profile.device.name}\n" + "\n".join(fit.lines())
    )
    if fit.fitted_ms is not None:
        m = st.columns(4)
        held = fit.speculative_error
        m[0].metric(
            "speculative points, out of sample",
            "none" if held is None else f"{held:.1%}",
            help="Median |TPOT error| on the speculative points, which the host cost was not "
            "fitted on: what a speculative plan from this profile can expect.",
        )
        change = f"{fit.fitted_ms - fit.default_ms:+.2f} ms from the default"
        m[1].metric(fit.term, f"{fit.fitted_ms:.2f} ms", change, delta_color="off")
        m[2].metric("plain points before fit", f"{fit.median_abs_error_before:.1%}")
        m[3].metric("after fit", f"{fit.median_abs_error_after:.1%}")
        if fit.worse:
            st.caption(in_controls(fit.lines()[0]))
    st.dataframe(_points(fit), hide_index=True, key="your_engine")
    pairs = speedups(profile.serving_points, fit.table)
    if len(pairs):
        st.markdown(
            "**Speedups**: speculative against plain at the same load, measured and "
            "predicted (TPOT) with the default engine costs and with the host cost fitted"
        )
        st.dataframe(pairs.round(3), hide_index=True, key="your_engine_speedups")
    if fit.table["predicted_before_ms"].notna().any():
        st.plotly_chart(fv.engine_tpot(fit.table), key="your_engine_scatter")
