"""What ``hivestream serve`` asks of live memory stubs (made by the command line: :class:`hivestream.services.stub_serve.ServeStubs`).

A protocol, so serve depends on no service: the stub projection tells :attr:`StubsAtServe.listener`
its stubs, the hook routes ask :meth:`StubsAtServe.door`, and the nightly refresh runs between
:meth:`StubsAtServe.start` and :meth:`StubsAtServe.stop`.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from hivestream.embedded.stubs import StubListener
from hivestream.ingest.door import Door
from hivestream.ingest.record_sink import RecordSink


class StubsAtServe(Protocol):
    """Live memory stubs in one serve process."""

    @property
    def note(self) -> str:
        """The line serve says about them once listening."""

    @property
    def listener(self) -> StubListener | None:
        """Who the stub projection tells its stubs (``None``: off)."""

    def door(self, topic: str) -> Door | None:
        """The hook routes' door, its records on ``topic`` (``None``: off)."""

    def start(self, sink: RecordSink, topic: str, loop: asyncio.AbstractEventLoop) -> None:
        """Start the nightly refresh, its events to ``sink`` as ``topic`` records through ``loop``."""

    def stop(self) -> None:
        """Stop the nightly refresh and the matcher's threads."""
