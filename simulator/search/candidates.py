"""The candidate deployments a specification names: every combination of model, GPU,
GPU count and its layouts, engine, method (with its draft and acceptance), K (or K per
batch size), `max_num_seqs` and weight and KV dtypes. Method none takes no K, so it
contributes one candidate per deployment, whatever the K list.

Each GPU count of `candidates.tp` brings the layouts its target can run on the engine
(`simulator.planning.layouts.span`: plain TP for a dense target, TP x attention DP x EP for
an MoE one); pinned `candidates.layouts` replace that span, and `screen` drops a pinned
layout the engine or target cannot run. A dense target's plain TP row gives only num_gpus,
as before layouts; an MoE or MLA target's row gives all four layout columns.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from simulator.errors import InputError
from simulator.inputs import scenarios
from simulator.inputs.catalog import default_models
from simulator.planning import layouts
from simulator.search.spec import MAX_CANDIDATES, PER_BATCH, SearchSpec


@dataclass(frozen=True)
class Candidate:
    """One deployment to price: a scenario row plus what the engine is launched with.

    `scenario` holds scenario columns (`simulator columns`), the traffic's mean lengths
    and the price per GPU-hour; `k` is 0 for method none and for a K-per-batch candidate
    (whose K comes from `screen`)."""

    id: int
    scenario: tuple[tuple[str, object], ...]
    engine: str
    max_num_seqs: int
    per_batch: bool

    @property
    def row(self) -> dict:
        return dict(self.scenario)

    @property
    def layout(self) -> layouts.Layout:
        """The replica's layout (plain TP over num_gpus where the row gives none)."""
        return layouts.from_row(self.row) or layouts.Layout(int(self.row["num_gpus"]))

    @property
    def speculative(self) -> bool:
        return self.row["method"] != "none"

    def label(self) -> str:
        r = self.row
        what = r["method"] if r["method"] != "draft_model" else f"draft {r['draft']}"
        k = "" if not self.speculative else (" K per batch" if self.per_batch else f" K={r['k']}")
        dtypes = f"{r.get('weight_dtype') or 'default'}/{r['kv_dtype']}"
        return (
            f"{r['target']} on {r['num_gpus']}x {r['gpu']} {self.layout.describe()} "
            f"({self.engine}, {dtypes}, "
            f"max_num_seqs {self.max_num_seqs}), {what}{k}"
        )


def expand(spec: SearchSpec) -> list[Candidate]:
    """Every candidate of `spec`, numbered from 0 in a fixed order."""
    c = spec.candidates
    out: list[Candidate] = []
    engine_column = "engine" in scenarios.INPUT_COLUMNS
    models = default_models()
    grid = itertools.product(
        spec.models,
        c.gpus,
        c.tp or (None,),
        c.engines,
    )
    deployments = (
        (target, gpu, engine, lay, *rest)
        for target, gpu, tp, engine in grid
        for lay in _layouts(spec, models[target], tp, engine)
        for rest in itertools.product(c.methods, c.max_num_seqs, c.weight_dtypes, c.kv_dtypes)
    )
    for target, gpu, engine, lay, method, seqs, wdtype, kvdtype in deployments:
        plain = lay.plain_tp and not layouts.has_layouts(models[target])
        base = {
            "target": target,
            "gpu": gpu,
            **({"num_gpus": lay.num_gpus} if plain else lay.columns()),
            "kv_dtype": kvdtype,
            "prompt_len": spec.traffic.prompt.mean,
            "output_len": spec.traffic.output.mean,
            "gpu_hourly_usd": spec.price(gpu),
            **method.columns(),
        }
        if wdtype is not None:
            base["weight_dtype"] = wdtype
        if engine_column:
            base["engine"] = engine
        for k in c.k if method.method != "none" else (0,):
            per_batch = k == PER_BATCH
            row = {**base, "k": 0 if per_batch else int(k)}
            out.append(
                Candidate(
                    id=len(out),
                    scenario=tuple(row.items()),
                    engine=engine,
                    max_num_seqs=int(seqs),
                    per_batch=per_batch,
                )
            )
            if len(out) > MAX_CANDIDATES:
                raise InputError(
                    f"expands to more than {MAX_CANDIDATES:,} candidates; narrow a list",
                    file=spec.source,
                    field="candidates",
                )
    return out


def _layouts(spec: SearchSpec, target, tp: int | None, engine: str) -> tuple:
    """The layouts tried for one target, GPU count and engine: the pinned ones, or the span."""
    if tp is None:
        return spec.candidates.layouts
    return layouts.span(int(tp), target, engine)
