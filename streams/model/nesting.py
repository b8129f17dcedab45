"""How deep a JSON value nests, without recursion (the limit the front door and the event id share).

A payload nested a thousand levels deep parses (orjson reads 1,024 levels), but encoding it again
with ``json.dumps`` runs into Python's recursion limit at a depth that depends on the caller's
stack: the same line could get an event id in one call and fail in another. Every place that
accepts nested values therefore checks against one fixed limit first.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of arrays/objects a payload (or an event-id part) may have (deeper: ``wrong_shape``)."""


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when ``value`` nests arrays/objects (``dict`` / ``list``) deeper than ``limit`` levels
    (the value itself is level 1; a scalar is level 0). Iterative: no recursion, any depth. Pure."""
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if d > limit:
            return True
        children = v.values() if isinstance(v, dict) else v
        stack.extend((x, d + 1) for x in children if isinstance(x, dict | list))
    return False
