"""The payloads of ``POST /v1/stub-events`` → ``stub-events`` records of serve's log and per-payload answers (pure).

Each payload of a body (one JSON object, an array, or NDJSON: :func:`streams.ingest.payloads.split_body`)
must be one memory-stub event (:mod:`streams.stubs.events`: ``stub-upserted``, ``stub-refreshed``,
``stub-deleted``, ``message-embedded``, ``stub-matched``). An event becomes a record whose value is
the event as JSON (pydantic's, so the log holds every event in one form) and whose key is its
channel (empty for a global stub): the key ``hivestream stubs produce`` gives it on Kafka. An
embedding must decode to its ``dim`` finite, non-zero float32 values
(:func:`streams.stubs.events.decode_embedding`); whether it fits the stubs it is matched against
(model, dimensions) is the stub projection's to judge, as ``stubs run`` judges it. Anything else is
a :class:`~streams.ingest.payloads.Rejected` with its dead letter (source: the request's).

Scopes: an upsert, refresh or delete changes which archives serve injects into agents' prompts, so
posting one needs ``review``; a message embedding or a runtime-recorded match needs ``hooks``.
"""

from __future__ import annotations

from streams.ingest.auth import Scope
from streams.ingest.payloads import Accepted, Item, Rejected
from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.produce.encode import MAX_EVENT_BYTES
from streams.stubs.events import MessageEmbedded, StubMatched, StubRefreshed, StubUpserted, decode_embedding, parse_stub_event

ROUTE = "stub-events"
"""The route's name in the dead letters' ``source`` and in ``/metrics``."""


def stub_scope(ev: object) -> Scope:
    """The scope a token needs to post ``ev``: ``hooks`` for a message embedding or a recorded match, ``review`` for a stub write."""
    return Scope.HOOKS if isinstance(ev, MessageEmbedded | StubMatched) else Scope.REVIEW


def process_stub_items(items: list[Item], *, source: str, received_at_ms: int) -> tuple[list[Accepted], list[Rejected]]:
    """Turn a body's payloads into ``stub-events`` records and rejections to dead-letter.

    Args:
        items: from :func:`streams.ingest.payloads.split_body`.
        source: the dead letters' ``source`` (the request's); their offset is the payload's index.
        received_at_ms: the server's receive time, epoch ms (the dead letters' time).
    """
    accepted: list[Accepted] = []
    rejected: list[Rejected] = []
    for it in items:
        try:
            if it.error is not None:
                raise it.error
            ev = parse_stub_event(it.original)
            if isinstance(ev, StubUpserted | StubRefreshed | MessageEmbedded):
                decode_embedding(ev.embedding_b64, ev.dim)
            value = ev.model_dump_json().encode()
            if len(value) > MAX_EVENT_BYTES:
                raise RejectedInput(Reason.BODY_TOO_LARGE, f"event is {len(value)} bytes, over the {MAX_EVENT_BYTES}-byte record limit")
            key = (ev.channel or "").encode()
            accepted.append(Accepted(it.index, ev.event_id, key, value, stub_scope(ev)))
        except Exception as exc:  # bad input never fails the request: anything unexpected is this payload's dead letter
            e = exc if isinstance(exc, RejectedInput) else RejectedInput(Reason.PROCESSING_ERROR, f"{type(exc).__name__}: {exc}"[:500])
            dl = DeadLetter.of(e, it.original, source, 0, it.index, received_at_ms)
            rejected.append(Rejected(it.index, str(e.reason), e.detail[:500], dl))
    return accepted, rejected
