"""One ``stub-events`` partition's matcher state and processing: ``stub-events`` records in, ``stub-matches`` records out.

``stub-events`` is keyed by channel, so a channel's stubs and messages share one partition and
stay in order. Global stubs belong to every channel: the producer broadcasts each global stub
event to every partition (:mod:`streams.stubs.routing`), so each partition holds its own copy
of the global set and matches exactly as the embedded runner does at that point of the log.

It is pure apart from ``store``, a mutable mapping the stub worker's step backs with a faust table
(changelog topic, :mod:`streams.workers.stubs`), so a restarted worker resumes with the same state:

* ``[p, "stub", scope, id]`` → the stub's record and vector (deleted stubs are removed);
* ``[p, "msg", channel, message_id]`` → the message's outcome and matches, so a message
  processed again (at-least-once re-delivery, or state restored ahead of the committed offset)
  re-emits the records it emitted the first time instead of matching again;
* ``[p, "at", offset]`` → the outcome of the stub state event at that offset (applied, or the
  reason it was rejected), written after the stub's own key. A state event delivered again after
  a kill -9 (the changelog restored ahead of the committed offset) re-emits that outcome instead
  of being applied to a state that already holds it and later events (a refresh replayed after
  the delete that followed it would otherwise be dead-lettered as ``unknown_stub``).

A rejected global stub event is dead-lettered by partition 0 only (every partition rejects its
copy the same way; one dead letter per input record). Never raises (:class:`~streams.model.guard.Guard`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, MutableMapping
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.model.guard import Guard, record_value
from streams.model.position import Position
from streams.model.tracked_state import TrackedState, drain_changes
from streams.stubs.events import MessageEmbedded, StubDeleted, StubMatched, StubRefreshed, StubUpserted, parse_stub_event
from streams.stubs.log import LogEntry
from streams.stubs.outcome import MessageProcessed
from streams.stubs.records import StubRecord
from streams.stubs.replay import StubFold, StubKey, Vector
from streams.stubs.settings import MatchPolicy

log = logging.getLogger(__name__)


GUARD = Guard("stub")


def store_key(key: Any) -> str:
    """A ``stub-state`` key as :class:`StubPartition` writes it (``json.dumps([p, kind, ...])``), from
    what faust's table restore gives back: the string, its UTF-8 bytes, or (rocksdb store) the decoded JSON list."""
    if isinstance(key, bytes):
        return key.decode()
    if isinstance(key, list):
        return json.dumps(key)
    return str(key)


@dataclass(frozen=True, slots=True)
class Emit:
    """One ``stub-matches`` record: ``key`` = the channel (UTF-8; ``b""`` for a global stub event), ``value`` = event JSON."""

    key: bytes
    value: bytes


def _stub_key(p: int, key: StubKey) -> str:
    return json.dumps([p, "stub", key[0], key[1]])


def _msg_key(p: int, channel: str, message_id: str) -> str:
    """``json.dumps([p, "msg", channel, message_id])``, built from the two string encodings (the same text)."""
    return f'[{int(p)}, "msg", {json.dumps(channel)}, {json.dumps(message_id)}]'


def _at_key(p: int, offset: int) -> str:
    return json.dumps([p, "at", offset])


_KEY_HEAD = re.compile(r'\[-?[0-9]+, "(msg|stub|at)", ')
"""The start every state key has: ``[<partition>, "<kind>", `` (``json.dumps``'s separators, an int partition)."""
_AT_TAIL = re.compile(r"(-?[0-9]+)\]")
"""The rest of a ``[p, "at", offset]`` key after its start: the offset (an int) and the closing bracket."""
_KIND_RANK = {"msg": 0, "stub": 1}


def changelog_order(key: str) -> tuple[int, int]:
    """Sort key for the state keys of one flush to the changelog: message outcomes first, then stub
    records, then state-event outcomes (by offset), anything else last: ``(rank, offset)``, rank 0
    to 3, offset 0 but for a state-event outcome.

    A kill -9 during a flush leaves a prefix of it in the changelog. In this order a prefix that
    holds a stub's newer record also holds the saved outcome of every message of that flush, so a
    message delivered again re-emits its first outcome instead of being matched against a stub state
    from later in the log; and a state event's outcome is kept only once the records it changed
    are.

    The kind is read from the key's text (no JSON parse): every state key starts
    ``[<partition>, "<kind>", `` (:func:`_stub_key`, :func:`_msg_key`, :func:`_at_key`), and a
    state-event outcome's key ends ``<offset>]``; for those keys this is what ``json.loads(key)[1]``
    (and ``[2]`` for the offset) gives (``tests/streams/test_stub_changelog_order.py``). Raises nothing (a
    key that does not start so sorts last)."""
    m = _KEY_HEAD.match(key)
    if m is None:
        return (3, 0)
    kind = m.group(1)
    if kind != "at":
        return (_KIND_RANK[kind], 0)
    offset = _AT_TAIL.fullmatch(key, m.end())
    return (2, int(offset.group(1)) if offset is not None else 0)


class StubPartition:
    """The matcher state and processing of one ``stub-events`` partition.

    Args:
        partition: the partition number (part of every ``store`` key).
        policy: threshold, top N and token budget (per channel).
        store: the persistent state (a faust table in the worker, a dict in tests); values are
            JSON-able dicts. Restored on construction.
    """

    def __init__(self, partition: int, policy: MatchPolicy, store: MutableMapping[str, Any]) -> None:
        self.partition = partition
        self.store = store
        self.runner = StubFold(policy)
        records: list[StubRecord] = []
        vectors: dict[StubKey, Vector] = {}
        for k, v in list(store.items()):
            parts = json.loads(k)
            if parts[0] != partition or parts[1] != "stub" or v is None:
                continue
            rec = StubRecord(**v["record"])
            records.append(rec)
            vectors[(rec.channel, rec.stub_id)] = Vector(**v["vector"])
        self.restore_rejections = self.runner.restore(records, vectors)

    @classmethod
    def restore(cls, partition: int, policy: MatchPolicy, items: Iterable[tuple[Any, Any]]) -> StubPartition:
        """The partition restored from a ``stub-state`` table's contents (every partition's
        ``(key, value)`` pairs as faust gives them back, :func:`store_key`; ``None`` values are
        deleted keys), in a :class:`TrackedState` so :meth:`flush` can write what changes.
        A stored stub that no longer loads is logged and matches nothing on this partition."""
        prefix = f"[{partition}, "  # every state key is json.dumps([partition, ...])
        restored = ((store_key(k), v) for k, v in items if v is not None)
        part = cls(partition, policy, TrackedState({k: v for k, v in restored if k.startswith(prefix)}))
        for rej in part.restore_rejections:
            log.warning("stub-state partition %d: a stored stub did not load: %s", partition, rej.error.detail)
        return part

    def flush(self) -> list[tuple[str, Any | None]]:
        """The state keys changed since the last flush as changelog records (``None``: a deleted
        key), in :func:`changelog_order`.

        Raises:
            TypeError: when ``store`` is not a :class:`TrackedState` (it tracks the changed keys).
        """
        if not isinstance(self.store, TrackedState):
            raise TypeError("the store must be a TrackedState (it tracks the changed keys)")
        return drain_changes(self.store, changelog_order)

    def process(self, raw: bytes | None, pos: Position, now_ms: int) -> list[Emit | DeadLetter]:
        """Process one ``stub-events`` record.

        Returns:
            The records to write, in order: :class:`Emit` items for ``stub-matches`` (same
            partition) and :class:`DeadLetter` items for the stub dead-letter topic. Never raises.
        """
        data = raw or b""
        event_id = ""
        try:
            ev = parse_stub_event(record_value(data))
            event_id = ev.event_id
            if isinstance(ev, MessageEmbedded):
                return self._message(ev, data, pos, now_ms)
            if isinstance(ev, StubMatched):
                log.debug("runtime-recorded stub-matched %s is not applied (the worker computes its own)", ev.event_id)
                return []
            return self._state(ev, data, pos, now_ms)
        except Exception as e:
            return [GUARD.letter(e, data, pos, now_ms, event_id)]

    def _state(self, ev: StubUpserted | StubRefreshed | StubDeleted, data: bytes, pos: Position, now_ms: int) -> list[Emit | DeadLetter]:
        akey = _at_key(self.partition, pos.offset)
        done = self.store.get(akey)
        if done is None:
            done = self._apply_state(ev, data, pos)
            self.store[akey] = done
        if "reason" in done:
            if ev.channel is None and self.partition != 0:
                return []  # partition 0 dead-letters its copy of the broadcast
            err = RejectedInput(Reason(done["reason"]), str(done["detail"]))
            return [DeadLetter.of(err, data, pos.topic, pos.partition, pos.offset, now_ms, event_id=ev.event_id)]
        return [Emit((ev.channel or "").encode(), ev.model_dump_json().encode())]

    def _apply_state(self, ev: StubUpserted | StubRefreshed | StubDeleted, data: bytes, pos: Position) -> dict[str, Any]:
        """Apply one state event; its outcome for ``[p, "at", offset]``: ``{}`` or ``{"reason", "detail"}``."""
        self.runner.feed(LogEntry(pos.topic, pos.offset, data, ev))
        delta = self.runner.drain()
        if delta.rejections:
            e = delta.rejections[0].error
            return {"reason": str(e.reason), "detail": e.detail}
        key: StubKey = (ev.channel, ev.stub_id)
        rec = self.runner.index.record(*key)
        vec = self.runner.vectors.get(key)
        if rec is None or vec is None:
            self.store.pop(_stub_key(self.partition, key), None)
        else:
            self.store[_stub_key(self.partition, key)] = {"record": asdict(rec), "vector": asdict(vec)}
        return {}

    def _message(self, m: MessageEmbedded, data: bytes, pos: Position, now_ms: int) -> list[Emit | DeadLetter]:
        skey = _msg_key(self.partition, m.channel, m.message_id)
        saved = self.store.get(skey)
        if saved is None:
            self.runner.feed(LogEntry(pos.topic, pos.offset, data, m))
            delta = self.runner.drain()
            if delta.rejections:
                r = delta.rejections[0]
                return [DeadLetter.of(r.error, data, pos.topic, pos.partition, pos.offset, now_ms, event_id=m.event_id)]
            if not delta.messages:  # processed before this state was restored (cannot happen with a store)
                return []
            mr = delta.messages[0]
            outcome = MessageProcessed(event_id=f"{m.event_id}/processed", event_time_ms=m.event_time_ms, message_event_id=m.event_id,
                                       channel=m.channel, message_id=m.message_id, origin=mr.origin, match_count=mr.match_count,
                                       tokens_injected=mr.tokens_injected, best_similarity=mr.best_similarity)
            saved = {"matches": [e.model_dump(mode="json") for e in delta.matches], "outcome": outcome.model_dump(mode="json")}
            self.store[skey] = saved
        key = m.channel.encode()
        # the saved dicts are the events' model_dump(mode="json"): their JSON is the event's JSON
        out: list[Emit | DeadLetter] = [Emit(key, orjson.dumps(d)) for d in saved["matches"]]
        out.append(Emit(key, orjson.dumps(saved["outcome"])))
        return out
