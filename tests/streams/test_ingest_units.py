"""Pure parts of live ingestion: tokens, the spool record format and directory spool, request
bodies to events, the hooks-config merges and the command hook's stamping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hivestream.hooks.command import spool_read, spool_write, stamp
from hivestream.hooks.config import CLAUDE_EVENTS, add_ours, http_handler, is_ours, remove_ours, set_notify, unset_notify
from hivestream.ingest.spool import Spool, SpoolFull
from streams.experiences.from_hooks import ExperienceDeriver
from streams.experiences.settings import ExperienceSettings
from streams.importers.files import import_file
from streams.ingest.auth import TokenTable, hash_token, is_loopback, parse_tokens
from streams.ingest.hook_output import hook_output
from streams.ingest.payloads import MAX_DEPTH, process, split_body
from streams.ingest.spool_format import decode_kafka_record, decode_records, encode_kafka_record, encode_record
from streams.model.decode import decode_hook_record
from streams.model.events import HookEvent
from streams.produce.keys import hook_event_key
from streams.redaction.redact import RedactionMode

TOK_A = "a-token-that-is-long-enough"
TOK_B = "b-token-that-is-long-enough"


# --- tokens -------------------------------------------------------------------------------
def test_tokens_plain_and_hashed_map_to_their_gateway() -> None:
    table = TokenTable(parse_tokens(f"# gateways\ngw-a {TOK_A}\n\ngw-b {hash_token(TOK_B)}  # hashed\n"))
    assert table.gateway_for(f"Bearer {TOK_A}") == "gw-a"
    assert table.gateway_for(f"bearer {TOK_B}") == "gw-b"
    assert table.gateway_for("Bearer wrong-token-wrong-token") is None
    assert table.gateway_for(TOK_A) is None  # no scheme
    assert table.gateway_for(f"Basic {TOK_A}") is None
    assert table.gateway_for(None) is None
    assert table.gateway_for("Bearer ") is None


@pytest.mark.parametrize("text", ["gw-a short", "gw-a", "bad/id " + TOK_A, f"gw-a {TOK_A}\ngw-b {TOK_A}"])
def test_bad_tokens_files_are_refused_without_echoing_the_token(text: str) -> None:
    with pytest.raises(ValueError, match="line") as e:
        parse_tokens(text)
    assert TOK_A not in str(e.value)


def test_loopback_detection() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.1.2.3")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("example.com")


# --- spool format -------------------------------------------------------------------------
def test_records_round_trip_and_corruption_is_skipped_and_counted() -> None:
    recs = [b"one", b"", b"x" * 1000, "ünïcode".encode()]
    buf = b"".join(encode_record(r) for r in recs)
    assert decode_records(buf).records == recs
    torn = buf[:-10]  # a write torn by a crash
    d = decode_records(torn)
    assert d.records == recs[:3] and d.skipped_bytes == len(encode_record(recs[3])) - 10
    flipped = bytearray(buf)
    flipped[len(encode_record(recs[0])) + 12 - 1] ^= 0xFF  # inside the 2nd record's header crc... of the empty payload
    d2 = decode_records(bytes(flipped))
    assert d2.records == [recs[0], recs[2], recs[3]] and d2.skipped_bytes > 0


def test_kafka_record_payload_round_trip() -> None:
    assert decode_kafka_record(encode_kafka_record("ns.hook-events", b"kg:1", b"{}")) == ("ns.hook-events", b"kg:1", b"{}")
    assert decode_kafka_record(encode_kafka_record("t", None, b"v")) == ("t", b"", b"v")
    with pytest.raises(ValueError):
        decode_kafka_record(b"\x00\x09abc")


def test_spool_appends_seals_survives_reopen_and_is_bounded(tmp_path: Path) -> None:
    sp = Spool(tmp_path / "s", max_bytes=2_000, segment_bytes=200)
    sp.append([b"a" * 50, b"b" * 50])
    sp.append([b"c" * 150])  # seals: over segment_bytes
    sp.append([b"d"])
    assert sp.records == 4
    with pytest.raises(SpoolFull):
        sp.append([b"x" * 3_000])
    assert sp.records == 4
    sp.close()
    again = Spool(tmp_path / "s", max_bytes=2_000, segment_bytes=200)
    assert again.records == 4 and again.size_bytes == sp.size_bytes
    segs = again.sealed()
    got = [r for s in segs for r in Spool.read(s)[0]]
    assert got == [b"a" * 50, b"b" * 50, b"c" * 150, b"d"]
    again.delete(segs[0], len(Spool.read(segs[0])[0]))
    assert again.records == 1 and [r for s in again.sealed() for r in Spool.read(s)[0]] == [b"d"]


# --- bodies to events ---------------------------------------------------------------------
PROMPT = {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": "hello there", "cwd": "/w/proj"}
STOP = {"session_id": "s1", "hook_event_name": "Stop", "last_assistant_message": "hi!", "event_time_ms": 1_700_000_000_000}


def _run(body: bytes, runtime: str = "auto", gateway: str = "gw-a") -> tuple[list, list]:  # type: ignore[type-arg]
    return process(split_body(body), runtime, gateway=gateway, received_at_ms=1_800_000_000_000, privacy_mode=RedactionMode.STRICT,
                   source=f"ingest:{gateway}:{runtime}")


def test_object_array_and_ndjson_bodies() -> None:
    one = json.dumps(PROMPT).encode()
    assert len(_run(one)[0]) == 1
    arr = json.dumps([PROMPT, STOP]).encode()
    assert [a.index for a in _run(arr)[0]] == [0, 1]
    nd = (json.dumps(PROMPT) + "\n\n" + json.dumps(STOP) + "\n{broken\n").encode()
    acc, rej = _run(nd)
    assert [a.index for a in acc] == [0, 1] and [(r.index, r.reason) for r in rej] == [(2, "malformed_json")]
    assert rej[0].dead_letter.original() == b"{broken"


@pytest.mark.parametrize(("body", "reason"), [(b"not json", "malformed_json"), (b"\xff\xfe", "not_utf8"), (b"  ", "wrong_shape"),
                                              (b"{a\n{b", "malformed_json")])
def test_unreadable_bodies_raise_for_the_whole_body(body: bytes, reason: str) -> None:
    from streams.model.deadletter import RejectedInput

    with pytest.raises(RejectedInput) as e:
        split_body(body)
    assert str(e.value.reason) == reason


def test_events_are_stamped_with_gateway_and_receive_time_whatever_the_payload_says() -> None:
    claims = {**PROMPT, "gateway": "gw-other", "received_at_ms": 5}
    acc, rej = _run(json.dumps([claims, STOP]).encode(), gateway="gw-a")
    assert not rej
    evs = [HookEvent.model_validate_json(a.value) for a in acc]
    assert [e.gateway for e in evs] == ["gw-a", "gw-a"]
    assert [e.received_at_ms for e in evs] == [1_800_000_000_000] * 2
    assert evs[0].event_time_ms == 1_800_000_000_000  # no time in the payload: the receive time
    assert evs[1].event_time_ms == 1_700_000_000_000  # the payload's own time
    assert [a.key for a in acc] == [hook_event_key(e) for e in evs]


def test_live_event_equals_the_imported_one_apart_from_the_stamps() -> None:
    line = json.dumps(STOP).encode()
    acc, _ = _run(line, runtime="claude-code")
    live = HookEvent.model_validate_json(acc[0].value)
    imported = decode_hook_record(line)
    assert live.model_copy(update={"gateway": None, "received_at_ms": None}) == imported


@pytest.mark.parametrize(("payload", "runtime", "reason"), [
    ({"foo": 1}, "auto", "unknown_payload"),
    (PROMPT, "openclaw", "wrong_shape"),  # forced runtime: a Claude Code payload is no OpenClaw message
    ({"hook_event_name": "Stop"}, "claude-code", "missing_field"),
    ({"schema_version": 1, "event_id": "e", "source": "x", "event_type": "stop", "event_time_ms": 1}, "auto", "wrong_shape"),
    (5, "auto", "wrong_shape"),
    ({**PROMPT, "timestamp": "the day after tomorrow"}, "auto", "bad_timestamp"),
    ({"hook": "after_tool_call", "event": [], "ctx": {}}, "openclaw-plugin", "wrong_shape"),
    ({"type": "message"}, "openclaw-plugin", "missing_field"),
    ({**PROMPT, "prompt": 7}, "claude-code", "wrong_shape"),
])
def test_bad_payloads_are_rejected_with_a_reason_and_a_dead_letter(payload: object, runtime: str, reason: str) -> None:
    acc, rej = _run(json.dumps(payload).encode(), runtime=runtime)
    assert not acc and [r.reason for r in rej] == [reason]
    assert rej[0].dead_letter.source == f"ingest:gw-a:{runtime}" and str(rej[0].dead_letter.reason) == reason


def test_deep_nesting_is_rejected_not_crashing() -> None:
    nested: object = "x"
    for _ in range(MAX_DEPTH + 5):
        nested = {"n": nested}
    acc, rej = _run(json.dumps({**PROMPT, "extra": nested}).encode())
    assert not acc and rej[0].reason == "wrong_shape" and "deeper" in rej[0].detail
    from streams.model.deadletter import RejectedInput

    with pytest.raises(RejectedInput):  # deeper than the JSON parser goes: the whole body is unreadable
        split_body(b"[" * 200_000 + b"]" * 200_000)


def test_the_depth_walk_is_skipped_only_when_the_body_cannot_nest_that_deep() -> None:
    assert all(it.shallow for it in split_body(json.dumps([PROMPT, STOP]).encode()))
    deep: object = "x"
    for _ in range(MAX_DEPTH - 1):  # with the payload object: exactly the limit
        deep = [deep]
    items = split_body(json.dumps([{**PROMPT, "extra": deep}, {**PROMPT, "extra": [deep]}]).encode())
    assert items[0].shallow and items[1].error is not None  # each payload was walked (in split_body, before anything recursive)
    acc, rej = process(items, "auto", gateway="gw-a", received_at_ms=1_800_000_000_000, privacy_mode=RedactionMode.STRICT, source="t")
    assert [a.index for a in acc] == [0] and [r.index for r in rej] == [1] and "deeper" in rej[0].detail
    braces = json.dumps({**PROMPT, "prompt": "{[" * 100}).encode()  # brackets inside strings only make it walk
    assert split_body(braces)[0].error is None and len(_run(braces)[0]) == 1


def test_knowhub_payloads_are_redacted_before_the_topic() -> None:
    call = {"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "kb_submit", "event_time_ms": 1,
            "tool_input": {"task": "deploy", "resource": "mail alice@example.com", "result": "ok"}}
    acc, _ = _run(json.dumps(call).encode())
    assert b"alice@example.com" not in acc[0].value and b"[REDACTED:email]" in acc[0].value



def test_a_knowhub_line_keeps_its_own_event_id_live_and_on_import(tmp_path: Path) -> None:
    """A KnowHub line's ``event_id`` is a reference (an experience's id is its first submission's,
    reviews name it), so the server keeps it: posted by any gateway on either route, and imported
    from a file, it is one event with one id (docs/agents-connect.md, Many gateways)."""
    line = {"type": "experience-submitted", "schema_version": 1, "event_id": "kb-line-1", "event_time_ms": 1_790_000_000_000,
            "task": "rebalance storm", "resource": "consumer group", "result": "raise max.poll.interval.ms", "agent_id": "a1"}
    body = json.dumps(line).encode()
    live = [decode_hook_record(_run(body, rt, gw)[0][0].value) for rt, gw in (("knowhub", "gw-a"), ("auto", "gw-b"))]
    src = tmp_path / "kb-events.jsonl"
    src.write_bytes(body + b"\n")
    [imported] = [ev for _o, _r, ev in import_file(src)[1]]
    assert isinstance(imported, HookEvent)
    assert live[0].event_id == live[1].event_id == imported.event_id
    deriver = ExperienceDeriver(ExperienceSettings())
    assert {d.event_id for ev in (*live, imported) for d in deriver.derive(ev)} == {"kb-line-1"}  # type: ignore[union-attr]


# --- hooks config -------------------------------------------------------------------------
USER = {"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
                                   "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}]}}


def test_install_merges_is_idempotent_and_uninstall_restores() -> None:
    hs = {e: http_handler("http://127.0.0.1:8787", "claude-code") for e in CLAUDE_EVENTS}
    once = add_ours(USER, CLAUDE_EVENTS, hs)
    assert once["hooks"]["Stop"][0] == USER["hooks"]["Stop"][0] and len(once["hooks"]["Stop"]) == 2
    assert once["hooks"]["PreToolUse"] == USER["hooks"]["PreToolUse"] and "UserPromptSubmit" in once["hooks"]
    assert add_ours(once, CLAUDE_EVENTS, hs) == once
    moved = add_ours(once, CLAUDE_EVENTS, {e: http_handler("http://10.0.0.5:9000", "claude-code") for e in CLAUDE_EVENTS})
    assert sum(is_ours(h) for g in moved["hooks"]["Stop"] for h in g["hooks"]) == 1
    assert remove_ours(once) == USER and remove_ours(moved) == USER
    assert remove_ours(add_ours({}, CLAUDE_EVENTS, hs)) == {}


def test_is_ours_recognises_only_hivestream_handlers() -> None:
    assert is_ours({"type": "command", "command": "/venv/bin/hivestream hook codex --url http://x"})  # as earlier versions wrote it
    assert is_ours(http_handler("http://h:8787", "claude-code"))
    assert not is_ours({"type": "http", "url": "http://h:8787/v1/hooks/claude-code"})  # the shape of a URL is not a marker
    assert not is_ours({"type": "command", "command": "hivestream-notes sync"})
    assert not is_ours({"type": "http", "url": "http://h/other"})


def test_codex_notify_chains_the_users_program_and_gives_it_back() -> None:
    toml = 'notify = ["notify-send", "codex"]\nmodel = "o3"\n[tui]\nnotify = true\n'
    once = set_notify(toml, "/bin/hivestream", "http://127.0.0.1:8787")
    import tomllib

    argv = tomllib.loads(once)["notify"]
    assert argv[:3] == ["/bin/hivestream", "hook", "codex-notify"] and json.loads(argv[argv.index("--chain") + 1]) == ["notify-send", "codex"]
    assert set_notify(once, "/bin/hivestream", "http://127.0.0.1:8787") == once
    assert tomllib.loads(unset_notify(once)) == tomllib.loads(toml)
    fresh = set_notify("", "/bin/hivestream", "http://u")
    assert "--chain" not in fresh and unset_notify(fresh).strip() == ""


def test_hook_output_says_nothing_or_the_events_additional_context() -> None:
    assert hook_output("UserPromptSubmit") == hook_output(None) == hook_output(["not", "a", "name"]) == {}
    assert hook_output("UserPromptSubmit", "from memory") == {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                                                     "additionalContext": "from memory"}}
    with pytest.raises(ValueError, match="not on 'Stop'"):
        hook_output("Stop", "from memory")  # Claude Code would refuse it


# --- command hook -------------------------------------------------------------------------
def test_stamp_adds_a_time_only_when_missing() -> None:
    stamped = json.loads(stamp(json.dumps(PROMPT).encode(), 123))
    assert stamped["event_time_ms"] == 123
    assert stamp(json.dumps(STOP).encode(), 123) == json.dumps(STOP).encode()
    assert stamp(b"not json", 1) == b"not json"


def test_hook_spool_files_round_trip_and_detect_corruption(tmp_path: Path) -> None:
    p = spool_write(tmp_path, "codex", b'{"a": 1}')
    assert spool_read(p) == ("codex", b'{"a": 1}')
    p.write_bytes(p.read_bytes()[:-1])
    assert spool_read(p) is None
