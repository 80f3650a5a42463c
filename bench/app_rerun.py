"""The dashboard's script time per page, as a user feels it: open each page once, then
change one input several times and time each rerun (streamlit.testing AppTest, no
browser). Prints a table of the first run and the median rerun per page, in ms.

Script time is the time the script thread spends running the page (timed around
`LocalScriptRunner._run_script_thread`), not AppTest's parsing of the element tree. The
scripts are compiled once, as a served app compiles them (`--recompile`: on every run, as
AppTest does by default, which adds 5-25 ms of parsing and compiling to each rerun).
Every page starts from empty `st.cache_data` and `st.cache_resource` caches, after one
warm-up run that pays the imports. Each rerun sets a value the page has not seen yet where the input allows, so
caches keyed on that input miss as they would for a user.

Target (issue 11): every page's rerun under 150 ms. "Load & SLO (new simulation)" changes
an input both arms' request-level simulations depend on, so it runs new simulations, and
"Load & SLO (new K)" one only the speculative arm reads (the baseline's runs are reused);
they are reported apart and may legitimately take longer.

    .venv/bin/python bench/app_rerun.py [--reruns 6] [--page ROI] [--profile out.prof]
                                        [--recompile]

`--profile` writes cProfile statistics of the timed reruns (script thread only) and prints
the top 25 functions by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402
from streamlit.testing.v1.local_script_runner import LocalScriptRunner  # noqa: E402

from app.samples import EXAMPLE_SCRAPE  # noqa: E402

ENTRY = ROOT / "app" / "streamlit_app.py"
CPU_SCENARIO = {
    "gpu": "cpu",
    "num_gpus": "1",
    "target": "specplan-byte-target",
    "method": "draft_model",
    "draft": "specplan-byte-draft",
    "prompt_len": "128",
    "output_len": "64",
}
TIMEOUT = 120

_times: list[tuple[float, float]] = []
"""(wall, CPU) seconds of each script run since the last `_run`."""
_profiler: cProfile.Profile | None = None
_original = LocalScriptRunner._run_script_thread


def _timed_script_thread(self) -> None:
    t0, c0 = time.perf_counter(), time.thread_time()
    if _profiler is not None:
        _profiler.enable()
    try:
        _original(self)
    finally:
        if _profiler is not None:
            _profiler.disable()
        _times.append((time.perf_counter() - t0, time.thread_time() - c0))


LocalScriptRunner._run_script_thread = _timed_script_thread


def _share_compiled_scripts() -> None:
    """Compile each page once per process, as `streamlit run` does (its Runtime holds one
    ScriptCache). AppTest makes a new ScriptCache per run, so by default it parses,
    rewrites (magic) and compiles the entry script and the page on every rerun: 5-25 ms
    a rerun here that a served app never pays. `--recompile` keeps AppTest's way."""
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner

    shared = ScriptCache()
    app_test.ScriptCache = local_script_runner.ScriptCache = lambda: shared


def _number(key: str, values):
    def change(at, i):
        at.number_input(key=key).set_value(values[i % len(values)])

    return change


def _cycle(key: str):
    """The selectbox's next option (wrapping): the page shows each option in turn."""

    def change(at, i):
        box = at.selectbox(key=key)
        options = list(box.options)
        box.set_value(type(box.value)(options[(options.index(str(box.value)) + 1) % len(options)]))

    return change


def _validation_batches(at, i):
    box = next(m for m in at.multiselect if m.label == "Batch")
    options = [int(o) for o in box.options]
    # Drop a different batch each time (all kept on even steps past the options).
    keep = [b for j, b in enumerate(options) if j != i % (len(options) + 1)]
    box.set_value(keep)


def _load_example(at):
    at.session_state["scrape_text"] = EXAMPLE_SCRAPE


def _calibrated(at):
    """A session calibrating with the bundled byte-level CPU profile, on its device."""
    at.session_state["calibrate_with"] = "bundled: cpu/specplan-byte-pair.json"
    for key, value in CPU_SCENARIO.items():
        at.query_params[key] = value


# name, page file, setup before the first run, input changed, what the change is
PAGES = [
    ("ROI", "roi", None, _number("batch_size", [20, 24, 28, 32, 40, 48, 56, 64]), "batch size"),
    (
        "Sizer",
        "sizer",
        None,
        _number("slo_tpot_ms", [25.0, 30.0, 35.0, 40.0, 45.0, 50.0, 55.0, 60.0]),
        "TPOT SLO",
    ),
    ("Profiles", "profiles", None, _cycle("plot_profile"), "profile plotted"),
    ("Acceptance", "acceptance", _load_example, _number("scrape_k", [1, 2, 3, 4, 5, 6, 7, 8]), "K"),
    (
        "Load & SLO",
        "load",
        None,
        _number("requests_per_day", [1_000_000, 3_000_000, 4_000_000, 5_000_000, 6_000_000]),
        "requests/day (no new simulation)",
    ),
    (
        "Load & SLO",
        "load",
        None,
        _number("slo_tpot", [40.0, 45.0, 55.0, 60.0, 65.0, 70.0, 75.0, 80.0]),
        "TPOT SLO (same runs, new summary)",
    ),
    (
        "Load & SLO (new simulation)",
        "load",
        None,
        _number("load_requests", [350, 400, 450, 500, 550, 600, 650, 700]),
        "requests per point (simulates again)",
    ),
    (
        "Load & SLO (new K)",
        "load",
        None,
        _number("load_k", [4, 5, 6, 7, 8, 2, 9, 10]),
        "K (simulates the speculative arm again)",
    ),
    (
        "ROI (calibrated)",
        "roi",
        _calibrated,
        _number("batch_size", [2, 3, 4, 5, 6, 7, 8, 9]),
        "batch size, CPU profile calibrating",
    ),
    ("Reports", "reports", None, _cycle("report_check_row"), "checklist row"),
    ("Validation", "validation", None, _validation_batches, "batch filter"),
]


def _run(at) -> tuple[float, float]:
    """(wall, CPU) ms of the script thread for one `at.run()`."""
    del _times[:]
    at.run()
    if at.exception:
        raise SystemExit(f"the page raised: {[e.value for e in at.exception]}")
    return 1e3 * sum(w for w, _ in _times), 1e3 * sum(c for _, c in _times)


def measure(page: str, setup, change, reruns: int, profiler=None):
    """((wall, CPU) ms of the first run, [(wall, CPU) ms of each rerun]) for one page,
    from empty caches; `profiler`, when given, records the reruns."""
    global _profiler
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ENTRY), default_timeout=TIMEOUT)
    if setup is not None:
        setup(at)
    at.switch_page(f"views/{page}.py")
    first = _run(at)
    out = []
    _profiler = profiler
    try:
        for i in range(reruns):
            change(at, i)
            out.append(_run(at))
    finally:
        _profiler = None
    return first, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reruns", type=int, default=6)
    parser.add_argument("--page", action="append", help="only these pages (by name)")
    parser.add_argument("--profile", help="write cProfile stats of the reruns here")
    parser.add_argument(
        "--recompile",
        action="store_true",
        help="compile the scripts on every run, as AppTest does (a served app does not)",
    )
    args = parser.parse_args()
    if not args.recompile:
        _share_compiled_scripts()
    profiler = cProfile.Profile() if args.profile else None
    # AppTest runs without a server: the cache's "No runtime found" notice is noise here.
    logging.getLogger("streamlit").setLevel(logging.ERROR)

    # Warm-up: pay the imports (pandas, plotly, the simulator) once, untimed.
    AppTest.from_file(str(ENTRY), default_timeout=TIMEOUT).run()

    rows = []
    for name, page, setup, change, what in PAGES:
        if args.page and name not in args.page:
            continue
        first, reruns = measure(page, setup, change, args.reruns, profiler)
        wall = [w for w, _ in reruns]
        cpu = [c for _, c in reruns]
        rows.append(
            (name, what, first[0], statistics.median(wall), max(wall), statistics.median(cpu))
        )
        print(
            f"{name}: first {first[0]:.0f} ms, reruns "
            + " ".join(f"{w:.0f}" for w in wall)
            + " ms wall; CPU "
            + " ".join(f"{c:.0f}" for c in cpu),
            file=sys.stderr,
        )
    if profiler is not None:
        stats = pstats.Stats(profiler)
        stats.dump_stats(args.profile)
        stats.sort_stats("cumulative").print_stats(25)
    print(
        f"\n{'page':<29} {'input changed':<34} {'first':>6} {'rerun p50':>9} {'max':>6}"
        f" {'CPU p50':>8}"
    )
    for name, what, first, median, worst, cpu in rows:
        print(f"{name:<29} {what:<34} {first:>6.0f} {median:>9.0f} {worst:>6.0f} {cpu:>8.0f}")
    print(
        "\nms of script time (wall; CPU: the script thread's own, steadier on a busy machine);"
        "\ntarget: every rerun p50 under 150 (the rows that simulate again apart)."
    )


if __name__ == "__main__":
    main()
