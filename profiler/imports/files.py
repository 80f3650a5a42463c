"""Several result files imported at once: each file parsed on its own, the good ones kept
and each bad one named with its reason, so one truncated file among twenty does not
refuse the other nineteen."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from profiler.imports.common import Parsed
from simulator.errors import InputError


@dataclass(frozen=True)
class ParsedFiles:
    """The files that parsed, in the order given, and (file, reason) for each refused."""

    parsed: tuple[Parsed, ...]
    refused: tuple[tuple[str, str], ...]

    def notes(self) -> list[str]:
        return [f"{name} not imported: {why}" for name, why in self.refused]


def parse_each(
    files: Iterable[tuple[str, Callable[[], bytes]]],
    fmt: str = "",
    shapes: dict[str, tuple[int, int, int]] | None = None,
) -> ParsedFiles:
    """Parse each (name, read) pair; `read` returns the file's bytes or raises InputError.
    InputError (naming every file's reason) when none parses."""
    from profiler.imports import parse_file

    shapes = shapes or {}
    parsed, refused = [], []
    for name, read in files:
        try:
            parsed.append(parse_file(read(), name, fmt, shapes.get(name)))
        except InputError as exc:
            refused.append((name, str(exc)))
    if not parsed:
        if len(refused) == 1:
            raise InputError(refused[0][1])
        reasons = "; ".join(why for _, why in refused)
        raise InputError(f"none of the {len(refused)} files could be read: {reasons}")
    return ParsedFiles(tuple(parsed), tuple(refused))
