"""One import item → its ``hook-events`` record (key, value), or why it is dead-lettered: the pure
half of ``hivestream produce``, shared by the sender (:mod:`streams.produce.producer`), its import
processes (:mod:`streams.produce.import_pool`), the line fast path (:mod:`streams.produce.fast_records`)
and the front door (:mod:`streams.ingest.payloads`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from streams.importers.files import Item
from streams.model.deadletter import Reason, RejectedInput
from streams.model.events import HookEvent
from streams.produce.keys import hook_event_key
from streams.redaction.redact import RedactionMode
from streams.redaction.scrub import scrub_kb_event

MAX_EVENT_BYTES = 900_000  # under Kafka's default 1 MiB message.max.bytes


def event_value(ev: HookEvent) -> bytes:
    """The record value of ``ev``; the informational ``raw`` payload is dropped when the
    record would exceed :data:`MAX_EVENT_BYTES`."""
    value = ev.to_json()
    if len(value) > MAX_EVENT_BYTES and ev.raw is not None:
        value = ev.model_copy(update={"raw": None}).to_json()
    return value


Record = tuple[str, bytes, bytes]
"""(topic, key, value) of one record to produce."""

PlacedRecord = tuple[str, bytes, bytes, int]
"""(topic, key, value, partition) of one record whose partition the caller chose (e.g. a broadcast)."""


@dataclass(frozen=True, slots=True)
class ItemRejected:
    """An import item that becomes a dead letter: why, and the event id when an event was built."""

    err: RejectedInput
    event_id: str = ""


def encode_item(item: HookEvent | RejectedInput, privacy_mode: RedactionMode) -> tuple[bytes, bytes] | ItemRejected:
    """The ``hook-events`` record (key, value) of one import item, or why it is dead-lettered.

    A KnowHub-relevant event is scrubbed first (:func:`streams.redaction.scrub.scrub_kb_event`);
    an event whose value exceeds :data:`MAX_EVENT_BYTES` even without ``raw`` is rejected
    (``body_too_large``, with its event id); a :class:`RejectedInput` from the importer stays one.
    """
    if isinstance(item, RejectedInput):
        return ItemRejected(item)
    try:
        ev = scrub_kb_event(item, privacy_mode)
    except RejectedInput as e:  # nested too deeply to redact
        return ItemRejected(e, item.event_id)
    value = event_value(ev)
    if len(value) > MAX_EVENT_BYTES:
        err = RejectedInput(Reason.BODY_TOO_LARGE, f"event is {len(value)} bytes, over the {MAX_EVENT_BYTES}-byte record limit")
        return ItemRejected(err, item.event_id)
    return hook_event_key(ev), value


def encode_items(items: Iterable[Item], privacy_mode: RedactionMode) -> Iterator[tuple[int, bytes, tuple[bytes, bytes] | ItemRejected]]:
    """``(offset, line, record or why it is rejected)`` of each import item (:func:`encode_item`)."""
    for off, raw, item in items:
        yield off, raw, encode_item(item, privacy_mode)


