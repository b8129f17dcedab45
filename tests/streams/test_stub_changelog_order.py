"""The stub worker flushes its state keys to the changelog in an order whose every prefix is safe to
restore after a kill -9 (streams.stubs.partition.changelog_order)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.model.position import Position
from streams.model.tracked_state import TrackedState
from streams.stubs.events import StubDeleted
from streams.stubs.log import StubEventT
from streams.stubs.partition import StubPartition, _at_key, _msg_key, _stub_key, changelog_order
from tests.projections.test_stub_projection import POLICY, T0, msg, refresh, stub


def json_order(key: str) -> tuple[int, int]:
    """``changelog_order`` as it was first written, from the parsed key (the reference the text-based one must equal)."""
    try:
        parts = json.loads(key)
        rank = {"msg": 0, "stub": 1, "at": 2}[parts[1]]
    except (ValueError, TypeError, KeyError, IndexError):
        return (3, 0)
    return (rank, parts[2] if rank == 2 and isinstance(parts[2], int) else 0)


def test_message_outcomes_then_stub_records_then_event_outcomes_by_offset() -> None:
    keys = [_at_key(0, 17), _stub_key(0, ("c1", "s1")), _msg_key(0, "c1", "m1"), _at_key(0, 3), _stub_key(0, ("", "g1")),
            _msg_key(0, "c2", "m9"), "not json", json.dumps({"x": 1}), json.dumps([0, "other", 1])]
    for _ in range(20):
        random.shuffle(keys)
        ordered = sorted(keys, key=changelog_order)
        kinds = [json.loads(k)[1] if k.startswith("[") and json.loads(k)[1] in ("msg", "stub", "at") else "?" for k in ordered]
        assert kinds == ["msg", "msg", "stub", "stub", "at", "at", "?", "?", "?"]
        assert [json.loads(k)[2] for k in ordered if k.startswith("[") and json.loads(k)[1] == "at"] == [3, 17]
        assert ordered == sorted(keys, key=json_order)


# Channels and message ids that look like parts of a key: quotes, escapes, separators, kind names, non-ASCII.
ODD = ["alpha", 'a", "at", 5]', "msg", "[1, \"stub\", ", "\\\"", "日本語 ✓", "x" * 150, "at", ", ", "\u2028\x00"]


def partition_keys() -> tuple[list[str], list[str]]:
    """Every state key a run of a partition writes or deletes, over partitions 0, 3 and 11: channel and
    global stubs (upserted, refreshed, deleted, rejected), messages on odd channels and ids, offsets
    from 0 to 2**62, stub ids at both ends of their range. Returns (keys set, keys deleted), each
    flush's as the worker drains them."""
    v = np.ones(16)
    keys: list[str] = []
    deleted: list[str] = []
    for p in (0, 3, 11):
        state = TrackedState()
        part = StubPartition(p, POLICY, state)
        events: list[StubEventT] = [stub(1, None, v, T0), stub(-(2**63), "alpha", v, T0), stub(2**63 - 1, None, v, T0)]
        events += [stub(i, ch, v, T0) for i, ch in enumerate(ODD)]
        events += [msg(mid, ch, v, T0 + 1) for ch in ODD for mid in ODD[:4]]
        events += [refresh(1, None, v, T0 + 2), refresh(99, "alpha", v, T0 + 2),  # the second is rejected: unknown stub
                   StubDeleted(event_id="del", event_time_ms=T0 + 3, stub_id=2**63 - 1),
                   StubDeleted(event_id="del2", event_time_ms=T0 + 3, stub_id=3, channel=ODD[3])]
        offsets = [0, 1, 9, 10, 99, 100, 12_345, 2**31, 2**62]
        for n, ev in enumerate(events):
            off = offsets[n] if n < len(offsets) else 1_000 + n
            part.process(ev.model_dump_json().encode(), Position("ns.stub-events", p, off, 0), T0)
            if n % 7 == 6 or n == len(events) - 1:  # a flush, as the worker does before a commit
                upserts, deletes = state.drain()
                keys += upserts
                deleted += deletes
    return keys, deleted


def test_the_text_classification_equals_the_json_one_on_every_key_a_partition_writes() -> None:
    keys, deleted = partition_keys()
    assert {json.loads(k)[1] for k in keys} == {"msg", "stub", "at"} and len(keys) > 100
    assert {json.loads(k)[1] for k in deleted} == {"stub"}  # the deleted stubs' keys
    keys += deleted
    assert any(json.loads(k)[1] == "stub" and json.loads(k)[2] is None for k in keys)  # a global stub's key
    for k in keys:
        assert changelog_order(k) == json_order(k), k
    rng = random.Random(5)
    for _ in range(10):
        rng.shuffle(keys)
        assert sorted(keys, key=changelog_order) == sorted(keys, key=json_order)  # the same order, ties (stable) included


@settings(max_examples=300, deadline=None)
@given(p=st.integers(0, 10_000), channel=st.text(min_size=1, max_size=200), mid=st.text(min_size=1, max_size=200),
       scope=st.none() | st.text(min_size=1, max_size=200), sid=st.integers(-(2**63), 2**63 - 1), offset=st.integers(0, 2**63 - 1))
def test_the_text_classification_equals_the_json_one_for_any_text_in_a_key(p: int, channel: str, mid: str, scope: str | None, sid: int,
                                                                          offset: int) -> None:
    for key in (_msg_key(p, channel, mid), _stub_key(p, (scope, sid)), _at_key(p, offset)):
        assert changelog_order(key) == json_order(key), key


def test_a_flush_is_the_changed_keys_in_changelog_order_and_a_restore_takes_the_partition_s_keys() -> None:
    v = np.ones(16)
    part = StubPartition.restore(3, POLICY, [])
    for off, ev in enumerate([stub(1, "alpha", v, T0), msg("m1", "alpha", v, T0 + 1), stub(2, "beta", v, T0), msg("m2", "beta", v, T0 + 1)]):
        part.process(ev.model_dump_json().encode(), Position("ns.stub-events", 3, off, 0), T0)
    flushed = part.flush()
    assert [k for k, _v in flushed] == sorted((k for k, _v in flushed), key=changelog_order)
    assert [json.loads(k)[1] for k, _v in flushed] == ["msg", "msg", "stub", "stub", "at", "at"]
    assert part.flush() == []  # nothing changed since
    # what faust's table gives back: str, UTF-8 bytes or (rocksdb) decoded JSON list keys, every partition's, deleted keys as None
    items: list[tuple[object, object]] = [(k.encode() if i % 2 else json.loads(k), val) for i, (k, val) in enumerate(flushed)]
    items += [(_stub_key(4, ("alpha", "9")), flushed[2][1]), (_msg_key(3, "gone", "m0"), None)]
    again = StubPartition.restore(3, POLICY, items)
    assert dict(again.store) == dict(flushed) and again.runner.index.record("alpha", 1) is not None
    assert again.process(msg("m1", "alpha", v, T0 + 1).model_dump_json().encode(), Position("ns.stub-events", 3, 1, 0), T0) == \
        part.process(msg("m1", "alpha", v, T0 + 1).model_dump_json().encode(), Position("ns.stub-events", 3, 1, 0), T0)


def test_a_flush_needs_a_tracked_store() -> None:
    with pytest.raises(TypeError, match="TrackedState"):
        StubPartition(0, POLICY, {}).flush()
