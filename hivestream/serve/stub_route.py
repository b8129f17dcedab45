"""``POST /v1/stub-events`` on ``hivestream serve``'s ingest listener: memory-stub events onto serve's log.

The body is one stub event, a JSON array of them or NDJSON (:mod:`hivestream.serve.stub_payloads`).
Taken in like a hook post (:meth:`hivestream.ingest.server.IngestApp.take`: the bearer token, the
body limit and read timeout, ``400`` and a dead letter for a body that does not read), each event
becomes a ``stub-events`` record of the log (:data:`streams.ingest.hook_log.STUB_EVENTS`) and is
folded by the stub projection into the same DuckDB file
(:class:`hivestream.embedded.stubs.StubLogRunner`), as ``hivestream run LOGDIR`` folds it. A
stub write (upsert, refresh, delete) needs the ``review`` scope (a tokens-file line with
``scopes=review``, or serve's per-start review token from its note ``<db>.serve`` on loopback:
``hivestream stubs import --db FILE`` sends it); a message embedding or a recorded match needs
``hooks``. Without them: ``403`` and nothing is written. Answers as the hook routes do: ``200``
once every accepted event is fsync'd, one result per event; ``422`` when every event was refused
(each dead-lettered with its reason); ``503`` when the log is full or failing.
"""

from __future__ import annotations

from aiohttp import web

from hivestream.ingest.server import IngestApp
from hivestream.serve.stub_payloads import ROUTE, process_stub_items

PATH = "/v1/stub-events"
"""The route's path."""


class ServeApp(IngestApp):
    """The ingest handlers of ``serve``: the hook routes and :data:`PATH`."""

    async def stub_events(self, request: web.Request) -> web.Response:
        """``POST /v1/stub-events`` (see the module docstring)."""
        taken = await self.take(request, ROUTE)
        if isinstance(taken, web.Response):
            return taken
        accepted, rejected = process_stub_items(taken.items, source=taken.source, received_at_ms=taken.received_ms)
        return await self.commit(request, taken, ROUTE, self.topics.stub_events, accepted, rejected)

    def build(self) -> web.Application:
        """The ingest application with the stub route."""
        app = super().build()
        app.router.add_post(PATH, self.stub_events)
        return app
