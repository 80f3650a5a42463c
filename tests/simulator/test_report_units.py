"""Units in the report CSV's headers."""

from __future__ import annotations


def test_every_numeric_report_column_has_a_unit():
    """Issue 27: prefill_ms_*, engine_ms_*, baseline_step_ms, effective_batch_*,
    prefill_tokens_per_step_*, request_rate, draft_context_len and temperature had none."""
    import pandas as pd

    from simulator.model.predict import predict
    from simulator.planning.reports import UNITS, add_economics

    row = dict(target="llama-3.1-8b", method="eagle", gpu="h100-sxm", num_gpus=1, k=3)
    df = add_economics(predict(pd.DataFrame([{**row, "batch_size": 8, "acceptance_rate": 0.7}])), 1)
    numeric = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])]
    assert not [c for c in numeric if c not in UNITS]
