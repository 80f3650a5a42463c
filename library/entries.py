"""What one library entry is, and the checks every save passes: kind, name, notes, size."""

from __future__ import annotations

import getpass
import hashlib
import math
import os
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime

from library.errors import LibraryError
from library.schema import KINDS, NAME_CHARS

MAX_CONTENT_BYTES = 32 * 1024 * 1024
"""Largest entry, in bytes: above the profile loader's 20 MiB, so any file a page accepts
is kept; a larger one is refused before the database sees it."""
MAX_NOTES_CHARS = 20_000
ENV_USER = "SPECPLAN_USER"
"""Who saves, when set; else the operating system's user name."""


@dataclass(frozen=True)
class EntryInfo:
    """One entry as a list shows it: everything but its content."""

    id: int
    kind: str
    name: str
    notes: str
    created_by: str
    created_at: datetime
    updated_at: datetime | None
    content_hash: str
    size_bytes: int
    device: str
    model: str
    engine: str
    engine_version: str
    model_version: str
    facts: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Saved:
    """The outcome of a save: the entry, and whether it was already kept (same content)."""

    entry: EntryInfo
    existed: bool


def content_hash(content: bytes) -> str:
    """sha256 of the bytes, hex (64 characters)."""
    return hashlib.sha256(content).hexdigest()


def current_user() -> str:
    name = os.environ.get(ENV_USER, "").strip()
    if not name:
        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            name = "unknown"
    return check_text(name, "who", NAME_CHARS)


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise LibraryError(
            f"'{str(kind)[:40]}' is not a kind; use one of {', '.join(KINDS)}", field="kind"
        )
    return kind


def check_text(text, what: str, limit: int) -> str:
    """Text a user typed, kept as typed: a string of at most `limit` characters without
    control characters (line breaks and tabs allowed). Markup is kept as text; pages
    escape it when they show it."""
    if not isinstance(text, str):
        raise LibraryError(f"{what} must be text", field=what)
    if len(text) > limit:
        raise LibraryError(
            f"{what} is {len(text):,} characters long; at most {limit:,}", field=what
        )
    bad = [c for c in text if unicodedata.category(c) == "Cc" and c not in "\n\t"]
    if bad:
        raise LibraryError(f"{what} holds a control character ({bad[0]!r})", field=what)
    return text


def check_name(name) -> str:
    """A name: 1 to NAME_CHARS characters on one line, spaces at the ends dropped."""
    name = check_text(name.strip() if isinstance(name, str) else name, "name", NAME_CHARS)
    if not name:
        raise LibraryError("a name is needed", field="name")
    if "\n" in name or "\t" in name:
        raise LibraryError("a name is one line", field="name")
    return name


def check_notes(notes) -> str:
    return check_text(notes, "notes", MAX_NOTES_CHARS)


def check_content(content: bytes) -> bytes:
    if not isinstance(content, bytes | bytearray):
        raise LibraryError("content must be bytes", field="content")
    if len(content) > MAX_CONTENT_BYTES:
        raise LibraryError(
            f"{len(content):,} bytes is over the library's {MAX_CONTENT_BYTES:,}-byte limit; "
            "nothing was saved",
            field="content",
        )
    if not content:
        raise LibraryError("the file is empty; nothing was saved", field="content")
    return bytes(content)


def _finite(value) -> float | None:
    """`value` as a finite float, or None (text, a flag, NaN, an infinity, an integer
    past a float's range)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def check_figures(figures) -> dict[str, float]:
    """A validation run's figures: metric names (text) mapped to finite numbers."""
    if not isinstance(figures, dict):
        raise LibraryError("must map each metric to a number", field="figures")
    out = {}
    for metric, value in figures.items():
        check_text(metric, "figures", 200)
        number = _finite(value)
        if number is None:
            raise LibraryError(
                f"figure '{str(metric)[:80]}' is not a finite number", field="figures"
            )
        out[metric] = number
    return out


def check_facts(facts, depth: int = 0):
    """An entry's facts (JSON): an object whose numbers are finite and within a float's
    range, so every database keeps them as given."""
    if depth == 0 and not isinstance(facts, dict):
        raise LibraryError("must be an object", field="facts")
    if isinstance(facts, dict):
        for value in facts.values():
            check_facts(value, depth + 1)
    elif isinstance(facts, list):
        for value in facts:
            check_facts(value, depth + 1)
    elif isinstance(facts, int | float) and not isinstance(facts, bool) and _finite(facts) is None:
        raise LibraryError(f"{str(facts)[:40]} is not a finite number", field="facts")
    return facts
