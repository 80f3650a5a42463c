"""The pre-flight checklist shown beside every result: six checks on one prediction row,
each green, amber or red with one line of why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from simulator.inputs.specs import ModelSpec
from simulator.model.predict import CANNOT_RUN_REASONS, WINDOW_REASONS, status_reasons

K_COMFORT = 5
"""Up to 5 drafts per step, per-position acceptance usually still pays (EAGLE and vLLM
examples use 3 to 5)."""
K_MAX_SENSIBLE = 8
ACCEPTANCE_MARGIN = 0.05
"""Acceptance within 0.05 of break-even: a workload shift erases the gain."""
HEADROOM = 0.8
"""Use at most 80% of the KV cache for the asked concurrency, leaving room for bursts."""
DRAFT_FRACTION_OK = 0.10
DRAFT_FRACTION_HIGH = 0.25


@dataclass(frozen=True)
class CheckItem:
    name: str
    status: str
    """'green', 'amber' or 'red'."""
    why: str


def _tokenizers(row: Mapping, models: dict[str, ModelSpec]) -> CheckItem:
    name = "Tokenizers match"
    method = row["method"]
    if method == "none":
        return CheckItem(name, "green", "speculation off: nothing to match")
    if method != "draft_model":
        return CheckItem(name, "green", f"{method} drafts in the target's own vocabulary")
    t, d = models[row["target"]], models[row["draft"]]
    if t.tokenizer == d.tokenizer:
        return CheckItem(name, "green", f"both use the {t.tokenizer} tokenizer")
    return CheckItem(
        name, "red", f"target uses {t.tokenizer}, draft {d.tokenizer}: speculation is impossible"
    )


def _k_range(row: Mapping) -> CheckItem:
    name = "K in a sensible range"
    k = int(row["k"])
    if row["method"] == "none" or k == 0:
        return CheckItem(name, "green", "K = 0: speculation off")
    if k <= K_COMFORT:
        return CheckItem(name, "green", f"K = {k}")
    if k <= K_MAX_SENSIBLE:
        return CheckItem(
            name, "amber", f"K = {k}: late positions are accepted rarely; check per-position rates"
        )
    return CheckItem(name, "red", f"K = {k} > {K_MAX_SENSIBLE}: deep drafts almost never pay")


def _acceptance(row: Mapping) -> CheckItem:
    name = "Acceptance above break-even"
    if row["method"] == "none":
        return CheckItem(name, "green", "speculation off")
    alpha, be = float(row["alpha"]), float(row["break_even_alpha"])
    batch = int(row["batch_size"])
    if math.isinf(be):
        return CheckItem(
            name,
            "red",
            f"no acceptance makes K = {int(row['k'])} pay at batch "
            f"{batch}: verification costs more than K+1 tokens save",
        )
    margin = alpha - be
    text = f"alpha {alpha:.2f} vs break-even {be:.2f} at batch {batch}"
    if str(row.get("acceptance_per_position", "") or "").strip():
        # Planned by position: the alpha here is not the one entered; say which it is.
        text = (
            f"alpha {alpha:.2f} (the i.i.d. rate with the same τ at K={int(row['k'])}) vs "
            f"break-even {be:.2f} at batch {batch}"
        )
    if margin >= ACCEPTANCE_MARGIN:
        return CheckItem(name, "green", text)
    if margin >= 0:
        return CheckItem(name, "amber", text + ": thin margin")
    return CheckItem(name, "red", text + ": speculation is slower here")


def _fits_on(row: Mapping, fits_on: int | None, gpu_name: str | None) -> str:
    """The fewest GPUs per replica that hold the setup, as a clause: '' when not looked
    for (None), 'no count up to ...' when none of those tried does (0)."""
    if fits_on is None:
        return ""
    gpu = gpu_name or str(row["gpu"])
    if fits_on <= 0:
        return f"; no GPU count tried holds it on {gpu}: quantise or choose a larger GPU"
    return f"; {fits_on} x {gpu} per replica (tensor parallel {fits_on}) hold it"


def _headroom(row: Mapping, fits_on: int | None = None, gpu_name: str | None = None) -> CheckItem:
    name = "KV headroom for the concurrency asked"
    batch = int(row["batch_size"])
    cap = float(row["max_concurrency_spec"])
    reasons = status_reasons(str(row["status"]))
    if WINDOW_REASONS[0] in reasons:
        return CheckItem(
            name, "red", "no sequence runs: a request is longer than the target's context window"
        )
    if WINDOW_REASONS[1] in reasons:
        text = "no sequence runs with speculation: a request is longer than the draft's window"
        return CheckItem(name, "red", text)
    if cap <= 0:
        if float(row["kv_cache_gb_spec"]) > 0:
            need = float(row["prompt_len"]) + float(row["output_len"])
            text = (
                f"the KV cache ({float(row['kv_capacity_tokens_spec']):,.0f} tokens) cannot "
                f"hold one request of {need:,.0f} tokens"
            )
        elif float(row["kv_cache_gb_baseline"]) > 0:
            text = (
                "nothing fits beside the draft: the weights of both and reserves exceed the memory"
            )
        else:
            text = "nothing fits: weights and reserves exceed the memory"
        return CheckItem(name, "red", text + _fits_on(row, fits_on, gpu_name))
    use = batch / cap
    text = f"batch {batch} of {int(cap)} sequences that fit ({use:.0%})"
    if use <= HEADROOM:
        return CheckItem(name, "green", text)
    if use <= 1:
        return CheckItem(name, "amber", text + ": little room for bursts")
    return CheckItem(name, "red", text + ": requests will queue or be preempted")


def _context_window(row: Mapping, models: dict[str, ModelSpec]) -> CheckItem:
    """Whether a request (prompt_len + output_len tokens) fits the target's context window
    and, for a draft model, the draft's: read from the row's status, which `predict` sets
    for the rows that serve requests (a decode_only row prices one step and is not
    checked)."""
    name = "Requests fit the context window"
    need = float(row["prompt_len"]) + float(row["output_len"])
    target = models[row["target"]]
    reasons = status_reasons(str(row["status"]))
    for reason, who in zip(WINDOW_REASONS, ("target", "draft"), strict=True):
        if reason in reasons:
            spec = target if who == "target" else models[row["draft"]]
            text = (
                f"a request of {need:,.0f} tokens exceeds the {who} {spec.id}'s "
                f"{spec.max_position_embeddings:,}-token context window"
            )
            return CheckItem(name, "red", text)
    window = target.max_position_embeddings
    if not window:
        return CheckItem(name, "green", f"{target.id}'s context window is not in the catalog")
    if str(row.get("serving", "steady")) == "decode_only":
        return CheckItem(name, "green", "decode-only row: its lengths set the context of one step")
    return CheckItem(name, "green", f"{need:,.0f} of {window:,} tokens")


def _draft_size(row: Mapping) -> CheckItem:
    name = "Draft size vs target"
    if row["method"] in ("none", "ngram"):
        return CheckItem(name, "green", "no draft weights")
    frac = float(row["draft_weights_gb"]) / float(row["weights_gb"])
    step = float(row["target_step_ms"])
    per_draft = float(row["draft_step_ms"]) / max(int(row["k"]), 1)
    c = per_draft / step if step > 0 else float("nan")
    text = (
        f"draft weights {frac:.1%} of the target's; one draft step costs {c:.2f} of a target step"
    )
    if frac <= DRAFT_FRACTION_OK:
        return CheckItem(name, "green", text)
    if frac <= DRAFT_FRACTION_HIGH:
        return CheckItem(name, "amber", text)
    return CheckItem(name, "red", text + ": too large to pay")


def _cannot_run(row: Mapping) -> str | None:
    """Why the setup cannot run at all (the engine refuses or fails to start), or None."""
    reasons = [r for r in status_reasons(str(row.get("status", "ok"))) if r in CANNOT_RUN_REASONS]
    return reasons[0] if reasons else None


def _not_checked(name: str, why: str) -> CheckItem:
    return CheckItem(name, "red", f"not checked: the setup cannot run ({why})")


def checklist(
    row: Mapping,
    models: dict[str, ModelSpec],
    *,
    fits_on: int | None = None,
    gpu_name: str | None = None,
) -> list[CheckItem]:
    """The six checks for one row of `predict`'s output. Where the setup cannot run, K and
    acceptance are not judged (a K and an alpha verdict would suggest it could).
    `fits_on`: for a setup that does not fit in memory, the fewest GPUs per replica (of
    the row's GPU, `gpu_name`) that hold it, 0 when none tried does; the memory check then
    says so."""
    why = _cannot_run(row)
    return [
        _tokenizers(row, models),
        _not_checked("K in a sensible range", why) if why else _k_range(row),
        _not_checked("Acceptance above break-even", why) if why else _acceptance(row),
        _context_window(row, models),
        _headroom(row, fits_on, gpu_name),
        _draft_size(row),
    ]
