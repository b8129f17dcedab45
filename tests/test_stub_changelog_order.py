"""The stub worker flushes its state keys to the changelog in an order whose every prefix is safe to
restore after a kill -9 (streams.stubs.partition_step.changelog_order)."""

from __future__ import annotations

import json
import random

from streams.stubs.partition_step import _at_key, _msg_key, _stub_key, changelog_order


def test_message_outcomes_then_stub_records_then_event_outcomes_by_offset() -> None:
    keys = [_at_key(0, 17), _stub_key(0, ("c1", "s1")), _msg_key(0, "c1", "m1"), _at_key(0, 3), _stub_key(0, ("", "g1")),
            _msg_key(0, "c2", "m9"), "not json", json.dumps({"x": 1}), json.dumps([0, "other", 1])]
    for _ in range(20):
        random.shuffle(keys)
        ordered = sorted(keys, key=changelog_order)
        kinds = [json.loads(k)[1] if k.startswith("[") and json.loads(k)[1] in ("msg", "stub", "at") else "?" for k in ordered]
        assert kinds == ["msg", "msg", "stub", "stub", "at", "at", "?", "?", "?"]
        assert [json.loads(k)[2] for k in ordered if k.startswith("[") and json.loads(k)[1] == "at"] == [3, 17]
