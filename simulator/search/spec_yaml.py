"""The search spec's YAML reader: PyYAML's safe loader, refusing what no spec needs and
what costs time or memory out of all proportion to the file.

- aliases and anchors (`*a`, `&a`) and merge keys (`<<`): nine anchors of ten aliases
  each expand 700 bytes into 10**9 values; a spec has nothing to repeat that long;
- nesting deeper than `MAX_DEPTH`: the deepest field of a spec is four levels down, and
  10,000 levels exhaust Python's recursion;
- a key given twice in one mapping: YAML would keep the last without a word;
- an integer of more than `MAX_INT_DIGITS` digits is read as `Oversized` (Python refuses
  to convert 4,300 or more), which every number field refuses naming itself.

Every refusal is an `InputError` naming the file and the field's dotted path.
"""

from __future__ import annotations

import yaml
from yaml.events import AliasEvent
from yaml.nodes import ScalarNode

from simulator.errors import InputError

MAX_DEPTH = 16
"""Most levels of nesting a spec may have (its deepest field is at level 4)."""
MAX_INT_DIGITS = 400
"""Most digits of an integer read as a number: any field's limit is far below 10**400."""
_MERGE_TAG = "tag:yaml.org,2002:merge"


class Oversized(str):
    """An integer too long to read, as the words that describe it ('an integer of 5,000
    digits'): a number field refuses it by name."""


def dotted(labels) -> str:
    """A path of mapping keys and list indices as the spec names it: `a.b[0].c`."""
    out = ""
    for label in labels:
        if label is None:
            continue
        out += f"[{label}]" if isinstance(label, int) else (f".{label}" if out else label)
    return out


class _SpecLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that keeps the path of the node it composes and refuses aliases,
    anchors, merge keys, deep nesting and keys given twice."""

    def __init__(self, text: str, source: str):
        super().__init__(text)
        self.source = source
        self.path: list = []

    def refuse(self, message: str, mark=None):
        line = f" (line {mark.line + 1})" if mark is not None else ""
        field = dotted(self.path[:5]) or "(top level)"
        raise InputError(message + line, file=self.source, field=field)

    def compose_node(self, parent, index):
        event = self.peek_event()
        self.path.append(index.value if isinstance(index, ScalarNode) else index)
        try:
            if self.check_event(AliasEvent):
                self.refuse(
                    f"YAML aliases (*{event.anchor}) are not allowed in a search spec; "
                    "write the value out",
                    event.start_mark,
                )
            if getattr(event, "anchor", None):
                self.refuse(
                    f"YAML anchors and aliases (&{event.anchor}) are not allowed in a "
                    "search spec; write the value out",
                    event.start_mark,
                )
            if len(self.path) > MAX_DEPTH:
                self.refuse(f"nests more than {MAX_DEPTH} levels deep", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self.path.pop()

    def compose_mapping_node(self, anchor):
        node = super().compose_mapping_node(anchor)
        seen = set()
        for key, _ in node.value:
            if key.tag == _MERGE_TAG:
                self.refuse("YAML merge keys (<<) are not allowed in a search spec", key.start_mark)
            if isinstance(key, ScalarNode):
                if (key.tag, key.value) in seen:
                    self.path.append(key.value[:40])
                    self.refuse("is given twice; give each key once", key.start_mark)
                seen.add((key.tag, key.value))
        return node

    def construct_yaml_int(self, node):
        digits = sum(c.isdigit() for c in node.value)
        if digits > MAX_INT_DIGITS:
            return Oversized(f"an integer of {digits:,} digits")
        return super().construct_yaml_int(node)


_SpecLoader.add_constructor("tag:yaml.org,2002:int", _SpecLoader.construct_yaml_int)


def read_yaml(text: str, source: str):
    """The data of one YAML document (dicts, lists, scalars), or an `InputError`."""
    loader = _SpecLoader(text, source)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise InputError(f"is not valid YAML: {str(exc)[:200]}", file=source) from None
    finally:
        loader.dispose()
