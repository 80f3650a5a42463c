"""Errors the library raises. Each is an `InputError` (a command exits 2) whose message says
what happened and that nothing stored was lost."""

from __future__ import annotations

from simulator.errors import InputError


class LibraryError(InputError):
    """A save, rename or read the library refused; nothing already stored changed."""


class LibraryUnavailable(LibraryError):
    """The database cannot be opened: a corrupt file, a server that does not answer, a
    schema newer than this copy of SpecPlan knows."""


class NameTaken(LibraryError):
    """Another entry of the same kind already has this name (the unique constraint)."""


class NotFound(LibraryError):
    """No entry of that kind and name."""
