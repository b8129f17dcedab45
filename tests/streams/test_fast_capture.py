"""``run``'s line fast path (:mod:`streams.frames.fast_capture`) against the general path it skips, outcome for outcome.

The general path decodes a line into a :class:`~streams.model.events.HookEvent`
(:func:`~streams.model.decode.decode_hook_record`), makes its capture
(:func:`~streams.frames.capture.to_capture`) and notes its memory tool call; the fast path makes
the capture's fields straight from the payload. Whenever the fast path answers, its answer must
be the general path's capture field for field (and no memory tool call), on odd payloads of every
shape it covers, under every key strategy and body limit; and the runner must write the same
tables either way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivestream.embedded.frames import run_files
from streams.frames.capture import Capture
from streams.frames.capture_import import CaptureOptions, hook_outcomes, item_outcome, outcomes
from streams.frames.fast_capture import line_capture
from streams.importers.files import import_hook_events, read_lines
from streams.model import fastpath
from streams.model.body_hash import KeyStrategy
from streams.model.deadletter import RejectedInput
from streams.model.decode import decode_hook_record
from streams.settings import DEFAULT_MAX_BODY_BYTES
from tests.streams.test_fast_import import BACKEND, OPENCLAW, backlog  # noqa: F401 (the module fixture)

OPTIONS = [CaptureOptions(), CaptureOptions(KeyStrategy.BODY_EVENT), CaptureOptions(max_body_bytes=12), CaptureOptions(max_body_bytes=1)]


def general(line: bytes, opts: CaptureOptions, off: int) -> tuple[str, Any, Any]:
    """The general path's outcome of one line: (kind, payload as a plain tuple when a capture, memory call)."""
    try:
        item: Any = decode_hook_record(line)
    except RejectedInput as e:
        item = e
    o = item_outcome(off, line, item, opts, 7)
    return o[1], tuple(o[3]) if o[1] == "c" else o[3], o[4]


def test_line_capture_equals_the_general_path() -> None:
    """Whenever the fast path gives capture fields, the general path gives that capture and no memory
    tool call; and it gives them for some of the payloads (else the comparison proves nothing)."""
    answered: list[bool] = []

    @settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.one_of(BACKEND, OPENCLAW), st.sampled_from(OPTIONS), st.integers(0, 10**6))
    def check(payload: dict[str, Any], opts: CaptureOptions, off: int) -> None:
        line = json.dumps(payload).encode("utf-8", "surrogatepass")
        cap = line_capture(line, opts.strategy, opts.max_body_bytes, 7, off)
        answered.append(cap is not None)
        if cap is not None:
            assert ("c", cap, None) == general(line, opts, off)
            assert Capture._make(cap).offset == off

    check()
    assert sum(answered) >= 10, f"the fast path answered {sum(answered)} of {len(answered)} payloads"  # ~6 % of these odd ones


NEIGHBOUR_KEYS = st.lists(st.sampled_from([
    ("type", None), ("type", "message"), ("type", "agent-turn-complete"), ("type", "kb-search"), ("type", 3),
    ("event", "Stop"), ("event", "message:sent"), ("event", None), ("event", 1), ("hook", "agent_end"), ("hook", "other"),
    ("hivestream_source", "codex"), ("hivestream_source", "claude-code"), ("hivestream_source", "openclaw"), ("hivestream_source", "x"),
    ("schema_version", 1), ("schema_version", 2), ("event_time_ms", None), ("event_time_ms", 5), ("event_time_ms", "x"), ("event_time_ms", -1),
    ("time", "2026-01-01T00:00:00Z"), ("time", "x"), ("sessionId", "s"), ("sessionId", ""), ("sessionId", 4), ("channelId", "c"),
    ("hook_event_name", None), ("hook_event_name", "Stop"), ("hook_event_name", "Notification"), ("content", "[hm src:x] b"), ("content", 5),
    ("agent_id", None), ("agent_id", ""), ("agent_id", "a b"), ("agent_id", 2), ("cwd", None), ("cwd", "/x/y z/"), ("cwd", 1),
    ("turn_id", None), ("turn_id", 0), ("transcript_path", "/h/.codex/s.jsonl"), ("transcript_path", 7), ("sessionKey", "top"),
    ("context", {"channelId": "", "content": "b", "sessionKey": "k"}), ("context", {"channelId": 5, "content": "b"}),
    ("context", {"content": "b", "sessionId": "q"}), ("context", {"channelId": "c", "content": "b", "messageId": 9}), ("context", []),
    ("context", {"channelId": "c", "content": "b", "success": False}), ("context", {"channelId": "c", "content": "<media:audio>"}),
    ("context", {"channelId": "c", "content": "b", "conversationId": "k", "from": "+1", "threadId": 4, "isGroup": True}),
    ("action", "transcribed"), ("action", "preprocessed"), ("cwd", "C:\\Users\\Ana Maria\\tidepool"), ("cwd", "/home/ana"),
    ("cwd", "/home/ana/tide/src"), ("transcript_path", "/h/.claude/projects/-home-ana-tide/s.jsonl"), ("prompt_id", "p"), ("model", "m"),
    ("agent_type", "Explore"), ("agent_transcript_path", "/t/a.jsonl"), ("hook_event_name", "PostCompact"),
]), max_size=2).map(dict)
"""Up to two keys that move a payload to another runtime, time field, session or shape."""


WORD = st.text("abcXYZ09-_.:/é", min_size=1, max_size=10)
PLAIN_TIME = st.one_of(st.integers(0, 253402300799999), st.sampled_from(["2026-09-21T14:13:32.577Z", "2026-09-21T14:13:32+02:00"]))
PLAIN = st.one_of(
    st.fixed_dictionaries({"session_id": WORD, "hook_event_name": st.sampled_from(["UserPromptSubmit", "Stop", "SubagentStop"]),
                           "prompt": WORD, "last_assistant_message": WORD, "ts": PLAIN_TIME},
                          optional={"agent_id": WORD, "cwd": WORD, "turn_id": WORD, "tool_use_id": WORD}),
    st.fixed_dictionaries({"type": st.just("message"), "action": st.sampled_from(["received", "sent"]), "timestamp": PLAIN_TIME,
                           "context": st.fixed_dictionaries({"channelId": WORD, "content": WORD}, optional={"messageId": WORD})}),
)
"""Payloads the fast path answers for (so that the keys added beside them are what is tested)."""


def test_line_capture_equals_the_general_path_next_to_other_shapes() -> None:
    """A covered payload with keys of other runtimes, time fields or sessions beside (or instead of) its own:
    whenever the fast path still answers, it is the general path's capture (and it still answers for some)."""
    answered: list[bool] = []

    @settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(PLAIN, NEIGHBOUR_KEYS, st.sampled_from(OPTIONS[:2]))
    def check(payload: dict[str, Any], extra: dict[str, Any], opts: CaptureOptions) -> None:
        for p in (payload, {**payload, **extra}):
            line = json.dumps(p).encode("utf-8", "surrogatepass")
            cap = line_capture(line, opts.strategy, opts.max_body_bytes, 7, 3)
            assert cap is not None or p is not payload, "a plain payload takes the fast path"
            if p is not payload:
                answered.append(cap is not None)
            if cap is not None:
                assert ("c", cap, None) == general(line, opts, 3)

    check()
    assert sum(answered) > len(answered) // 10, f"the fast path answered {sum(answered)} of {len(answered)} payloads"


@pytest.mark.parametrize("depth", [1, 63, 64, 65, 200, 985, 990, 995, 1020])
def test_an_id_part_nested_past_the_limit_is_a_dead_letter(depth: int) -> None:
    """A ``tool_use_id`` nested ``depth`` levels (orjson reads 1,024): up to 64 levels a capture on both
    paths, deeper a ``wrong_shape`` dead letter and no fast answer, whatever the caller's stack depth
    (a fuzzing pass found it: the id's ``json.dumps`` raised RecursionError near Python's limit,
    or not, with the stack; the import then stopped)."""
    line = (b'{"session_id":"s","hook_event_name":"Stop","last_assistant_message":"hi","ts":5,"tool_use_id":'
            + b"[" * depth + b"]" * depth + b"}")
    opts = CaptureOptions()
    kind, payload, _call = general(line, opts, 0)
    cap = line_capture(line, opts.strategy, opts.max_body_bytes, 7, 0)
    if depth <= 64:
        assert kind == "c" and cap == payload
    else:
        assert (kind, cap) == ("d", None) and "nests deeper than 64 levels" in str(payload), payload
    outs = list(hook_outcomes([line, line], 0, opts, 7))
    assert [o[1] for o in outs] == [kind, kind]


def normalised(outs: Any) -> list[Any]:
    """Outcomes with a capture payload as the plain tuple of its fields."""
    return [(o[0], o[1], o[2], tuple(o[3]), o[4]) if o[1] == "c" else o for o in outs]


@pytest.mark.parametrize("opts", OPTIONS)
def test_hook_outcomes_equal_the_general_outcomes(backlog: Path, opts: CaptureOptions) -> None:  # noqa: F811
    """The backlog (with its bad, blank, odd and huge lines): the same outcomes, in order, from any start offset."""
    lines = [*read_lines(backlog), b"", b"   ", b'{"schema_version": 1}', b"not json"]
    fast = normalised(hook_outcomes(lines, 40, opts, 7))
    assert fast == normalised(outcomes(import_hook_events(lines, start=40), opts, 7))
    assert len(fast) > 8_000


def test_the_fast_path_is_really_taken(backlog: Path) -> None:  # noqa: F811
    """Most of the backlog's captures are made by the fast path (else the comparisons prove little)."""
    lines = list(read_lines(backlog))
    taken = sum(line_capture(ln, KeyStrategy.BODY, DEFAULT_MAX_BODY_BYTES, 7, i) is not None for i, ln in enumerate(lines))
    captures = sum(o[1] == "c" for o in outcomes(import_hook_events(lines), CaptureOptions(), 7))
    assert taken > 0.95 * captures > 7_000


def test_the_switch_turns_it_off(backlog: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """``HIVESTREAM_FAST_IMPORT=0`` (``fastpath.ENABLED`` false): every capture is a :class:`Capture` of the general path."""
    lines = list(read_lines(backlog))[:500]
    monkeypatch.setattr(fastpath, "ENABLED", False)
    assert all(type(o[3]) is Capture for o in hook_outcomes(lines, 0, CaptureOptions(), 7) if o[1] == "c")
    monkeypatch.setattr(fastpath, "ENABLED", True)
    assert any(type(o[3]) is tuple for o in hook_outcomes(lines, 0, CaptureOptions(), 7) if o[1] == "c")


@pytest.mark.parametrize("jobs", [0, 2])
def test_run_writes_the_same_tables_on_both_paths(backlog: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:  # noqa: F811
    """``hivestream run`` of the backlog with the fast path and without it: every table equal row for row."""
    tables = {}
    for on in (True, False):
        monkeypatch.setattr(fastpath, "ENABLED", on)
        db = tmp_path / f"{on}.duckdb"
        run_files([backlog], db, jobs=jobs, clock=lambda: 0)
        con = duckdb.connect(str(db), read_only=True)
        try:
            tables[on] = {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
                          for t in ("frames", "frame_captures", "dead_letters", "dedup_state", "positions", "memory_tool_calls")}
        finally:
            con.close()
    assert tables[True] == tables[False]
    assert len(tables[True]["frame_captures"]) > 7_000 and tables[True]["dead_letters"]
