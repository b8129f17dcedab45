"""The faust dedup agent in faust's test context with the memory store (no broker)."""

from __future__ import annotations

import io
import json
import logging
import os
from typing import Any
from unittest import mock
from unittest.mock import AsyncMock

import colorlog
import pytest
from faust.types import TP

from streams.frames.codec import frame_event_from_json
from streams.frames.dedup import group_of_key
from streams.kafka.faust_app import plain_logs_unless_tty
from streams.kafka.rewinding import run_before_commit
from streams.kafka.topics import partition_for
from streams.model.body_hash import KeyStrategy
from streams.model.events import from_prefixed
from streams.model.key_groups import group_record_key
from streams.settings import Settings
from streams.workers.frames import create_app
from tests.support.consumer_record import Rec
from tests.support.dedup_helpers import cap
from tests.support.fake_producer import FakeProducer, acknowledged


def sent(h: Any, topic: str) -> list[bytes]:
    """Values the agent sent to ``topic`` (single sends and batches), after a before-commit flush."""
    single = [c.args[2] for c in h.app.producer.send.call_args_list if c.args[0] == topic]
    return single + [v for t, _p, _k, v in h.fake.sent if t == topic and v is not None]


@pytest.fixture
def h() -> Any:
    app = create_app(Settings(window_ms=60_000), connection="127.0.0.1:9", store="memory://", partitions=2)
    app.app.producer.send = AsyncMock(side_effect=acknowledged)
    app.fake = FakeProducer()  # type: ignore[attr-defined]
    app.app.producer._ensure_producer = lambda: app.fake  # type: ignore[attr-defined]
    return app


def hook(content: str, t: int, eid: str) -> bytes:
    return from_prefixed(content, event_time_ms=t, event_id=eid).to_json()


async def deliver(h: Any, partition: int, values: list[bytes]) -> None:
    """Hand ``values`` to the worker's batch handler as one fetch of ``partition`` (offsets 0..), then its after-records hook."""
    tp = TP(h.topics.hook_events, partition)
    h.worker.on_records(tp, [Rec(tp.topic, partition, i, 1_790_000_000_000 + i, b"kg:1", v) for i, v in enumerate(values)])
    await h.worker.after_records()


async def test_dedup_agent_collapses_and_keeps_state_in_the_table(h: Any) -> None:
    a = hook("[hm session:openclaw-gateway:c1 src:openclaw event:stop] BODY", 1000, "a")
    b = hook("[hm session:s2 src:claude-code event:stop] BODY", 1300, "b")
    await deliver(h, 0, [a, b, a])  # the last one redelivered
    await run_before_commit(h.app)
    out = [frame_event_from_json(v) for v in sent(h, h.topics.frames)]
    assert [(fe.kind, fe.frame_id, fe.capture.source) for fe in out] == [
        ("created", "a", "openclaw"), ("touched", "a", "claude-code"), ("created", "a", "openclaw")]
    (state,) = h.worker.steps[0].core.state.values()
    assert state["f"][0][:2] == ["a", 1000] and state["f"][0][4] == ["a", "b"]
    # the changed key reaches the table's changelog right before a commit, once, with the state as JSON, between the
    # partition's watermark markers (streams.frames.changelog: none restored, so the flush opens with one)
    changelog = [r for r in h.fake.sent if r[0] == h.table.changelog_topic_name]
    await run_before_commit(h.app)  # nothing changed since: nothing more is sent
    assert changelog == [r for r in h.fake.sent if r[0] == h.table.changelog_topic_name]
    opening, (_topic, p, key, value), closing = changelog
    assert (p, json.loads(value)) == (0, state) and key.decode() in h.worker.steps[0].core.state
    g = group_of_key(key.decode())
    assert [(q, k, json.loads(v)) for _t, q, k, v in (opening, closing)] == [
        (0, b"~watermarks:0", {"watermarks": []}), (0, b"~watermarks:0", {"watermarks": [[g, 1300]]})]


async def test_a_partition_taken_over_restores_its_watermarks_from_the_marker(h: Any) -> None:
    """The next owner takes the watermarks from the changelog's marker, not from the entries."""
    x = next(b for i in range(100) if partition_for(group_record_key(group_of_key(cap(b := f"[hm src:x] BODY {i}", 0, "q").key)), 2) == 0)
    await deliver(h, 0, [hook(x, 1000, "a")])
    await run_before_commit(h.app)
    key = next(iter(h.worker.steps[0].core.state))
    g = group_of_key(key)
    for _t, _p, k, v in h.fake.sent:
        if _t == h.table.changelog_topic_name:
            h.table.data[k] = v  # what faust's restore of the changelog puts in the table
    assert h.worker.steps[0].core.group_max[g] == 1000
    h.table.data[b"~watermarks:0"] = json.dumps({"watermarks": [[g, 900]]}).encode()  # as if a flush had been cut before its closing marker
    h.worker.steps.clear()  # the next record of partition 0 restores its core from the table
    tool = json.dumps({"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Bash", "ts": 6}).encode()
    await deliver(h, 0, [tool])
    assert h.worker.steps[0].core.group_max == {g: 900} and dict(h.worker.steps[0].core.state) == {key: json.loads(h.table.data[key.encode()])}


async def test_dedup_agent_routes_tool_events_and_bad_input(h: Any) -> None:
    good = json.dumps({"hook_event_name": "Stop", "session_id": "s1", "last_assistant_message": "done", "ts": 5}).encode()
    tool = json.dumps({"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Bash", "ts": 6}).encode()
    await deliver(h, 0, [good, tool, b"\xff\xfe", b'{"content": "[hm src:x]  ", "timestamp": 7}', b"{not json"])
    await run_before_commit(h.app)
    frames = [json.loads(v) for v in sent(h, h.topics.frames)]
    assert [f["kind"] for f in frames] == ["created", "skipped", "skipped"]  # the tool event and the empty body: valid, not turns
    assert frames[0]["capture"]["source"] == "claude-code"
    assert [(f["skipped"]["reason"], f["skipped"]["native_event"]) for f in frames[1:]] == [("not_a_turn", "PreToolUse"), ("empty_body", None)]
    reasons = [json.loads(v)["reason"] for v in sent(h, h.topics.dead_letter)]
    assert reasons == ["not_utf8", "malformed_json"]


def test_an_unexpected_exception_is_dead_lettered_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    from streams.frames import routing
    from streams.model.position import Position

    def boom(*_a: object, **_k: object) -> None:
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(routing, "decode_hook_record", boom)
    out = routing.route_record(b"{}", Position("t", 0, 5, 0), Settings(), 1)[1]
    assert out is not None and not hasattr(out, "key")
    assert out.reason == "processing_error" and "ZeroDivisionError" in out.detail  # type: ignore[union-attr]


def test_a_tombstone_is_dead_lettered_with_a_clear_reason() -> None:
    from streams.frames.routing import route_record
    from streams.model.position import Position

    out = route_record(None, Position("t", 0, 1, 0), Settings(), 1)[1]
    assert out is not None and out.reason == "malformed_json" and "tombstone" in out.detail  # type: ignore[union-attr]


def test_each_running_worker_claims_its_own_state_directory(tmp_path: Any) -> None:
    import subprocess
    import sys

    from streams.kafka.workdir import claim_worker_dir

    first = claim_worker_dir(tmp_path, "app")
    second = claim_worker_dir(tmp_path, "app")
    assert (first.name, second.name) == ("worker-0", "worker-1")
    # another process gets the next free slot while this one holds two
    code = "import sys; from pathlib import Path; from streams.kafka.workdir import claim_worker_dir; print(claim_worker_dir(Path(sys.argv[1]), 'app').name)"
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "worker-2"


def test_worker_logs_have_no_colour_codes_when_piped() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    env: dict[str, str] = {}
    assert plain_logs_unless_tty(io.StringIO(), env) and env == {"NO_COLOR": "1"}
    tty_env: dict[str, str] = {}
    assert not plain_logs_unless_tty(Tty(), tty_env) and tty_env == {}
    forced = {"FORCE_COLOR": "1"}
    assert not plain_logs_unless_tty(io.StringIO(), forced) and "NO_COLOR" not in forced
    fmt = colorlog.ColoredFormatter("%(log_color)s%(message)s")  # the formatter mode configures, without a stream
    rec = logging.LogRecord("x", logging.WARNING, __file__, 1, "hello", None, None)
    with mock.patch.dict(os.environ, {}, clear=False):
        os.environ.pop("NO_COLOR", None)
        os.environ.pop("FORCE_COLOR", None)
        assert fmt.format(rec) != "hello"  # colour codes by default
        os.environ.update(env)
        assert fmt.format(rec) == "hello"


async def test_a_commit_between_a_fetch_and_its_after_records_hook_sends_its_dead_letters_first(h: Any) -> None:
    # the handler acks its records; faust's commit timer may run before the fetch loop's after-records hook
    # (it awaits the producer): the before-commit flush must then hand the dead letters to the producer
    tp = TP(h.topics.hook_events, 0)
    h.worker.on_records(tp, [Rec(tp.topic, 0, 0, 1_790_000_000_000, b"kg:1", b"{not json")])
    await run_before_commit(h.app)
    assert [json.loads(v)["reason"] for v in sent(h, h.topics.dead_letter)] == ["malformed_json"]
    await h.worker.after_records()  # sent once, not again
    assert len(sent(h, h.topics.dead_letter)) == 1


async def test_the_stub_worker_sends_its_dead_letters_before_a_commit() -> None:
    from streams.kafka.batch_delivery import batch_topics
    from streams.stubs.settings import MatchPolicy
    from streams.workers.stubs import create_stub_app

    s = create_stub_app(Settings(), MatchPolicy(), connection="127.0.0.1:9", partitions=1, store="memory://")
    s.app.producer.send = AsyncMock(side_effect=acknowledged)  # type: ignore[method-assign]
    fake = FakeProducer()
    s.app.producer._ensure_producer = lambda: fake  # type: ignore[attr-defined]
    on_records, after = batch_topics(s.app)[s.topics.stub_events]
    tp = TP(s.topics.stub_events, 0)
    on_records(tp, [Rec(tp.topic, 0, 0, 1_790_000_000_000, b"c", b"\xff")])
    await run_before_commit(s.app)
    dead = [c for c in s.app.producer.send.call_args_list if c.args[0] == s.topics.stub_dead_letter]
    assert len(dead) == 1
    assert after is not None
    await after()
    assert len([c for c in s.app.producer.send.call_args_list if c.args[0] == s.topics.stub_dead_letter]) == 1


def test_standby_replicas_default_to_zero_and_follow_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka Streams' ``num.standby.replicas`` default (0), not faust's 1; the environment sets it; a bad value is refused."""
    import pydantic

    from streams.kafka.faust_app import make_faust_app

    app = make_faust_app("standby-test", Settings(), connection="127.0.0.1:9", store="memory://", partitions=2, data_dir=None)
    assert app.conf.table_standby_replicas == 0
    monkeypatch.setenv("HIVESTREAM_STANDBY_REPLICAS", "1")
    s = Settings()
    assert s.standby_replicas == 1
    app = make_faust_app("standby-test-1", s, connection="127.0.0.1:9", store="memory://", partitions=2, data_dir=None)
    assert app.conf.table_standby_replicas == 1
    monkeypatch.setenv("HIVESTREAM_STANDBY_REPLICAS", "-1")
    with pytest.raises(pydantic.ValidationError, match="standby_replicas"):
        Settings()


async def test_a_body_event_key_that_starts_like_a_marker_is_restored_with_its_partition() -> None:
    """``body+event`` keys start with the event type, which a prefix may name ``~watermarks``: the
    next owner restores that key's entry like any other (it is no marker), so the next capture of
    the body touches the first capture's frame (with the entry dropped it made a frame of its own)."""
    h = create_app(Settings(window_ms=60_000, key_strategy="body+event"), connection="127.0.0.1:9", store="memory://", partitions=2)
    h.app.producer.send = AsyncMock(side_effect=acknowledged)
    h.fake = FakeProducer()  # type: ignore[attr-defined]
    h.app.producer._ensure_producer = lambda: h.fake  # type: ignore[attr-defined]

    def key_of(content: str) -> str:
        return cap(content, 0, "q", strategy=KeyStrategy("body+event")).key

    x = next(b for i in range(100) if partition_for(group_record_key(group_of_key(key_of(b := f"[hm src:x event:~watermarks] BODY {i}"))), 2) == 0)
    assert key_of(x).startswith("~watermarks:")
    await deliver(h, 0, [hook(x, 1000, "a")])
    await run_before_commit(h.app)
    for t, _p, k, v in h.fake.sent:
        if t == h.table.changelog_topic_name:
            h.table.data[k] = v  # what faust's restore of the changelog puts in the table
    h.worker.steps.clear()  # the next record of partition 0 restores its core from the table
    await deliver(h, 0, [hook(x, 1300, "b")])
    assert key_of(x) in h.worker.steps[0].core.state
    await run_before_commit(h.app)
    out = [frame_event_from_json(v) for v in sent(h, h.topics.frames)]
    assert [(fe.kind, fe.frame_id, fe.capture.event_id) for fe in out] == [("created", "a", "a"), ("touched", "a", "b")]
