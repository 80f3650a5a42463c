"""The one error type that input validation raises: it names where the problem is."""

from __future__ import annotations

import re


class InputError(ValueError):
    """Bad user input: a catalog row, a scenario cell, a profile field.

    The message names the file, the row and the field, and says what would be valid. A CSV
    file's rows are numbered as a spreadsheet numbers them (the header is row 1); a Parquet
    file's, or a table's on a page, from 1 at the first row of data.
    """

    def __init__(self, message: str, *, file: str = "", row: int | None = None, field: str = ""):
        self.file = file
        self.row = row
        self.field = field
        where = []
        if file:
            where.append(str(file))
        if row is not None:
            where.append(f"row {row}")
        if field:
            where.append(f"field '{field}'")
        self.bare_message = message
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")


def not_a_number(text: str) -> str:
    """The message for a cell that is not a number: `text` cut to 40 characters, and the
    fix where it is a number written with a decimal comma ('0,7')."""
    shown = str(text)[:40]
    if _DECIMAL_COMMA.fullmatch(shown.strip()):
        return f"'{shown}' is not a number (write decimals with '.': {shown.strip().replace(',', '.')})"
    return f"'{shown}' is not a number"
