"""The server's answers at the edges of its input, in process over a memory sink:
every refused payload is dead-lettered with its reason and the answer says so (the verdict a
client may drop it on), never a 500."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from hivestream.ingest.metrics import IngestMetrics
from hivestream.ingest.server import IngestApp, IngestConfig
from streams.ingest.auth import TokenTable, parse_tokens
from streams.model.deadletter import DeadLetter
from tests.support.memory_sink import MemorySink, request

PROMPT = {"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "hi", "event_time_ms": 1_790_000_000_000}


def _cfg(tmp_path: Path, **kw: object) -> IngestConfig:
    return IngestConfig(spool_dir=tmp_path / "spool", **kw)  # type: ignore[arg-type]


def _dead(sink: MemorySink) -> list[DeadLetter]:
    return [DeadLetter.model_validate_json(v) for t, _k, v in sink.records if t.endswith("dead-letter")]


def _events(sink: MemorySink) -> list[dict[str, object]]:
    return [json.loads(v) for t, _k, v in sink.records if t.endswith("hook-events")]


def test_a_body_that_is_not_json_is_answered_with_the_dead_letter_verdict(tmp_path: Path) -> None:
    sink = MemorySink()
    status, got = request(_cfg(tmp_path), sink, "POST", "/v1/hooks/claude-code", b"{not json")
    assert status == 400 and got["dead_lettered"] == 1 and got["truncated"] is False and got["error"] == "malformed_json"
    assert [d.reason for d in _dead(sink)] == ["malformed_json"]


def test_rejected_payloads_are_counted_in_the_verdict(tmp_path: Path) -> None:
    sink = MemorySink()
    body = (json.dumps(PROMPT) + "\n" + json.dumps({"hook_event_name": "Nope"}) + "\n").encode()
    status, got = request(_cfg(tmp_path), sink, "POST", "/v1/hooks/claude-code", body)
    assert status == 200 and got["accepted"] == 1 and got["dead_lettered"] == 1 and got["truncated"] is False
    status, got = request(_cfg(tmp_path), sink, "POST", "/v1/hooks/claude-code", b'{"hook_event_name": "Nope"}')
    assert status == 422 and got["dead_lettered"] == 1 and len(_dead(sink)) == 2


def test_a_body_just_under_the_limit_says_its_dead_letter_is_truncated(tmp_path: Path) -> None:
    sink = MemorySink()
    big = json.dumps({**PROMPT, "prompt": "x" * 900_000}).encode()
    status, got = request(_cfg(tmp_path), sink, "POST", "/v1/hooks/claude-code", big)
    assert status == 422 and got["dead_lettered"] == 1 and got["truncated"] is True  # so a client keeps the whole payload
    assert len(_dead(sink)) == 1 and "truncated" in _dead(sink)[0].detail


@pytest.mark.parametrize("runtime", ["claude_code", "nope"])
def test_an_unknown_runtime_is_refused_without_a_verdict(tmp_path: Path, runtime: str) -> None:
    sink = MemorySink()
    status, got = request(_cfg(tmp_path), sink, "POST", f"/v1/hooks/{runtime}", json.dumps(PROMPT).encode())
    assert status == 404 and got["error"] == "unknown_runtime" and not _events(sink)


def _post(tmp_path: Path, body: bytes, runtime: str = "claude-code") -> tuple[MemorySink, int, dict[str, object]]:
    sink = MemorySink()
    status, got = request(_cfg(tmp_path), sink, "POST", f"/v1/hooks/{runtime}", body)
    return sink, status, got


def test_an_unknown_runtime_is_dead_lettered(tmp_path: Path) -> None:
    sink, status, got = _post(tmp_path, json.dumps(PROMPT).encode(), "claude_code")
    assert status == 404 and got["error"] == "unknown_runtime" and got["dead_lettered"] == 1
    assert [(d.reason, d.original()) for d in _dead(sink)] == [("unknown_runtime", json.dumps(PROMPT).encode())]


def test_ndjson_is_split_on_newlines_only(tmp_path: Path) -> None:
    lines = [json.dumps({**PROMPT, "prompt": f"a\u2028b\u2029c\x85d\x1ce {i}"}, ensure_ascii=False) for i in range(2)]
    sink, status, got = _post(tmp_path, ("\n".join(lines) + "\r\n").encode())
    assert status == 200 and got["accepted"] == 2 and got["rejected"] == 0
    assert [r["index"] for r in got["results"]] == [0, 1]  # type: ignore[index]
    assert len(_events(sink)) == 2


BASE = '{"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "hi", '
EXTREMES = [
    BASE + '"event_time_ms": 1790000000000, "n": 1' + "0" * 5000 + "}",  # an integer of thousands of digits anywhere
    BASE + '"event_time_ms": 1e400}', BASE + '"event_time_ms": -1e400}',  # beyond a float
    BASE + '"event_time_ms": 1' + "0" * 30 + "}", BASE + '"timestamp": 1e300}',  # a float, but no time
    BASE + '"event_time_ms": NaN}', BASE + '"event_time_ms": Infinity}',
    BASE + '"event_time_ms": 1790000000000, "s": "\\ud800", "deep": ' + "[" * 900 + '"\\udfff"' + "]" * 900 + "}",
]


@pytest.mark.parametrize("raw", EXTREMES)
def test_number_and_nesting_extremes_are_dead_letters_and_the_good_lines_are_kept(tmp_path: Path, raw: str) -> None:
    body = "\n".join([json.dumps({**PROMPT, "prompt": "first"}), raw, json.dumps({**PROMPT, "prompt": "last"})]).encode()
    sink, status, got = _post(tmp_path, body)
    assert status == 200 and got["accepted"] == 2 and got["rejected"] == 1 and got["dead_lettered"] == 1
    assert [(r["index"], r["status"]) for r in got["results"]] == [(0, "accepted"), (1, "rejected"), (2, "accepted")]  # type: ignore[index]
    assert [d.original() for d in _dead(sink)] == [raw.encode()] and _dead(sink)[0].detail
    sink, status, got = _post(tmp_path, raw.encode())  # alone: a 4xx verdict, never a 500
    assert status in (400, 422) and got["dead_lettered"] == 1 and len(_dead(sink)) == 1


def test_a_malformed_request_logs_one_line_without_a_traceback(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    sink = MemorySink()
    status, got = request(_cfg(tmp_path), sink, "POST", "/v1/hooks/claude-code", b"\x1f\x8b not gzip at all",
                          {"Content-Encoding": "gzip"})
    assert status == 400 and got["error"] == "bad_encoding" and got["dead_lettered"] == 1
    noisy = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not noisy, [r.getMessage() for r in noisy]
    assert len([r for r in caplog.records if r.name.startswith("hivestream")]) == 1


def test_a_refusal_before_the_body_closes_the_connection_without_reading_the_rest(tmp_path: Path) -> None:
    sink = MemorySink()
    cfg = _cfg(tmp_path, tokens=TokenTable(parse_tokens("gw-1 edge-token-0123456789abcdef\n")))
    compressed = gzip.compress(b"[" + b"0," * 2_000_000 + b"0]")

    async def go() -> tuple[bytes, bytes]:
        app = IngestApp(cfg, sink, IngestMetrics()).build()
        async with TestServer(app) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            head = (f"POST /v1/hooks/claude-code HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
                    f"Content-Length: {len(compressed)}\r\n\r\n").encode()
            writer.write(head + compressed[:1000])
            await writer.drain()
            answer = await reader.readuntil(b"\r\n\r\n")
            try:  # the rest of the body and a second request on the same connection: never read, never answered
                writer.write(compressed[1000:] + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                await writer.drain()
            except ConnectionError:
                pass
            try:  # a guard, not a timing: the fixed server closes at once, the old one kept the connection open
                rest = await asyncio.wait_for(reader.read(), 60)
            except ConnectionError:
                rest = b""
            except TimeoutError:
                rest = b"still open"
            writer.close()
            return answer, rest

    answer, rest = asyncio.run(go())
    assert answer.startswith(b"HTTP/1.1 401") and b"Connection: close" in answer
    assert b"HTTP/1.1 200" not in rest and rest != b"still open" and not sink.records


@pytest.mark.parametrize(("encoding", "body", "status"), [
    ("deflate", b"\x00\x01", 400),  # aiohttp's parser used to answer this with plain text and a traceback
    ("br", b"\x0b\x02\x80hello\x03", 400),  # so did any br body (no Brotli package)
    ("x-unknown", b"{}", 400),
    ("deflate", None, 200),  # zlib-wrapped deflate (RFC 9110) decodes
    ("deflate-raw", None, 200),  # raw deflate, as some clients send it under "deflate"
])
def test_every_content_encoding_is_a_verdict_after_the_token(tmp_path: Path, caplog: pytest.LogCaptureFixture, encoding: str,
                                                               body: bytes | None, status: int) -> None:
    import zlib

    caplog.set_level(logging.INFO)
    payload = json.dumps(PROMPT).encode()
    if body is None:
        c = zlib.compressobj(wbits=-zlib.MAX_WBITS if encoding == "deflate-raw" else zlib.MAX_WBITS)
        body, encoding = c.compress(payload) + c.flush(), "deflate"
    sink = MemorySink()
    cfg = _cfg(tmp_path, tokens=TokenTable(parse_tokens("gw-1 edge-token-0123456789abcdef\n")))
    got_status, _ = request(cfg, sink, "POST", "/v1/hooks/claude-code", body, {"Content-Encoding": encoding})
    assert got_status == 401 and not sink.records  # without the token: refused before the body is decoded
    got_status, got = request(cfg, sink, "POST", "/v1/hooks/claude-code", body,
                              {"Content-Encoding": encoding, "Authorization": "Bearer edge-token-0123456789abcdef"})
    assert got_status == status, got
    if status == 400:
        assert got["error"] == "bad_encoding" and got["dead_lettered"] == 1 and len(_dead(sink)) == 1
    else:
        assert got["accepted"] == 1
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
