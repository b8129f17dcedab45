"""Request bodies of ``POST /v1/hooks/{runtime}`` → events to produce and per-payload answers.

A body is one JSON value (an object: one payload; an array: one payload per element) or NDJSON
(one JSON value per line, split on ``\n`` only; lines of JSON whitespace are skipped). Each payload is adapted by the importers' adapters
(:func:`streams.model.adapters.adapt`, detection skipped unless the runtime is ``auto``), stamped with
the server's receive time (``received_at_ms``, also the event time when the payload has none) and
the gateway id of the token that posted it (``gateway``; whatever the payload says), redacted as
``hivestream produce`` redacts (:func:`streams.redaction.scrub.scrub_kb_event`), keyed by
:func:`streams.produce.keys.hook_event_key` and serialised by :func:`streams.produce.encode.event_value`.
Anything that does not become an event is a :class:`Rejected` with a reason code and a
:class:`~streams.model.deadletter.DeadLetter` to write, whose identity is the request's
(:func:`request_source`) and the payload's index in it. Pure: the clock reading and the request id
are passed in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from streams.ingest.auth import Scope
from streams.model.adapters import RUNTIMES, adapt
from streams.model.adapters.openclaw_plugin import KB_EVENT_TYPES
from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.model.decode import sanitize_surrogates
from streams.model.events import HookEvent
from streams.model.nesting import MAX_DEPTH, depth_exceeds
from streams.produce.encode import MAX_EVENT_BYTES, event_value
from streams.produce.keys import hook_event_key
from streams.redaction.redact import RedactionMode
from streams.redaction.scrub import scrub_kb_event

ROUTE_RUNTIMES = (*RUNTIMES, "auto")
"""The ``{runtime}`` path values ``/v1/hooks/{runtime}`` accepts."""

MAX_PAYLOADS = 10_000
"""Most payloads one request may carry (more: the whole body is rejected)."""

MAX_NUMBER_CHARS = 100
"""Longest number literal a payload may hold (longer: ``malformed_json``, "number too long")."""


class _NumberLimit(ValueError):
    """Raised inside the parser for a number it will not hold."""


def _parse_int(s: str) -> int:
    if len(s) > MAX_NUMBER_CHARS:
        raise _NumberLimit(f"an integer of {len(s)} digits (at most {MAX_NUMBER_CHARS})")
    return int(s)


def _parse_float(s: str) -> float:
    if len(s) > MAX_NUMBER_CHARS:
        raise _NumberLimit(f"a number of {len(s)} characters (at most {MAX_NUMBER_CHARS})")
    f = float(s)
    if f in (float("inf"), float("-inf")):
        raise _NumberLimit(f"the number {s[:40]} is out of range of a 64-bit float")
    return f


def _parse_constant(s: str) -> float:
    raise _NumberLimit(f"{s} is not JSON")


def loads(text: str) -> Any:
    """:func:`json.loads` with the limits of a payload: numbers of at most
    :data:`MAX_NUMBER_CHARS` characters that fit a 64-bit float, no ``NaN``/``Infinity``.

    Raises:
        ValueError: (:class:`json.JSONDecodeError` or a limit) for text that is not such JSON.
        RecursionError: nested too deeply for the parser.
    """
    return json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)


@dataclass(frozen=True)
class Item:
    """One payload of a body: its position, the parsed value (``None`` when unparseable), its
    original bytes (``None``: an array element, serialised again only when it is rejected), why it
    could not be parsed, and whether it is known to nest no deeper than :data:`MAX_DEPTH` (the
    whole body has at most that many ``{`` and ``[``, or :func:`split_body` walked it), so the
    depth walk can be skipped."""

    index: int
    value: Any
    raw: bytes | None
    error: RejectedInput | None = None
    shallow: bool = False

    @property
    def original(self) -> bytes:
        """The payload's bytes as received (an array element: its compact JSON)."""
        return self.raw if self.raw is not None else _dumps(self.value)


@dataclass(frozen=True)
class Accepted:
    """A payload that became an event: the record key and value for ``hook-events``, and the
    scope a token needs to post it (:func:`scope_needed`)."""

    index: int
    event_id: str
    key: bytes
    value: bytes
    scope: Scope = Scope.HOOKS


def scope_needed(ev: HookEvent) -> Scope:
    """The scope a token needs to post ``ev``: ``review`` for a KnowHub ``experience-reviewed``
    line (it approves or rejects an experience), ``hooks`` for anything else."""
    raw_type = (ev.raw or {}).get("type")
    if ev.source == "knowhub" and "experience-reviewed" in (ev.event_type, raw_type):
        return Scope.REVIEW
    return Scope.HOOKS


@dataclass(frozen=True)
class Rejected:
    """A payload that became no event, with its dead-letter record."""

    index: int
    reason: str
    detail: str
    dead_letter: DeadLetter


def request_source(gateway: str, runtime: str, request_id: str) -> str:
    """The ``source`` of the dead letters of one request: ``ingest:<gateway>:<runtime>:<request id>``.

    With the payload's index in the request as the offset, it is the refusal's identity
    (:class:`~streams.model.deadletter.DeadLetter`). A payload refused at the front door has no log
    position yet: the request id, new for every request, tells it from every other refusal, and it
    travels in the dead letter itself (the serve log, the ``dead-letter`` topic, a handoff to Kafka),
    so the same record read again, or a second copy of it sent by the spool, doubles nothing.
    """
    return f"ingest:{gateway}:{runtime}:{request_id}"


def split_body(body: bytes) -> list[Item]:
    """The payloads of a request body.

    Raises:
        RejectedInput: for the whole body: ``not_utf8``, ``malformed_json`` (no line of it is
            JSON), ``wrong_shape`` (empty, or more than :data:`MAX_PAYLOADS` payloads).
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RejectedInput(Reason.NOT_UTF8, f"body is not valid UTF-8: {e}") from e
    if not text.strip(" \t\r\n"):
        raise RejectedInput(Reason.WRONG_SHAPE, "empty body")
    surrogates = "\\ud" in text or "\\uD" in text
    shallow = body.count(b"{") + body.count(b"[") <= MAX_DEPTH  # each nesting level needs one of them
    items: list[Item] = []
    try:
        whole = loads(text)
    except (ValueError, RecursionError) as e:
        first_error = e
        # "\n" only (U+2028 and friends are valid inside a line); blank: JSON whitespace only
        lines = [ln for ln in text.split("\n") if ln.strip(" \t\r")]
        if len(lines) < 2:
            raise RejectedInput(Reason.MALFORMED_JSON, f"body is not JSON: {_err(first_error)}") from e
        for i, ln in enumerate(lines):
            raw = ln.encode("utf-8")
            try:
                items.append(Item(i, loads(ln), raw, None, shallow))
            except (ValueError, RecursionError) as le:
                items.append(Item(i, None, raw, RejectedInput(Reason.MALFORMED_JSON, f"line {i + 1} is not JSON: {_err(le)}")))
        if all(it.error for it in items):
            raise RejectedInput(Reason.MALFORMED_JSON, f"body is neither JSON nor NDJSON: {_err(first_error)}") from e
    else:
        items = [Item(i, v, None, None, shallow) for i, v in enumerate(whole)] if isinstance(whole, list) else [Item(0, whole, body, None, shallow)]
    if len(items) > MAX_PAYLOADS:
        raise RejectedInput(Reason.WRONG_SHAPE, f"{len(items)} payloads in one request; at most {MAX_PAYLOADS}")
    if not shallow:  # before anything walks a value recursively (sanitising, adapting)
        items = [it if it.error is not None else
                 Item(it.index, None, it.original, RejectedInput(Reason.WRONG_SHAPE, f"payload nests deeper than {MAX_DEPTH} levels"))
                 if depth_exceeds(it.value) else Item(it.index, it.value, it.raw, None, True) for it in items]
    if surrogates:
        items = [Item(it.index, sanitize_surrogates(it.value), it.raw, it.error, it.shallow) for it in items]
    return items


def _err(e: Exception) -> str:
    return "nested too deeply" if isinstance(e, RecursionError) else str(e)


def _dumps(v: Any) -> bytes:
    try:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    except (ValueError, RecursionError):
        try:
            return repr(v).encode("utf-8", "replace")
        except RecursionError:
            return b"(not serialisable: nested too deeply)"


def to_event(value: Any, runtime: str, *, gateway: str, received_at_ms: int, check_depth: bool = True) -> HookEvent:
    """Adapt one parsed payload and stamp it.

    Args:
        value: the parsed JSON value.
        runtime: one of :data:`ROUTE_RUNTIMES`.
        gateway: the authenticated gateway id (overrides anything in the payload).
        received_at_ms: the server's receive time, epoch ms.
        check_depth: walk the value for nesting over :data:`MAX_DEPTH` (``False`` only when that
            is already known not to happen: :attr:`Item.shallow`).

    Raises:
        RejectedInput: ``wrong_shape`` (not an object, too deep, a serialised HookEvent, a field
            of the wrong type), ``unknown_payload``, ``missing_field``, ``bad_timestamp``, ...
    """
    if not isinstance(value, dict):
        raise RejectedInput(Reason.WRONG_SHAPE, f"a payload must be a JSON object, got {type(value).__name__}")
    if check_depth and depth_exceeds(value):
        raise RejectedInput(Reason.WRONG_SHAPE, f"payload nests deeper than {MAX_DEPTH} levels")
    if "schema_version" in value and value.get("type") not in KB_EVENT_TYPES:
        raise RejectedInput(Reason.WRONG_SHAPE, "serialised hivestream events are not accepted over HTTP; post the runtime's native payload")
    if "event_id" in value and (runtime == "prefixed" or (runtime == "auto" and value.get("type") not in KB_EVENT_TYPES)):
        # event ids are the server's to derive, not a gateway's to choose; a KnowHub line keeps its own, a reference
        # (experiences and reviews name it) that must match the same line imported from a file
        value = {k: v for k, v in value.items() if k != "event_id"}
    try:
        ev = adapt(value, received_at_ms=received_at_ms, runtime=None if runtime == "auto" else runtime)
    except RejectedInput:
        raise
    except ValidationError as e:
        raise RejectedInput(Reason.WRONG_SHAPE, "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors()[:5])) from e
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as e:
        raise RejectedInput(Reason.WRONG_SHAPE, f"unexpected shape: {type(e).__name__}: {e}") from e
    return ev.model_copy(update={"gateway": gateway, "received_at_ms": received_at_ms})


def process(
    items: list[Item],
    runtime: str,
    *,
    gateway: str,
    received_at_ms: int,
    privacy_mode: RedactionMode,
    source: str,
) -> tuple[list[Accepted], list[Rejected]]:
    """Turn a body's payloads into records to produce and rejections to dead-letter.

    Args:
        items: from :func:`split_body`.
        runtime: one of :data:`ROUTE_RUNTIMES`.
        gateway: the authenticated gateway id.
        received_at_ms: the server's receive time, epoch ms (event time fallback, dead-letter time).
        privacy_mode: KnowHub redaction mode (strict: payloads redacted before the topic).
        source: the dead letters' ``source``: the request's (:func:`request_source`); their offset is the payload's index.
    """
    accepted: list[Accepted] = []
    rejected: list[Rejected] = []
    for it in items:
        ev: HookEvent | None = None
        try:
            if it.error is not None:
                raise it.error
            ev = to_event(it.value, runtime, gateway=gateway, received_at_ms=received_at_ms, check_depth=not it.shallow)
            scrubbed = scrub_kb_event(ev, privacy_mode)
            value = event_value(scrubbed)
            if len(value) > MAX_EVENT_BYTES:
                raise RejectedInput(Reason.BODY_TOO_LARGE, f"event is {len(value)} bytes, over the {MAX_EVENT_BYTES}-byte record limit")
            accepted.append(Accepted(it.index, ev.event_id, hook_event_key(scrubbed), value, scope_needed(scrubbed)))
        except Exception as exc:  # bad input never fails the request: anything unexpected is this payload's dead letter
            e = exc if isinstance(exc, RejectedInput) else RejectedInput(Reason.PROCESSING_ERROR, f"{type(exc).__name__}: {exc}"[:500])
            dl = DeadLetter.of(e, it.original, source, 0, it.index, received_at_ms, event_id=ev.event_id if ev else "")
            rejected.append(Rejected(it.index, str(e.reason), e.detail[:500], dl))
    return accepted, rejected


def body_dead_letter(err: RejectedInput, body: bytes, *, source: str, received_at_ms: int) -> DeadLetter:
    """The dead-letter record of a whole body that could not be read (not UTF-8, not JSON, ...);
    ``source`` the request's (:func:`request_source`), offset 0."""
    return DeadLetter.of(err, body, source, 0, 0, received_at_ms)
