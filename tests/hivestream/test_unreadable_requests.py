"""Requests the HTTP parser cannot read: one JSON line, nothing of the request echoed or logged."""

from __future__ import annotations

import asyncio
import json
import logging
import socket

import pytest
from aiohttp import web

from hivestream.ingest.unreadable import quiet_parse_errors

TOKEN = "agenttoken_" + "b" * 24


async def _ok(_request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def _fails(_request: web.Request) -> web.Response:
    raise RuntimeError("a bug")


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("request_bytes", [
    b"GET /api/search?q=x HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer " + TOKEN.encode() + b"x" * 9000 + b"\r\n\r\n",
    b"GET /api/search?q=" + TOKEN.encode() + b"y" * 100_000 + b" HTTP/1.1\r\nHost: h\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: h\r\n" + b"".join(b"X-%d: %s\r\n" % (i, TOKEN.encode()) for i in range(200)) + b"\r\n",
], ids=["long header", "long url", "many headers"])
def test_an_unreadable_request_is_one_json_line_and_its_token_is_nowhere(request_bytes: bytes, caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> tuple[bytes, bytes]:
        app = web.Application()
        app.router.add_get("/api/search", _ok)
        app.router.add_get("/fails", _fails)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        quiet_parse_errors(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            bad = await asyncio.to_thread(_raw, port, request_bytes)
            good = await asyncio.to_thread(_raw, port, b"GET /api/search?q=x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            failed = await asyncio.to_thread(_raw, port, b"GET /fails HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            return bad, good + failed
        finally:
            await runner.cleanup()

    with caplog.at_level(logging.DEBUG):
        bad, others = asyncio.run(go())
    head, _, body = bad.partition(b"\r\n\r\n")
    assert head.split(b" ")[1].startswith(b"4"), head
    assert b"application/json" in head
    answer = json.loads(body)
    assert answer["error"] == "bad_request" and "\n" not in answer["detail"]
    assert TOKEN.encode() not in bad
    assert TOKEN not in caplog.text and "Traceback" not in caplog.text.split("a request handler failed")[0]
    assert b'{"ok": true}' in others  # the server still answers the next connections
    assert b" 500 " in others  # a handler's bug: 500, logged with its traceback
    assert "a request handler failed" in caplog.text
