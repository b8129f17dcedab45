"""An in-memory :class:`~hivestream.ingest.record_sink.RecordSink` and a one-call way to post to an
:class:`~hivestream.ingest.server.IngestApp` over it (no broker, no port held after the call)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp.test_utils import TestClient, TestServer

from hivestream.ingest.metrics import IngestMetrics
from hivestream.ingest.record_sink import Gauge, Record
from hivestream.ingest.server import IngestApp, IngestConfig


class MemorySink:
    """Keeps every written record in :attr:`records`; ``ready`` is what :meth:`health` says."""

    error_reason = "spool_error"

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.ready = True

    async def write(self, records: list[Record]) -> str:
        """Append ``records``; returns ``"spool"``."""
        self.records += records
        return "spool"

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``(ready, {"status": ...})``."""
        return self.ready, {"status": "ok" if self.ready else "full"}

    def gauges(self) -> list[Gauge]:
        """No gauges."""
        return []

    def startup_note(self) -> str | None:
        """Nothing to say."""
        return None

    async def background(self) -> None:
        """No background work."""

    async def close(self) -> None:
        """Nothing to release."""


Req = tuple[str, str, bytes, dict[str, str]]
"""(method, path, body, headers) of one request."""


def requests(cfg: IngestConfig, sink: MemorySink, reqs: list[Req]) -> list[tuple[int, Any]]:
    """``reqs`` in order to one fresh app over ``sink``: ``(status, parsed JSON answer or text)`` each."""

    async def go() -> list[tuple[int, Any]]:
        app = IngestApp(cfg, sink, IngestMetrics()).build()
        out: list[tuple[int, Any]] = []
        async with TestClient(TestServer(app)) as client:
            for method, path, body, headers in reqs:
                resp = await client.request(method, path, data=body, headers=headers)
                raw = await resp.read()
                try:
                    out.append((resp.status, orjson.loads(raw)))
                except orjson.JSONDecodeError:
                    out.append((resp.status, raw.decode("utf-8", "replace")))
        return out

    return asyncio.run(go())


def request(cfg: IngestConfig, sink: MemorySink, method: str, path: str, body: bytes = b"",
            headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """One request to a fresh app over ``sink``: ``(status, parsed JSON answer or text)``."""
    return requests(cfg, sink, [(method, path, body, headers or {})])[0]
