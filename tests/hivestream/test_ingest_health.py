"""Honest health: ``/healthz`` says not ready whenever a POST would be refused (the spool
too full for one more request, its disk full, a spool write that just failed)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from hivestream.ingest import sink as sink_mod
from hivestream.ingest.sink import DurableSink
from hivestream.ingest.spool import Spool, SpoolFull


def _sink(tmp_path: Path, max_bytes: int, headroom: int) -> DurableSink:
    return DurableSink("unused:9092", Spool(tmp_path / "spool", max_bytes=max_bytes), headroom_bytes=headroom)  # no producer: spooling


def test_ready_while_the_spool_can_take_a_request(tmp_path: Path) -> None:
    ready, body = _sink(tmp_path, 1 << 20, 10_000).health()
    assert ready and body["status"] == "ok"


def test_not_ready_when_the_next_request_would_not_fit_the_spool(tmp_path: Path) -> None:
    sink = _sink(tmp_path, 20_000, 10_000)
    assert asyncio.run(sink.write([("t", b"k", b"v" * 12_000)])) == "spool"
    assert sink.spool.size_bytes < sink.spool.max_bytes  # not "full" by the old measure
    with pytest.raises(SpoolFull):
        asyncio.run(sink.write([("t", b"k", b"v" * 9_000)]))  # a POST would get 503 ...
    ready, body = sink.health()
    assert not ready and body["status"] == "spool_full"  # ... so health says so


def test_not_ready_when_the_disk_is_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sink = _sink(tmp_path, 1 << 30, 10_000)
    monkeypatch.setattr(sink_mod.os, "statvfs", lambda _d: SimpleNamespace(f_bavail=1, f_frsize=4096))
    ready, body = sink.health()
    assert not ready and body["status"] == "disk_full"


def test_not_ready_right_after_a_spool_write_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sink = _sink(tmp_path, 1 << 30, 10_000)

    def enospc(_payloads: list[bytes]) -> None:
        raise OSError(28, os.strerror(28))

    monkeypatch.setattr(sink.spool, "append", enospc)
    with pytest.raises(OSError):
        asyncio.run(sink.write([("t", b"k", b"v")]))
    ready, body = sink.health()
    assert not ready and body["status"] == "spool_error"
