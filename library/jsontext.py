"""JSON read with its nesting bounded before the parser sees it: a file nested 100,000
deep is refused naming the file instead of ending in a RecursionError."""

from __future__ import annotations

import json
import re

import numpy as np

from library.errors import LibraryError

MAX_DEPTH = 100
"""Deepest nesting of arrays and objects read; an export or a kept entry is a few deep."""
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_OPEN, _CLOSE = np.frombuffer(b"[{", np.uint8), np.frombuffer(b"]}", np.uint8)


def nesting_depth(data: bytes) -> int:
    """How deep the arrays and objects in `data` nest (brackets inside strings do not
    count), found without parsing."""
    codes = np.frombuffer(_STRING.sub(b'""', bytes(data)), np.uint8)
    step = np.isin(codes, _OPEN).astype(np.int32) - np.isin(codes, _CLOSE)
    return int(np.cumsum(step).max(initial=0))


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(data: bytes | str, source: str, *, field: str = "", allow_nan: bool = True):
    """The value of a JSON text; LibraryError naming `source` (and `field`) when it is
    not JSON, nests deeper than MAX_DEPTH, or (unless `allow_nan`) holds NaN or an
    infinity."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    depth = nesting_depth(raw)
    if depth > MAX_DEPTH:
        raise LibraryError(
            f"nests {depth:,} deep; at most {MAX_DEPTH} is read", file=source, field=field
        )
    constant = {} if allow_nan else {"parse_constant": _no_constant}
    try:
        return json.loads(raw, **constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise LibraryError(f"not JSON ({exc})", file=source, field=field) from None
