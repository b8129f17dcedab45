"""The import fast path (:mod:`streams.model.fastpath`) against the model path it replaces, record for record.

Every comparison runs the same input twice, once with ``fastpath.ENABLED`` and once without
(orjson vs ``json``, orjson vs pydantic's serialiser, the prefix-free body hash vs
``stripHmPrefix`` of the built content, the stable-id shortcut vs the JSON encoder), and requires
equal results: the same records (topic, key, value bytes, dead letters with their reasons) from
``produce``'s :func:`streams.produce.producer.hook_records`, the same events and captures from the
importers (what ``hivestream run`` reads), on the session files (generated; the real corpus when present), the demo samples, KnowHub lines
and the generated backlog with its bad lines.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.backlog import BacklogSpec, write_backlog
from streams.frames.capture import capture_body_hash, to_capture
from streams.importers.files import import_file
from streams.kafka.topics import Topics
from streams.model import decode, fastpath
from streams.model.body_hash import body_hash
from streams.model.deadletter import RejectedInput
from streams.model.decode import parse_json_object
from streams.model.events import HookEvent, stable_id
from streams.produce.keys import hook_event_key
from streams.produce.producer import ProduceReport, hook_records
from streams.redaction.redact import RedactionMode
from tests.support.kb_fixtures import scenario_lines, write_lines
from tests.support.kb_hardening_lines import hardening_lines
from tests.support.session_sets import SessionSet

SAMPLES = Path(__file__).resolve().parents[2] / "hivestream" / "samples"


def both(fn: Any, *args: Any, **kw: Any) -> tuple[Any, Any]:
    """``fn(*args, **kw)`` on the fast path, then on the model path."""
    saved = fastpath.ENABLED
    try:
        fastpath.ENABLED = True
        fast = fn(*args, **kw)
        fastpath.ENABLED = False
        model = fn(*args, **kw)
    finally:
        fastpath.ENABLED = saved
    return fast, model


def outcome(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or ``(reason, message)`` of the RejectedInput it raises."""
    try:
        return fn(*args)
    except RejectedInput as e:
        return ("rejected", str(e.reason), str(e))


def records(paths: list[Path], gateway: bool, mode: RedactionMode = RedactionMode.STRICT) -> tuple[list[Any], ProduceReport]:
    report = ProduceReport()
    recs = list(hook_records(paths, Topics("fast"), report, gateway=gateway, now_ms=lambda: 1_790_000_000_000, privacy_mode=mode))
    return recs, report


def items(path: Path, gateway: bool) -> list[Any]:
    """What ``hivestream run`` reads: each item, its full field set, and its capture (or rejection)."""
    out: list[Any] = []
    for off, raw, item in import_file(path, gateway=gateway)[1]:
        if isinstance(item, RejectedInput):
            out.append((off, raw, str(item.reason), str(item)))
        else:
            out.append((off, raw, item, item.model_fields_set, item.to_json(), outcome(to_capture, item), hook_event_key(item)))
    return out


def assert_records_equal(paths: list[Path], gateway: bool, mode: RedactionMode = RedactionMode.STRICT) -> int:
    (fast, fast_rep), (model, model_rep) = both(records, paths, gateway, mode)
    assert len(fast) == len(model)
    for i, (a, b) in enumerate(zip(fast, model, strict=True)):
        assert a == b, f"record {i} differs"
    assert (fast_rep.events, fast_rep.dead_letters, fast_rep.formats) == (model_rep.events, model_rep.dead_letters, model_rep.formats)
    return len(fast)


@pytest.fixture(scope="module")
def backlog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2,000 turns of the generated backlog (8,000 captures and its bad lines) plus lines it lacks."""
    path = tmp_path_factory.mktemp("backlog") / "backlog.jsonl"
    write_backlog(path, BacklogSpec(turns=2_000, bad_every=100))
    extra = [
        b'{"hook_event_name": "Stop", "session_id": "big", "last_assistant_message": "n", "ts": 1790000000000, "n": 123456789012345678901}',
        b'{"hook_event_name": "Stop", "session_id": "neg", "last_assistant_message": "n", "ts": 1790000000000, "n": -9999999999999999999}',
        b'{"hook_event_name": "Stop", "session_id": "nan", "last_assistant_message": "x", "ts": 1790000000000, "f": NaN}',
        b'{"hook_event_name": "UserPromptSubmit", "session_id": "lone", "prompt": "a \\ud800 b", "ts": 1790000000000}',
        b'{"hook_event_name": "UserPromptSubmit", "session_id": "pair", "prompt": "\\ud83d\\ude00 \\u2028 ", "ts": 1790000000000}',
        b'{"hook_event_name": "UserPromptSubmit", "session_id": "sp ace]d", "prompt": "tokens to rewrite", "ts": 1790000000000}',
        b'{"hook_event_name": "Stop", "session_id": "ws", "last_assistant_message": "\\ufeff\\u00a0 \\t", "ts": 1790000000000}',
        b'{"hook_event_name": "Stop", "session_id": "pfx", "last_assistant_message": "[hm src:x] inner", "ts": 1790000000000}',
        b'{"content": "[hm session:s9 src:openclaw event:stop]   prefixed body", "timestamp": 1790000000000}',
        b'{"hook_event_name": "Stop", "session_id": "ctl", "last_assistant_message": "\\u0000\\u001f\\u007f\\"\\\\/", "ts": 1.5e12}',
        b'{"hook_event_name": "Stop", "session_id": "f", "last_assistant_message": "x", "ts": 1790000000000, "f": [1e16, 0.1, -0.0, 5e-324]}',
        "\ufeff{}".encode(),
        b'{"hook_event_name": "Stop", "session_id": "bad-utf8", "last_assistant_message": "\xff", "ts": 1790000000000}',
        b"[1, 2]",
        b'{"type": "message", "action": "sent", "timestamp": "2026-10-01T00:00:00Z", "context": {"channelId": "c", "content": 5}}',
        json.dumps({"hook_event_name": "Stop", "session_id": "huge", "last_assistant_message": "y" * 600_000, "ts": 1790000000000}).encode(),
    ]
    with path.open("ab") as f:
        for line in extra:
            f.write(line + b"\n")
    return path


def test_fast_path_is_really_taken(backlog: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparisons below would prove nothing if both runs took the same path: with the fast
    path on, a well-formed line never reaches ``json.loads`` nor pydantic's serialiser."""

    def boom(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("model path used")

    line = backlog.read_bytes().splitlines()[0]
    monkeypatch.setattr(decode.json, "loads", boom)
    monkeypatch.setattr(HookEvent, "model_dump_json", boom)
    monkeypatch.setattr(fastpath, "ENABLED", True)
    obj = parse_json_object(line)
    ev = decode.adapt(obj)
    assert ev.to_json().startswith(b'{"schema_version":1,')
    monkeypatch.setattr(fastpath, "ENABLED", False)
    with pytest.raises(AssertionError, match="model path used"):
        parse_json_object(line)


def test_backlog_records_equal(backlog: Path) -> None:
    n = assert_records_equal([backlog], gateway=False)
    assert n > 8_000


@pytest.mark.parametrize("gateway", [False, True])
def test_session_records_equal(sessions: SessionSet, gateway: bool) -> None:
    paths = [*sessions.claude_files(), *sessions.codex_files()]
    assert assert_records_equal(paths, gateway) > 100


@pytest.mark.parametrize("gateway", [False, True])
def test_session_events_and_captures_equal(sessions: SessionSet, gateway: bool) -> None:
    """What the embedded runner reads: same events (fields, set fields, JSON), captures and keys."""
    for path in [*sessions.claude_files(), *sessions.codex_files(), *sorted(SAMPLES.glob("*.jsonl"))]:
        fast, model = both(items, path, gateway)
        assert fast == model, path.name


def test_samples_and_knowhub_lines_equal(tmp_path: Path) -> None:
    kb = write_lines(tmp_path / "kb.jsonl", scenario_lines() + hardening_lines())
    for mode in RedactionMode:
        assert assert_records_equal([*sorted(SAMPLES.glob("*.jsonl")), kb], gateway=True, mode=mode) > 0


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSONISH, st.sampled_from(["", " ", "\ufeff", "x", "\\ud800"]))
def test_parse_equal_on_any_json(value: Any, noise: str) -> None:
    """Any JSON text (NaN, huge ints, lone surrogates included), wrapped in an object or not,
    parses to the same value of the same types, or is rejected with the same reason and text."""
    for text in (json.dumps({"v": value}), json.dumps(value), json.dumps({"v": value, noise: 1}), noise + json.dumps({"v": value})):
        raw = text.encode("utf-8", "surrogatepass")
        fast, model = both(outcome, parse_json_object, raw)
        assert repr(fast) == repr(model)  # repr tells 1 from 1.0 and -0.0 from 0.0


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), JSONISH, max_size=6), st.text(), st.text(alphabet=st.characters(codec="utf-8")))
def test_value_bytes_equal(raw: dict[str, Any], body: str, session: str) -> None:
    """The record value: orjson's bytes equal pydantic's, or both refuse (a lone surrogate)."""
    try:
        ev = HookEvent(event_id="e", source="codex", event_type="stop", session=session or "default", event_time_ms=1, body=body, raw=raw)
    except ValueError:
        return
    fast, model = both(lambda: outcome_any(ev.to_json))
    assert fast == model


def outcome_any(fn: Any) -> Any:
    try:
        return fn()
    except Exception as e:  # compare what each path raises
        return ("raised", type(e).__name__)


@settings(max_examples=300, deadline=None)
@given(st.tuples(*[st.one_of(st.none(), st.text(), st.integers(), st.booleans(), st.floats(allow_nan=False)) for _ in range(4)]))
def test_stable_id_equal(parts: tuple[Any, ...]) -> None:
    fast, model = both(stable_id, *parts)
    assert fast == model


WS = st.sampled_from([" ", "\t", "\n", "\u00a0", "\ufeff", "\u2028", "\u3000", "\x1c", "\x85", ""])


@settings(max_examples=400, deadline=None)
@given(WS, st.text(), WS, st.sampled_from(["", "[hm src:x] ", "\ud800", "\udc00x"]), st.sampled_from(["stop", "user-prompt-submit"]))
def test_body_hash_equal(lead: str, text: str, trail: str, odd: str, event_type: str) -> None:
    """The key's body hash: trimming the body alone equals ``body_hash`` of prefix + body."""
    body = lead + odd + text + trail
    ev = HookEvent(event_id="e", source="claude-code", event_type=event_type, session="s1", parent="p", event_time_ms=1, body=body)
    fast, model = both(outcome, capture_body_hash, ev)
    assert fast == model
    if isinstance(fast, str):
        assert fast == body_hash(ev.frame_content() or "")


def test_big_numbers_keep_their_type() -> None:
    """orjson would read these as floats; the fast path leaves them to ``json``."""
    for text in ('{"n": 123456789012345678901}', '{"n": -9999999999999999999}', '{"n": 18446744073709551615}'):
        obj = parse_json_object(text.encode())
        assert type(obj["n"]) is int and obj["n"] == json.loads(text)["n"]
    assert math.isnan(parse_json_object(b'{"f": NaN}')["f"])


def test_pooled_import_equals_one_process(backlog: Path, generated_sessions: SessionSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``produce --jobs 2``: the same records in the same order as the one-process import, with
    hook-event files cut into many byte ranges (offsets of dead letters continue across them)."""
    from streams.produce import import_pool

    monkeypatch.setattr(import_pool, "CHUNK_BYTES", 40_000)
    no_newline = tmp_path / "last-line-unterminated.jsonl"
    no_newline.write_bytes(b'{"content": "[hm src:x] a", "timestamp": 1}\n\n\r\n{"broken\n{"content": "b", "timestamp": 2}')
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    paths = [backlog, *generated_sessions.claude_files()[:3], *generated_sessions.codex_files()[:2], no_newline, empty, backlog]
    assert len(import_pool.byte_ranges(backlog, 40_000)) > 20
    for gateway in (False, True):
        one, one_rep = records(paths, gateway)
        rep = ProduceReport()
        with import_pool.ImportPool(2) as pool:
            pooled = list(hook_records(paths, Topics("fast"), rep, gateway=gateway, now_ms=lambda: 1_790_000_000_000, pool=pool))
        assert pooled == one
        assert (rep.events, rep.dead_letters, rep.formats) == (one_rep.events, one_rep.dead_letters, one_rep.formats)
    assert one_rep.dead_letters  # the bad lines were compared too


def test_split_lines_reads_as_the_file_iterator(tmp_path: Path) -> None:
    from streams.importers.files import read_lines, split_lines

    for data in (b"", b"a", b"a\n", b"a\n\n", b"\n", b"a\r\nb\rc\n\r\n", b"x\ny"):
        p = tmp_path / "f"
        p.write_bytes(data)
        assert split_lines(data) == list(read_lines(p)), data


class _Str(str):
    """A str subclass: validation turns it into a str, so the fast constructor must leave it to pydantic."""


class _Dict(dict[str, Any]):
    """A dict subclass for ``raw`` (validation gives a plain dict)."""


TEXT = st.one_of(st.text(max_size=6), st.sampled_from(["", "a b", "x]y", "\ud800", "é", "s" * 101, "e" * 201]), st.builds(_Str, st.text(max_size=3)))
OPT_TEXT = st.one_of(st.none(), TEXT, st.integers(0, 3))
RAW = st.one_of(
    st.none(),
    st.dictionaries(st.text(max_size=4), JSONISH, max_size=3),
    st.builds(_Dict, st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
    st.just({1: "non-str key"}),
    st.just(["not", "a", "dict"]),
)
FIELDS = st.fixed_dictionaries(
    {"event_id": TEXT, "source": TEXT, "event_type": TEXT, "event_time_ms": st.one_of(st.integers(-1, 253402300800000), st.booleans(), st.just(1.0))},
    optional={
        "native_event": OPT_TEXT, "session": OPT_TEXT, "parent": OPT_TEXT, "project": OPT_TEXT, "body": OPT_TEXT, "content": OPT_TEXT,
        "importance": st.sampled_from(["normal", "critical", "deprecated", "bogus", None]), "raw": RAW,
        "gateway": st.sampled_from([None, "gw"]), "unknown_field": st.just(1),
    },
)


def built(fields: dict[str, Any]) -> Any:
    """Everything a constructed event is made of (values with their types), or the error's type."""
    from pydantic import ValidationError

    from streams.model.event_build import new_event

    try:
        ev = new_event(**fields)
    except ValidationError as e:
        return ("invalid", e.error_count())
    d = ev.__dict__
    return (list(d.items()), [type(v) for v in d.values()], ev.model_fields_set, ev.__pydantic_extra__, ev.__pydantic_private__,
            d["raw"] is not None and d["raw"] is fields.get("raw"))


@settings(max_examples=500, deadline=None)
@given(FIELDS)
def test_new_event_equals_validated_event(fields: dict[str, Any]) -> None:
    """The adapters' constructor: skipping validation gives exactly the validated event (or the same
    ValidationError through the fallback), for valid fields and for every kind of field pydantic
    would convert, rewrite or reject."""
    fast, model = both(built, fields)
    assert fast == model


def test_new_event_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A well-formed event is built without pydantic's validator (else the comparison above proves nothing)."""
    from streams.model import event_build

    def boom(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("validated")

    monkeypatch.setattr(event_build, "HookEvent", type("Boom", (), {"__new__": boom}))
    monkeypatch.setattr(event_build, "_new", HookEvent.__new__)
    ev = event_build.new_event(event_id="e1", source="codex", event_type="stop", session="s 1", event_time_ms=5, body="b", raw={"k": [1]})
    assert type(ev) is HookEvent and ev.session == "s_1"
    assert ev.model_fields_set == {"event_id", "source", "event_type", "session", "event_time_ms", "body", "raw"}
    assert ev.to_json() == (b'{"schema_version":1,"event_id":"e1","source":"codex","event_type":"stop","session":"s_1",'
                            b'"event_time_ms":5,"body":"b","importance":"normal","raw":{"k":[1]}}')


def test_blocks_hold_the_records_in_order(backlog: Path) -> None:
    """What the sender takes: the blocks of ``produce`` (one process and pooled) concatenate to its
    records, each block one topic, placed records keep their partitions."""
    from streams.produce import import_pool
    from streams.produce.producer import Block, blocks_of, hook_blocks

    def flat(blocks: list[Block]) -> list[Any]:
        out: list[Any] = []
        for topic, keys, values, parts in blocks:
            assert len(keys) == len(values) and (parts is None or len(parts) == len(keys))
            out += [(topic, k, v) if parts is None else (topic, k, v, p) for k, v, p in zip(keys, values, parts or [None] * len(keys), strict=True)]
        return out

    one, _ = records([backlog], False)
    assert flat(list(blocks_of(one))) == one
    assert flat(list(hook_blocks([backlog], Topics("fast"), ProduceReport(), now_ms=lambda: 1_790_000_000_000))) == one
    with import_pool.ImportPool(2) as pool:
        pooled = list(hook_blocks([backlog], Topics("fast"), ProduceReport(), now_ms=lambda: 1_790_000_000_000, pool=pool))
    assert flat(pooled) == one
    assert any(b[0] == "fast.dead-letter" for b in pooled) and max(len(b[1]) for b in pooled) > 100
    mixed = [("a", b"k", b"1"), ("a", b"k", b"2", 3), ("a", b"k", b"3", 0), ("b", b"k", b"4"), ("a", b"j", b"5")]
    assert flat(list(blocks_of(mixed))) == mixed
    assert [len(b[1]) for b in blocks_of(mixed)] == [1, 2, 1, 1]


def test_auto_jobs_one_per_core_for_large_inputs(tmp_path: Path) -> None:
    """``produce``'s default ``--jobs``: a process per core from AUTO_MIN_BYTES of input on, else none."""
    from streams.importers.ordered_pool import AUTO_MIN_BYTES, auto_jobs

    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_bytes(b"{}\n")
    with big.open("wb") as f:
        f.truncate(AUTO_MIN_BYTES - 2)
    assert auto_jobs([small], cores=2) == 0
    assert auto_jobs([small, big], cores=2) == 2
    assert auto_jobs([small, big], cores=4) == 4
    assert auto_jobs([big], cores=2) == 0  # two bytes short
    assert auto_jobs([small, big], cores=1) == 0
    assert auto_jobs([small]) == 0


def general_record(line: bytes, mode: RedactionMode) -> Any:
    """What the general path makes of one hook-event line: (key, value) or the rejection."""
    from streams.model.decode import decode_hook_record
    from streams.produce.encode import ItemRejected, encode_item

    try:
        rec = encode_item(decode_hook_record(line), mode)
    except RejectedInput as e:
        return ("rejected", str(e.reason), str(e))
    return ("rejected", str(rec.err.reason), str(rec.err), rec.event_id) if isinstance(rec, ItemRejected) else rec


ODD_TEXT = st.one_of(st.text(max_size=8), st.sampled_from(["", " ", "a b", "x]y", "\u00a0", "é ü", "\U0001f600", "[hm src:x] in", "\ud800"]), st.integers(),
                     st.none())
TEXT_OR_ODD = st.one_of(st.text(min_size=1, max_size=12), st.text(min_size=1, max_size=12), ODD_TEXT)
TIME = st.one_of(st.integers(0, 253402300799999),
                 st.sampled_from(["2026-09-21T14:13:32.577Z", "2026-09-21T14:13:32+02:00", "1790000000", "bad", 1.5e12, -1, True]))
BACKEND = st.fixed_dictionaries(
    {"session_id": TEXT_OR_ODD,
     "hook_event_name": st.sampled_from(["UserPromptSubmit", "Stop", "SubagentStop", "StopFailure", "PostToolUse", "PreToolUse", "PostCompact",
                                         "SessionEnd", "", 7]),
     "prompt": TEXT_OR_ODD, "last_assistant_message": TEXT_OR_ODD, "ts": TIME},
    optional={"agent_id": ODD_TEXT, "cwd": st.sampled_from(["/w/p", "/", "", "/a b/c]", 3, None, "C:\\Users\\Ana Maria\\tide pool", "/home/ana",
                                                            "/home/ana/tide/src", "C:\\"]),
              "turn_id": ODD_TEXT, "tool_use_id": ODD_TEXT,
              "tool_name": st.sampled_from(["kb_submit", "Bash", "Agent", "Task"]),
              "tool_input": st.sampled_from([{"prompt": "find it"}, {"prompt": 3}, "x"]),
              "transcript_path": st.sampled_from([None, "/x/.codex/y", "/h/.claude/projects/-home-ana-tide/s.jsonl", 4]),
              "compact_summary": TEXT_OR_ODD, "prompt_id": ODD_TEXT, "model": ODD_TEXT, "agent_type": ODD_TEXT, "reason": ODD_TEXT,
              "agent_transcript_path": ODD_TEXT, "n": st.integers()},
)
OPENCLAW = st.fixed_dictionaries(
    {"type": st.just("message"),
     "action": st.sampled_from(["received", "sent", "received", "sent", "transcribed", "preprocessed", "other", None]), "timestamp": TIME,
     "context": st.one_of(st.fixed_dictionaries({"channelId": TEXT_OR_ODD,
                                                 "content": st.one_of(TEXT_OR_ODD, st.sampled_from(["<media:audio>", " <media:image> (2 images) ",
                                                                                                    "<media:audio> hi", "   "]))},
                                                optional={"messageId": ODD_TEXT, "sessionKey": ODD_TEXT, "success": st.sampled_from([True, False, None]),
                                                          "transcript": TEXT_OR_ODD, "conversationId": ODD_TEXT, "from": ODD_TEXT,
                                                          "threadId": st.one_of(ODD_TEXT, st.integers()), "isGroup": st.sampled_from([True, 1])}),
                          st.just("x"))},
    optional={"sessionKey": ODD_TEXT},
)


def test_line_record_equals_the_general_path() -> None:
    """``produce``'s line fast path: whenever it gives a record, it is the general path's record
    (decode, adapt, validate, scrub, serialise, key) byte for byte, on odd payloads of every shape it
    covers; and it does give one for some of them (else the comparison proves nothing)."""
    from streams.produce.fast_records import line_record

    answered: list[bool] = []

    @settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.one_of(BACKEND, OPENCLAW), st.sampled_from(list(RedactionMode)))
    def check(payload: dict[str, Any], mode: RedactionMode) -> None:
        line = json.dumps(payload).encode("utf-8", "surrogatepass")
        rec = line_record(line)
        answered.append(rec is not None)
        if rec is not None:
            assert rec == general_record(line, mode)

    check()
    assert sum(answered) >= 10, f"the fast path answered {sum(answered)} of {len(answered)} payloads"  # ~6 % of these odd ones


def test_line_record_covers_the_usual_lines(backlog: Path) -> None:
    """The fast path really is taken for the backlog's well-formed captures (else the comparisons prove nothing)."""
    from streams.produce.fast_records import line_record

    lines = backlog.read_bytes().splitlines()[:400]
    taken = [(ln, rec) for ln in lines if (rec := line_record(ln)) is not None]
    assert len(taken) > 380
    for ln, rec in taken:
        assert rec == general_record(ln, RedactionMode.STRICT)


def test_env_kb_settings_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from streams.experiences.keys import env_kb_settings

    monkeypatch.delenv("HIVESTREAM_KB_PRIVACY_MODE", raising=False)
    first = env_kb_settings()
    assert env_kb_settings() is first  # built once for one environment
    assert str(first.privacy_mode) == "strict"
    monkeypatch.setenv("HIVESTREAM_KB_PRIVACY_MODE", "relaxed")
    relaxed = env_kb_settings()
    assert relaxed is not first and str(relaxed.privacy_mode) == "relaxed"
    monkeypatch.delenv("HIVESTREAM_KB_PRIVACY_MODE")
    assert env_kb_settings() is first
