"""The versioned hook-event model every runtime's capture is adapted to.

A :class:`HookEvent` is what goes on the ``hook-events`` topic (keyed by session) and what the
embedded runner reads; it is frozen, so a processing step can never change an event in place.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, model_validator

from streams.model import fastpath
from streams.model.nesting import MAX_DEPTH, depth_exceeds
from streams.model.prefix import DEFAULT_SCOPE, Provenance, build_prefix, parse_prefix

SCHEMA_VERSION = 1

_UNSAFE_TOKEN = re.compile(r"[\s\]]")  # what a prefix token may not hold (str.isspace set, and "]")
_TOKEN_FIELDS = ("source", "session", "parent", "project", "event_type")

# Normalised event types. Native names (``UserPromptSubmit``, ``message:received``, …) are kept
# in ``native_event``; the normalised one goes into the ``event:`` prefix token, so the gateway's
# ``message:sent`` and the backend's ``Stop`` of one turn share ``stop`` (as in the seed, §3).
PROMPT = "user-prompt-submit"
STOP = "stop"
SUBAGENT_STOP = "subagent-stop"
COMPACT_SUMMARY = "compact-summary"  # a compaction's summary (Claude Code PostCompact's compact_summary)
SUBAGENT_TASK = "subagent-task"  # the task a subagent was given (the Agent / Task tool's prompt)

# Event types whose body is a conversation turn and so becomes a memory frame.
CAPTURE_TYPES = frozenset({PROMPT, STOP, SUBAGENT_STOP, COMPACT_SUMMARY, SUBAGENT_TASK})

Importance = Literal["temporary", "normal", "important", "critical", "deprecated"]


@lru_cache(maxsize=4096)
def kebab(name: str) -> str:
    """``UserPromptSubmit`` → ``user-prompt-submit``; ``message:sent`` → ``message-sent``."""
    out: list[str] = []
    for i, c in enumerate(name):
        if c.isupper() and i and (name[i - 1].islower() or name[i - 1].isdigit()):
            out.append("-")
        out.append("-" if c in ":_ " else c.lower())
    return "".join(out)


_NESTED = frozenset({list, dict})


def stable_id(*parts: object) -> str:
    """A deterministic event id: the first 32 hex chars of SHA-256 over the JSON of ``parts``.

    The JSON is ``json.dumps(parts, sort_keys=True, default=str, ensure_ascii=True)``. Used so
    that importing or adapting the same input twice yields the same event ids, which makes every
    downstream step idempotent. The fast path (:mod:`streams.model.fastpath`) writes the same JSON text
    with one C encoder made once (no encoder object per call); see :func:`_id_json`.

    Raises:
        ValueError: for a part that nests arrays/objects deeper than
            :data:`streams.model.nesting.MAX_DEPTH` (64) levels (a circular one too), checked before
            encoding: ``json.dumps`` of a value near Python's recursion limit would succeed or fail
            with the caller's stack depth (the decoder makes it a ``wrong_shape`` dead letter).
    """
    for p in parts:
        if type(p) in _NESTED and depth_exceeds(p):
            raise ValueError(f"an event id part nests deeper than {MAX_DEPTH} levels")
    raw = _id_json(parts) if fastpath.ENABLED else _ID_ENCODER.encode(parts)
    return hashlib.sha256(raw.encode("ascii")).digest()[:16].hex()


# json.dumps(parts, sort_keys=True, default=str, ensure_ascii=True) with one encoder made once
_ID_ENCODER = json.JSONEncoder(sort_keys=True, default=str, ensure_ascii=True)
# The C encoder JSONEncoder.iterencode builds per call for _ID_ENCODER, made once, without the
# circular-reference markers (a cycle then ends in RecursionError, and the model encoder is asked).
_C_ID_ENCODER: Any = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, str, json.encoder.encode_basestring_ascii, None, ": ", ", ", True, False, True
) if json.encoder.c_make_encoder is not None else None  # type: ignore[attr-defined]


def _id_json(parts: tuple[object, ...]) -> str:
    """``_ID_ENCODER.encode(parts)``: the same C encoder, made once instead of per call.

    The markers dict only detects cycles (it never changes the text), so without it a cyclic
    part raises ``RecursionError`` here and the model encoder then raises its own error.

    Raises:
        ValueError: for a circular container (from the model encoder).
    """
    if _C_ID_ENCODER is None:
        return _ID_ENCODER.encode(parts)
    try:
        return "".join(_C_ID_ENCODER(parts, 0))
    except RecursionError:
        return _ID_ENCODER.encode(parts)


def safe_tokens(d: dict[str, Any]) -> None:
    """Replace whitespace and ``]`` in the prefix tokens of the field dict ``d`` with ``_``, in place.

    ``d`` maps every :class:`HookEvent` field name to its value (``source``, ``session`` and
    ``event_type`` are str; ``parent`` and ``project`` str or None). One search over the five tokens
    (a NUL joins them: it is neither) decides whether any needs rewriting.
    """
    if _UNSAFE_TOKEN.search(f"{d['source']}\0{d['session']}\0{d['parent'] or ''}\0{d['project'] or ''}\0{d['event_type']}"):
        for name in _TOKEN_FIELDS:
            v = d[name]
            if v is not None:
                d[name] = _UNSAFE_TOKEN.sub("_", v)


class HookEvent(BaseModel):
    """One hook event from a gateway or an agent backend, schema version 1.

    Attributes:
        schema_version: always 1 here; other versions are dead-lettered.
        event_id: unique, stable id (idempotency key everywhere downstream).
        source: capturing runtime, the ``src:`` token: ``claude-code``, ``codex``,
            ``openclaw`` or another name.
        event_type: normalised type, e.g. ``user-prompt-submit``, ``stop``, ``pre-tool-use``.
        native_event: the runtime's own event name, e.g. ``UserPromptSubmit``, ``message:sent``.
        session: session scope, the ``session:`` token (``default`` when unknown); the
            ``hook-events`` topic key.
        parent: parent session or agent id, optional.
        project: project name, optional.
        event_time_ms: event time, epoch milliseconds (UTC).
        body: the turn text without any ``[hm …]`` prefix; ``None`` for events that carry none.
        content: the verbatim prefixed content when the event arrived already prefixed.
        importance: hive-mind importance of the frame it may become.
        raw: the native payload it was adapted from (JSON object), optional.
        gateway: the id of the gateway whose token posted it to ``hivestream ingest``
            (set by the server, never taken from the payload); ``None`` for imported files.
        received_at_ms: when ``hivestream ingest`` received it, epoch ms; ``None`` for imported files.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    event_id: str = Field(min_length=1, max_length=200)
    source: str = Field(min_length=1, max_length=100)
    event_type: str = Field(min_length=1, max_length=100)
    native_event: str | None = None
    session: str = DEFAULT_SCOPE
    parent: str | None = None
    project: str | None = None
    event_time_ms: int = Field(ge=0, le=253402300799999)
    body: str | None = None
    content: str | None = None
    importance: Importance = "normal"
    raw: dict[str, Any] | None = None
    gateway: str | None = Field(default=None, max_length=200)
    received_at_ms: int | None = Field(default=None, ge=0, le=253402300799999)

    @model_validator(mode="after")
    def _no_spaces(self) -> HookEvent:
        """Prefix tokens (``source``, ``session``, ``parent``, ``project``, ``event_type``) may hold
        neither whitespace nor ``]``; each is replaced by ``_``. One check over the five tokens
        (a NUL joins them: it is neither) instead of one validator call per field."""
        safe_tokens(self.__dict__)
        return self

    def provenance(self) -> Provenance:
        """The ``[hm …]`` tokens of this event."""
        return Provenance(
            source=self.source,
            session=self.session or DEFAULT_SCOPE,
            parent=self.parent,
            event=self.event_type,
            project=self.project,
        )

    def frame_content(self) -> str | None:
        """The content a frame would store: ``content`` verbatim, else prefix + ``body``."""
        if self.content is not None:
            return self.content
        if self.body is None:
            return None
        if fastpath.ENABLED:
            return _event_prefix(self.source, self.session or DEFAULT_SCOPE, self.parent, self.event_type, self.project) + self.body
        return build_prefix(self.provenance()) + self.body

    @property
    def is_capture(self) -> bool:
        """True when the event carries turn text that becomes a memory frame.

        Prefixed ``content`` always is a capture; a ``body`` is one for the conversation event
        types in :data:`CAPTURE_TYPES`. Events without text (a Stop hook of a runtime that does
        not send the last message, tool events) are not captures.
        """
        if self.content is not None:
            return True
        return self.body is not None and self.event_type in CAPTURE_TYPES

    def to_json(self) -> bytes:
        """Serialise to UTF-8 JSON bytes (the ``hook-events`` topic value format).

        The fields that are not ``None``, in field order, as pydantic's
        ``model_dump_json(exclude_none=True)`` writes them. The fast path (:mod:`streams.model.fastpath`)
        writes them with orjson, which gives the same bytes for JSON-shaped values (str, int within
        64 bits, float, bool, None, list, dict with str keys); any other value (a datetime, an enum,
        a str subclass, a larger int, a lone surrogate) makes orjson refuse and pydantic writes it.
        """
        if fastpath.ENABLED:
            try:
                return orjson.dumps({k: v for k, v in self.__dict__.items() if v is not None}, default=_refuse, option=_PASSTHROUGH)
            except TypeError:
                pass
        return self.model_dump_json(exclude_none=True).encode("utf-8")


@lru_cache(maxsize=16_384)
def _event_prefix(source: str, session: str, parent: str | None, event: str, project: str | None) -> str:
    """:func:`streams.model.prefix.build_prefix` of these tokens, memoised (a session's events share them).

    Raises:
        ValueError: as :func:`~streams.model.prefix.build_prefix` (never cached).
    """
    return build_prefix(Provenance(source=source, session=session, parent=parent, event=event, project=project))


_PASSTHROUGH = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def _refuse(value: object) -> Any:
    """orjson's ``default``: refuse every value it does not write natively (pydantic writes it)."""
    raise TypeError(f"{type(value).__name__} is left to pydantic")


def from_prefixed(
    content: str,
    *,
    event_time_ms: int,
    event_id: str | None = None,
    importance: Importance = "normal",
) -> HookEvent:
    """Adapt content that already carries an ``[hm …]`` prefix (or none) to a HookEvent.

    Provenance is read from the prefix; content without a prefix gets source ``unknown`` and
    event type ``frame``. The content is kept verbatim in ``content``.
    """
    prov, _body = parse_prefix(content)
    if prov is None:
        prov = Provenance(source="unknown", event="frame")
    return HookEvent(
        event_id=event_id or stable_id("prefixed", content, event_time_ms),
        source=prov.source,
        event_type=prov.event or "frame",
        native_event=None,
        session=prov.session,
        parent=prov.parent,
        project=prov.project,
        event_time_ms=event_time_ms,
        content=content,
        importance=importance,
    )
