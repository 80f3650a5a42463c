"""An entry as JSON (everything, content included: a backup that `import` restores) or as
CSV (the entry's table), and a JSON export read back."""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import asdict
from datetime import datetime

import pandas as pd

from library.entries import EntryInfo, check_facts, check_figures
from library.errors import LibraryError
from library.jsontext import parse_json
from library.store import Library

EXPORT_SCHEMA = "specplan.library/v1"
_KEPT_FIELDS = ("notes", "device", "model", "engine", "engine_version", "model_version", "facts")


def entry_json(lib: Library, entry: EntryInfo) -> dict:
    """The entry with its content: text when it is UTF-8, else base64."""
    content = lib.content(entry.kind, entry.name)
    out = {"schema": EXPORT_SCHEMA, **asdict(entry)}
    out.pop("id")
    for key in ("created_at", "updated_at"):
        out[key] = out[key].isoformat() if out[key] is not None else None
    if entry.kind == "validation":
        out["figures"] = {m: v for name, _, m, v in lib.figures() if name == entry.name}
    try:
        out["content"], out["content_encoding"] = content.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        out["content"] = base64.b64encode(content).decode()
        out["content_encoding"] = "base64"
    return out


def entry_table(lib: Library, entry: EntryInfo) -> str:
    """The entry as CSV text: a profile's measurements, a report's outputs as computed, a
    scenario's parameters, a scrape's figures, a model's fields as read from its config, a validation run's errors, an engine
    result's table (a JSON result flattened to one row per record)."""
    content = lib.content(entry.kind, entry.name)
    if entry.kind == "profile":
        from simulator.inputs.profile import load_profile, profile_to_csv

        return profile_to_csv(load_profile(content, name=f"'{entry.name[:80]}'"))
    if entry.kind == "report":
        from library.kinds import report_value

        return report_value(content, f"report '{entry.name[:80]}'")[1].to_csv(index=False)
    if entry.kind == "scenario":
        from library.kinds import scenario_value

        page, params = scenario_value(content, f"scenario '{entry.name[:80]}'")
        rows = [("page", page), *sorted(params.items())]
        return pd.DataFrame(rows, columns=["parameter", "value"]).to_csv(index=False)
    if entry.kind == "model":
        from library.kinds import load_model_entry

        spec = load_model_entry(lib, entry.name, model_id=entry.name)
        rows = [(k, v) for k, v in asdict(spec).items()]
        return pd.DataFrame(rows, columns=["field", "value"]).to_csv(index=False)
    if entry.kind == "scrape":
        rows = sorted((k, v) for k, v in entry.facts.items())
        return pd.DataFrame(rows, columns=["figure", "value"]).to_csv(index=False)
    text = content.decode("utf-8", errors="replace")
    if entry.kind == "benchmark" and text.lstrip()[:1] in ("{", "["):
        return _benchmark_table(content, entry.name)
    return text


def _benchmark_table(content: bytes, name: str) -> str:
    """A JSON engine result as CSV: an object, or a list of objects (records), one row
    each; LibraryError for any other JSON (a list of numbers has no columns)."""
    label = f"benchmark '{name[:80]}'"
    try:
        records = parse_json(content, label, field="content")
    except LibraryError:
        return content.decode("utf-8", errors="replace")
    items = records if isinstance(records, list) else [records]
    bad = next((i for i, r in enumerate(items, start=1) if not isinstance(r, dict)), None)
    if bad is not None:
        raise LibraryError(
            f"item {bad} is a {type(items[bad - 1]).__name__}, not an object (a record), so "
            "there is no table to write; export it with --format json",
            file=label,
            field="content",
        )
    return pd.json_normalize(items).to_csv(index=False)


def read_export(data: bytes, source: str) -> dict:
    """A JSON export, checked: the fields `import` needs, the content as bytes."""
    value = parse_json(data, source)
    if not isinstance(value, dict) or value.get("schema") != EXPORT_SCHEMA:
        raise LibraryError(f"not a library export (schema '{EXPORT_SCHEMA}')", file=source)
    for key in ("kind", "name", "content", "content_encoding"):
        if not isinstance(value.get(key), str):
            raise LibraryError("missing or not text", file=source, field=key)
    if value["content_encoding"] == "base64":
        try:
            value["content"] = base64.b64decode(value["content"], validate=True)
        except binascii.Error:
            raise LibraryError("not base64", file=source, field="content") from None
    else:
        value["content"] = value["content"].encode("utf-8")
    return value


def restore(lib: Library, value: dict, who: str | None = None):
    """Save an export read by `read_export` under its own name and metadata."""
    kept = {k: value[k] for k in _KEPT_FIELDS if k in value and value[k] is not None}
    check_facts(kept.get("facts", {}))
    figures = value.get("figures") if value["kind"] == "validation" else None
    if figures is not None:
        check_figures(figures)
    if value.get("created_by") and who is None:
        who = str(value["created_by"])
    from library.kinds import checked_columns

    if value["kind"] == "benchmark":
        _check_engine(kept)

    derived = checked_columns(value["kind"], value["name"], value["content"], kept.get("facts"))
    kept = {**kept, **derived, "facts": {**kept.get("facts", {}), **derived.get("facts", {})}}
    return lib.save(
        value["kind"], value["name"], value["content"], who=who, figures=figures, **kept
    )


def _check_engine(kept: dict) -> None:
    """An engine result's device, engine and version, required as its save requires them."""
    for field, key in (("device", "device"), ("engine", "engine"), ("version", "engine_version")):
        if not str(kept.get(key, "")).strip():
            raise LibraryError(f"an engine result needs its {field}", field=key)


def listing(entries: list[EntryInfo]) -> pd.DataFrame:
    """The columns `library list` prints, one row per entry."""
    rows = [
        {
            "kind": e.kind,
            "name": e.name,
            "device": e.device,
            "model": e.model,
            "engine": " ".join(x for x in (e.engine, e.engine_version) if x),
            "bytes": e.size_bytes,
            "saved_by": e.created_by,
            "saved_at": _when(e.created_at),
            "notes": e.notes,
        }
        for e in entries
    ]
    columns = ["kind", "name", "device", "model", "engine", "bytes", "saved_by", "saved_at"]
    return pd.DataFrame(rows, columns=[*columns, "notes"])


def _when(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC")


def csv_text(df: pd.DataFrame) -> str:
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    return buf.getvalue()
