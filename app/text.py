"""Text a user supplied, made safe for Streamlit's Markdown. Imports nothing of the app,
so every page module, `app.own_models` included, may use it."""

from __future__ import annotations

import re

_MARKDOWN_SPECIAL = re.compile(r"([\\`\[\]!<>:&$*_~#|])")
WORD_JOINER = "\u2060"
"""Invisible, and breaks what GitHub Markdown would turn into a link by itself."""
_AUTOLINKS = re.compile(r"(?i)(://|www\.|@)")


def plain(text) -> str:
    """Text a user supplied (a file name, a profile's device name, a message quoting an
    input) escaped so that Streamlit's Markdown shows its characters and nothing else.

    Backslash-escaped: backslash, backtick, brackets, `!`, `<`, `>` (links, images the
    browser would fetch, raw HTML, code); `:` (Streamlit's `:red[...]`, `:material/...:`
    and emoji shortcodes), `&` (entities), `$` (math), `*`, `_`, `~` (emphasis), `#` and
    `|` (headings, tables). GitHub Markdown links a bare `http://...`, `www....` or e-mail
    address whatever its escapes, so an invisible WORD_JOINER goes into each `://`, `www.`
    and before each `@`. Line breaks become spaces."""
    text = " ".join(str(text).splitlines())
    text = _AUTOLINKS.sub(_join, text)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def _join(match: re.Match) -> str:
    found = match.group(1)
    if found == "@":
        return WORD_JOINER + found
    return found[:-1] + WORD_JOINER + found[-1]
