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


def request(cfg: IngestConfig, sink: MemorySink, method: str, path: str, body: bytes = b"",
            headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """One request to a fresh app over ``sink``: ``(status, parsed JSON answer or text)``."""

    async def go() -> tuple[int, Any]:
        app = IngestApp(cfg, sink, IngestMetrics()).build()
        async with TestClient(TestServer(app)) as client:
            resp = await client.request(method, path, data=body, headers=headers or {})
            raw = await resp.read()
            try:
                return resp.status, orjson.loads(raw)
            except orjson.JSONDecodeError:
                return resp.status, raw.decode("utf-8", "replace")

    return asyncio.run(go())
