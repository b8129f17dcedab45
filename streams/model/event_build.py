"""Building a :class:`~streams.model.events.HookEvent` from fields an adapter already holds.

:func:`new_event` is what every runtime adapter calls instead of ``HookEvent(...)``. On the fast
path (:mod:`streams.model.fastpath`) it skips pydantic's validation when every field already has the
type and range validation would accept unchanged: exact ``str`` / ``int`` / ``dict`` (no
subclass, no ``bool`` for an int), the length limits of ``event_id`` / ``source`` /
``event_type`` with ASCII text (pydantic rejects a lone surrogate in a length-checked string), an
``event_time_ms`` in range, a known ``importance``, a ``raw`` dict with ``str`` keys (copied, as
validation copies it). The event then gets what validation would give it: every field in
declaration order with its default, the same prefix-token rewrite
(:func:`streams.model.events.safe_tokens`), the same set of explicitly passed fields. Anything else
goes through ``HookEvent(...)`` as before, which validates, converts or raises
``pydantic.ValidationError``. ``tests/streams/test_fast_import.py`` compares both constructions field
by field.
"""

from __future__ import annotations

from typing import Any, Required, TypedDict, Unpack

from pydantic import BaseModel

from streams.model import fastpath
from streams.model.events import HookEvent, Importance, safe_tokens


class EventFields(TypedDict, total=False):
    """The :class:`~streams.model.events.HookEvent` fields an adapter sets (see its attributes)."""

    event_id: Required[str]
    source: Required[str]
    event_type: Required[str]
    native_event: str | None
    session: str
    parent: str | None
    project: str | None
    event_time_ms: Required[int]
    body: str | None
    content: str | None
    importance: Importance
    raw: dict[str, Any] | None


_MISSING: Any = object()
_TEMPLATE: dict[str, Any] = {
    name: (_MISSING if f.is_required() else f.get_default(call_default_factory=True)) for name, f in HookEvent.model_fields.items()
}
"""Every field in declaration order: its default, or a marker for a required one."""
_IMPORTANCE = frozenset({"temporary", "normal", "important", "critical", "deprecated"})
_MAX_MS = 253402300799999
_SAFE_CACHE = 65_536
_safe: dict[tuple[str, str, str | None, str | None, str], bool] = {}  # prefix tokens -> no rewrite needed
_EVENT = HookEvent
_new = HookEvent.__new__
_set_dict = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def new_event(**fields: Unpack[EventFields]) -> HookEvent:
    """``HookEvent(**fields)``, without re-validating fields that are already valid (fast path).

    Returns:
        An event equal to ``HookEvent(**fields)`` in every field value and type, field order,
        ``model_fields_set``, and the prefix-token rewrite.

    Raises:
        pydantic.ValidationError: when ``HookEvent(**fields)`` raises it (bad types, lengths, range).
    """
    if fastpath.ENABLED:
        ev = _trusted(fields)
        if ev is not None:
            return ev
    return HookEvent(**fields)


def _trusted(fields: EventFields) -> HookEvent | None:
    """The event built without validation, or None when any field needs pydantic."""
    d = checked_fields(fields)
    if d is None:
        return None
    ev = _new(_EVENT)
    _set_dict(ev, "__dict__", d)
    _set_fields_set(ev, set(fields))
    _set_extra(ev, None)
    _set_private(ev, None)
    return ev


def checked_fields(fields: EventFields) -> dict[str, Any] | None:
    """The ``__dict__`` ``HookEvent(**fields)`` would get (every field in declaration order, defaults
    filled in, prefix tokens rewritten, ``raw`` copied), or None when a field is not already of the
    type and range validation accepts unchanged (then only ``HookEvent(**fields)`` can tell).
    Pure; ``fields`` is not changed."""
    d = {**_TEMPLATE, **fields}
    if len(d) != len(_TEMPLATE):
        return None  # an unknown field: pydantic rejects it (extra="forbid")
    eid, src, etype, t, session, parent, project = (
        d["event_id"], d["source"], d["event_type"], d["event_time_ms"], d["session"], d["parent"], d["project"])
    native, body, content, imp, raw = d["native_event"], d["body"], d["content"], d["importance"], d["raw"]
    if not (
        type(eid) is str and 0 < len(eid) <= 200 and eid.isascii()
        and type(src) is str and 0 < len(src) <= 100 and src.isascii()
        and type(etype) is str and 0 < len(etype) <= 100 and etype.isascii()
        and type(t) is int and 0 <= t <= _MAX_MS
        and type(session) is str
        and (parent is None or type(parent) is str) and (project is None or type(project) is str)
        and (native is None or type(native) is str) and (body is None or type(body) is str)
        and (content is None or type(content) is str)
        and type(imp) is str and imp in _IMPORTANCE
        and d["schema_version"] == 1 and d["gateway"] is None and d["received_at_ms"] is None
    ):
        return None
    if raw is not None:
        if type(raw) is not dict:
            return None
        for k in raw:
            if type(k) is not str:
                return None
        d["raw"] = dict(raw)  # validation of dict[str, Any] gives a new dict (the values are kept)
    if not tokens_safe(src, session, parent, project, etype):
        safe_tokens(d)
    return d


def tokens_safe(source: str, session: str, parent: str | None, project: str | None, event_type: str) -> bool:
    """Whether :func:`streams.model.events.safe_tokens` leaves these prefix tokens as they are
    (no whitespace or ``]`` in any), memoised (a session's events share them; the memo, a
    module dict, is cleared at :data:`_SAFE_CACHE` entries: the answer depends on the tokens alone)."""
    tokens = (source, session, parent, project, event_type)
    safe = _safe.get(tokens)
    if safe is None:
        probe: dict[str, Any] = {"source": source, "session": session, "parent": parent, "project": project, "event_type": event_type}
        before = dict(probe)
        safe_tokens(probe)
        safe = probe == before
        if len(_safe) >= _SAFE_CACHE:
            _safe.clear()
        _safe[tokens] = safe
    return safe
