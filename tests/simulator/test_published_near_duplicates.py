"""`validate --published` on a table holding a scenario column and a near-duplicate of it
(issue 36 E): refused naming both, as the near-duplicate alone already was."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from simulator.errors import InputError
from simulator.validation.published import load_published

PUBLISHED = Path(__file__).resolve().parents[2] / "data/validation/published.csv"


@pytest.mark.parametrize(
    ("twin", "real"),
    [
        ("batchsize", "batch_size"),
        ("K", "k"),
        ("Prompt_Len", "prompt_len"),
        ("alpha", "acceptance_rate"),
    ],
)
def test_a_near_duplicate_of_a_present_column_is_refused(tmp_path, twin, real):
    table = pd.read_csv(PUBLISHED, dtype=str, keep_default_na=False)
    assert real in table.columns
    table[twin] = table[real].where(table[real] == "", "7")
    bad = tmp_path / "bad.csv"
    table.to_csv(bad, index=False)
    with pytest.raises(InputError) as err:
        load_published(bad)
    assert err.value.field == twin
    assert f"'{real}'" in err.value.bare_message


def test_the_bundled_set_still_loads():
    assert len(load_published(PUBLISHED)) > 0
