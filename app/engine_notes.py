"""The engine assumptions behind a page's numbers: each host cost the chosen engine pays
on top of its measured kernels, with its value, basis, source and derivation
(`simulator.kernels.engines.assumptions`), and how the verify's attention is read."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from app.text import plain
from simulator.kernels.engines import ENGINE_HOST, assumptions
from simulator.planning.reports import ENGINE_NAMES

VERIFY_NOTE = (
    "Verify attention: K + 1 queries per sequence over one read of its KV, read from the "
    "engine's decode-attention table at (K + 1) x the model's query heads. Where the "
    "table's larger head groups time another kernel (TensorRT-LLM's above 32 query heads "
    "per KV head, its non-speculative fallback), each extra query costs at most its share: "
    "the engine's speculative kernel tiles any group (docs/model.md)."
)


def assumptions_table(engine: str, methods: Sequence[str], version: str = "") -> pd.DataFrame:
    """One row per host-cost term a row of `engine` with any of `methods` pays: what it is
    charged for, ms, basis, the version it is measured on, source and derivation."""
    seen = {a.term: a for m in methods for a in assumptions(engine, version, m)}
    rows = [
        {
            "charged": a.meaning,
            "ms": a.value_ms,
            "basis": a.basis,
            "version": a.version or "every version",
            "source": a.source or "none",
            "how it was set": a.derivation,
        }
        for a in seen.values()
    ]
    return pd.DataFrame(rows)


def engine_assumptions(
    engine: str, methods: str | Sequence[str], latency_source: str, *, key: str
) -> None:
    """An expander listing the host costs `engine` charges rows of `methods`, or saying
    why none apply (engine 'other', or a row the kernel tables do not cover)."""
    methods = [methods] if isinstance(methods, str) else list(methods)
    name = ENGINE_NAMES.get(engine, engine)
    with st.expander(f"Engine assumptions: {plain(name)}'s host costs and their basis"):
        if engine not in ENGINE_HOST:
            st.caption(
                "Engine 'other' has no kernel tables or host costs of its own: every step is "
                "priced on the roofline with its fitted constants (docs/model.md)."
            )
            return
        if not str(latency_source).startswith("kernels"):
            st.caption(
                f"This row is priced on the roofline ({plain(latency_source)}), not the "
                f"kernel tables: the host costs below are what {plain(name)} pays where the "
                "tables cover the GPU; the roofline's fitted constants apply here."
            )
        st.dataframe(
            assumptions_table(engine, methods),
            key=key,
            hide_index=True,
            width="stretch",
            column_config={
                "ms": st.column_config.NumberColumn(format="%.3f", width="small"),
                "how it was set": st.column_config.TextColumn(width="large"),
            },
        )
        st.caption(
            "Basis: public (a figure an engine or its users published), fitted (set by a "
            "fit, named in the derivation), assumed (another engine's figure), none (no "
            "figure: zero). " + (VERIFY_NOTE if set(methods) - {"none"} else "")
        )
