"""The agent API's HTTP routes (aiohttp), mounted beside ``/v1/hooks/*`` on ``serve`` and ``ingest``.

JSON in and out, UTF-8; errors ``{"error": code, "detail": one line}`` with a 4xx status for any
input, ``503`` (with ``Retry-After``) while the projection cannot be read or the log takes nothing:

* ``GET /api/search?q=&agent_id=&limit=`` (agent) → ``{"results": [{id, title, task, resource,
  result, confidence, status, score}]}``; ``include_quarantined=1`` needs the review scope.
* ``POST /api/submit`` (agent) ``{task, resource, result, confidence?, agent_id?, submitted_by?,
  session_key?}`` → ``{"id", "status"}``.
* ``GET /api/content/{id}`` (agent; a reviewer also sees quarantined ones) → the experience; 404 unknown.
* ``POST /api/extract`` (agent) ``{session_key, agent_id?, messages}`` → 202 ``{"request_id"}``;
  409 ``extraction_disabled`` without an extractor.
* ``GET /api/pending?status=pending|quarantined&limit=`` (review) → ``{"results": [...]}``.
* ``POST /api/approve/{id}``, ``POST /api/reject/{id}`` ``{"reason"}`` (review) → ``{"id", "status"}``.
* ``GET /api/memory/search?q=&project=&limit=&scope=project|all`` (agent) → ``{"results": [...]}``.

Authority (:class:`streams.ingest.auth.Scope`): the bearer token's scopes from the tokens file; on a
loopback server without one, the one local user has ``hooks`` and ``agent``, and ``review`` with
serve's per-start review token (its note ``<db>.serve``). No answer or log line holds a token.
Writes are KnowHub event lines put through the same steps as a line posted to
``/v1/hooks/knowhub`` (:func:`streams.ingest.payloads.process`: adapted, redacted, keyed) into the
same sink, so they land on the log every event goes to (serve's hook-event log; ``hook-events``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson
from aiohttp import web

from hivestream.api.agent import LocalAgentApi, caller_of, refusal
from hivestream.ingest.refusal import SinkFull
from hivestream.ingest.server import IngestApp, new_request_id
from hivestream.services.experiences import Caller, ExperienceService, WriteRefused
from hivestream.services.readers import ProjectionReader, ReadUnavailable
from hivestream.services.recall import RecallService
from streams.experiences.settings import ExperienceSettings
from streams.ingest.auth import Grant, Scope
from streams.ingest.payloads import Item, process, request_source
from streams.model.deadletter import Reason

log = logging.getLogger("hivestream.api")

API_GATEWAY = "api"
"""The gateway the agent API's own event lines are stamped with."""
RETRY_AFTER_S = 2
READ_THREADS = 2


class SinkWriter:
    """An :class:`~hivestream.services.experiences.EventWriter` onto an ingest server's sink (serve's
    log, or Kafka ``hook-events`` with the spool behind it), through the steps of ``/v1/hooks/knowhub``."""

    def __init__(self, ingest: IngestApp) -> None:
        self.ingest = ingest

    async def write(self, lines: Sequence[dict[str, Any]]) -> None:
        """See :class:`~hivestream.services.experiences.EventWriter`."""
        received = self.ingest.now_ms()
        items = [Item(i, line, None) for i, line in enumerate(lines)]
        accepted, rejected = process(items, "knowhub", gateway=API_GATEWAY, received_at_ms=received, privacy_mode=self.ingest.cfg.privacy_mode,
                                     source=request_source(API_GATEWAY, "knowhub", new_request_id()))
        if rejected:
            r = rejected[0]
            status = 413 if r.reason == Reason.BODY_TOO_LARGE else 422
            raise WriteRefused(f"{r.reason}: {r.detail}"[:300], code=r.reason, status=status)
        topic = self.ingest.topics.hook_events
        try:
            await self.ingest.sink.write([(topic, a.key, a.value) for a in accepted])
        except SinkFull as e:
            raise WriteRefused(str(e), code=e.reason) from None
        except OSError:
            raise WriteRefused("the event could not be made durable", code=self.ingest.sink.error_reason) from None
        self.ingest.metrics.accept("knowhub", len(accepted))


@dataclass
class ApiParts:
    """What the routes need from the process they are mounted in.

    Attributes:
        kb_reader: the knowledge base projection; frames_reader: the frames projection.
        settings: KnowHub settings (privacy, approval, window, extraction switch).
        wait_applied: serve's wait for its loop (``None`` on the Kafka path).
        review_hint: how a loopback user gets review authority (one line).
    """

    kb_reader: ProjectionReader
    frames_reader: ProjectionReader | None
    settings: ExperienceSettings
    wait_applied: Callable[[float], Awaitable[bool]] | None = None
    review_hint: str = "a token whose tokens-file line has scopes=review"


class AgentRoutes:
    """The ``/api/*`` handlers over one ingest server (its authority check and its sink)."""

    def __init__(self, ingest: IngestApp, parts: ApiParts) -> None:
        self.ingest = ingest
        self.parts = parts
        self.pool = ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="hivestream-api-read")
        run = self._in_pool
        self.experiences = ExperienceService(parts.kb_reader, SinkWriter(ingest), parts.settings, wait_applied=parts.wait_applied,
                                             executor_run=run)
        self.recall = None if parts.frames_reader is None else RecallService(parts.frames_reader, self.experiences, executor_run=run)
        self.agent = LocalAgentApi(self.experiences, self.recall)
        """The in-process :class:`~hivestream.mcp.agent_api.AgentApi` over the same services (what ``/mcp``'s tools call)."""

    async def _in_pool(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    # -- plumbing ------------------------------------------------------------------------------------------

    def _answer(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
        self.ingest.metrics.request(status)
        return web.Response(body=orjson.dumps(body, default=str), status=status, headers=headers, content_type="application/json")

    def _error(self, status: int, code: str, detail: str, headers: dict[str, str] | None = None) -> web.Response:
        self.ingest.metrics.reject(code)
        return self._answer(status, {"error": code, "detail": detail[:500]}, headers)

    def authorize(self, request: web.Request, *need: Scope) -> Grant | web.Response:
        """The request's grant when it holds one of ``need``; else the 401 or 403 answer (one line, no
        token; :meth:`~hivestream.ingest.server.IngestApp.authorize`, with how to get review authority)."""
        hint = self.parts.review_hint if Scope.REVIEW in need and Scope.AGENT not in need else ""
        return self.ingest.authorize(request, *need, hint=hint)

    def authorize_agent(self, request: web.Request) -> Grant | web.Response:
        """:meth:`authorize` for the agent scope (what ``/mcp`` needs)."""
        return self.authorize(request, Scope.AGENT)

    @staticmethod
    def _caller(grant: Grant, *, session: object = None) -> Caller:
        return caller_of(grant, runtime="api", session=session)

    async def _json_body(self, request: web.Request, *, optional: bool = False) -> dict[str, Any] | web.Response:
        limit = self.ingest.cfg.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            return self._error(413, "body_too_large", f"body of {request.content_length} bytes is over the {limit}-byte limit")
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            return self._error(415, "bad_encoding", f"Content-Encoding {encoding[:40]!r}: the agent API takes identity bodies")
        chunks: list[bytes] = []
        total = 0
        try:
            async with asyncio.timeout(self.ingest.cfg.read_timeout_s):
                while chunk := await request.content.read(65_536):
                    total += len(chunk)
                    if total > limit:  # answered without reading the rest (the connection is closed after it)
                        too_large = self._error(413, "body_too_large", f"body is over the {limit}-byte limit")
                        too_large.force_close()
                        return too_large
                    chunks.append(chunk)
        except TimeoutError:
            return self._error(408, "client_timeout", f"body not received within {self.ingest.cfg.read_timeout_s:g} s")
        raw = b"".join(chunks)
        if optional and not raw.strip():
            return {}
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return self._error(400, "not_utf8", f"body is not valid UTF-8 (byte {e.start})")
        try:
            body = json.loads(text)
        except (ValueError, RecursionError) as e:
            return self._error(400, "malformed_json", f"body is not JSON: {str(e)[:200]}")
        if not isinstance(body, dict):
            return self._error(400, "wrong_shape", f"body must be a JSON object, got {type(body).__name__}")
        return body

    async def _guard(self, work: Awaitable[web.Response]) -> web.Response:
        """``work``'s answer; a service's refusal becomes its status (:func:`~hivestream.api.agent.refusal`),
        with ``Retry-After`` on a 503."""
        try:
            return await work
        except Exception as e:
            r = refusal(e)
            if r is None:
                raise
            return self._error(r.status, r.code, r.detail, {"Retry-After": str(RETRY_AFTER_S)} if r.retry else None)

    @staticmethod
    def _query(request: web.Request) -> dict[str, str] | None:
        """The query parameters, or ``None`` when one is not valid UTF-8 once percent-decoded (aiohttp would replace the bytes)."""
        try:
            unquote_to_bytes(request.rel_url.raw_query_string.replace("+", " ")).decode("utf-8")
        except UnicodeDecodeError:
            return None
        return dict(request.query.items())

    def _bad_query(self) -> web.Response:
        return self._error(400, "not_utf8", "a query parameter is not valid UTF-8")

    # -- routes --------------------------------------------------------------------------------------------

    async def search(self, request: web.Request) -> web.Response:
        """``GET /api/search``."""
        grant = self.authorize(request, Scope.AGENT, Scope.REVIEW)
        if isinstance(grant, web.Response):
            return grant
        q = self._query(request)
        if q is None:
            return self._bad_query()

        async def work() -> web.Response:
            hits = await self.experiences.search(q.get("q"), caller=self._caller(grant, session=q.get("session_key")),
                                                 agent_id=q.get("agent_id") or None, limit=q.get("limit"),
                                                 include_quarantined=q.get("include_quarantined", "") in ("1", "true"))
            return self._answer(200, {"results": hits})

        return await self._guard(work())

    async def submit(self, request: web.Request) -> web.Response:
        """``POST /api/submit``."""
        grant = self.authorize(request, Scope.AGENT)
        if isinstance(grant, web.Response):
            return grant
        body = await self._json_body(request)
        if isinstance(body, web.Response):
            return body

        async def work() -> web.Response:
            done = await self.experiences.submit(body, caller=self._caller(grant))
            return self._answer(200, {"id": done.id, "status": done.status})

        return await self._guard(work())

    async def content(self, request: web.Request) -> web.Response:
        """``GET /api/content/{id}``."""
        grant = self.authorize(request, Scope.AGENT, Scope.REVIEW)
        if isinstance(grant, web.Response):
            return grant
        q = self._query(request) or {}

        async def work() -> web.Response:
            rec = await self.experiences.content(request.match_info["id"], caller=self._caller(grant, session=q.get("session_key")))
            return self._answer(200, rec)

        return await self._guard(work())

    async def extract(self, request: web.Request) -> web.Response:
        """``POST /api/extract``."""
        grant = self.authorize(request, Scope.AGENT)
        if isinstance(grant, web.Response):
            return grant
        if not self.parts.settings.extraction_enabled:
            return self._error(409, "extraction_disabled", "this server has no extractor (HIVESTREAM_KB_EXTRACTION_ENABLED is off)")
        body = await self._json_body(request)
        if isinstance(body, web.Response):
            return body

        async def work() -> web.Response:
            return self._answer(202, {"request_id": await self.experiences.extract(body, caller=self._caller(grant))})

        return await self._guard(work())

    async def pending(self, request: web.Request) -> web.Response:
        """``GET /api/pending``."""
        grant = self.authorize(request, Scope.REVIEW)
        if isinstance(grant, web.Response):
            return grant
        q = self._query(request)
        if q is None:
            return self._bad_query()

        async def work() -> web.Response:
            return self._answer(200, {"results": await self.experiences.pending(status=q.get("status") or "pending", limit=q.get("limit"))})

        return await self._guard(work())

    async def _review(self, request: web.Request, decision: str) -> web.Response:
        grant = self.authorize(request, Scope.REVIEW)
        if isinstance(grant, web.Response):
            return grant
        body = await self._json_body(request, optional=True)
        if isinstance(body, web.Response):
            return body

        async def work() -> web.Response:
            given = body.get("reviewer")
            reviewer = given if isinstance(given, str) and given.strip() else grant.gateway_id
            done = await self.experiences.review(request.match_info["id"], decision, reason=body.get("reason", ""), reviewer=reviewer)
            return self._answer(200, done)

        return await self._guard(work())

    async def approve(self, request: web.Request) -> web.Response:
        """``POST /api/approve/{id}``."""
        return await self._review(request, "approved")

    async def reject(self, request: web.Request) -> web.Response:
        """``POST /api/reject/{id}``."""
        return await self._review(request, "rejected")

    async def memory_search(self, request: web.Request) -> web.Response:
        """``GET /api/memory/search``."""
        grant = self.authorize(request, Scope.AGENT)
        if isinstance(grant, web.Response):
            return grant
        q = self._query(request)
        if q is None:
            return self._bad_query()

        async def work() -> web.Response:
            if self.recall is None:
                raise ReadUnavailable("this server has no frames projection to recall from")
            hits = await self.recall.search(q.get("q"), caller=self._caller(grant, session=q.get("session_key")), project=q.get("project"),
                                            limit=q.get("limit"), scope=q.get("scope"))
            return self._answer(200, {"results": hits})

        return await self._guard(work())

    async def _cleanup(self, _app: web.Application) -> None:
        await self.experiences.drain()
        await asyncio.to_thread(self.pool.shutdown, True)

    def mount(self, app: web.Application) -> None:
        """Add the routes to ``app`` (and, at its cleanup, write the telemetry still pending before the sink closes)."""
        app.router.add_get("/api/search", self.search)
        app.router.add_post("/api/submit", self.submit)
        app.router.add_get("/api/content/{id}", self.content)
        app.router.add_post("/api/extract", self.extract)
        app.router.add_get("/api/pending", self.pending)
        app.router.add_post("/api/approve/{id}", self.approve)
        app.router.add_post("/api/reject/{id}", self.reject)
        app.router.add_get("/api/memory/search", self.memory_search)
        app.on_cleanup.append(self._cleanup)


def mounter(parts: ApiParts, on_mounted: Callable[[web.Application, AgentRoutes], None] | None = None) -> Callable[[web.Application, IngestApp], None]:
    """What :func:`hivestream.ingest.server.serve` calls with its application and handlers to add the agent API.

    ``on_mounted(app, routes)`` runs once the routes are on ``app``: an in-process adapter (``/mcp``,
    :func:`hivestream.api.mounts.mount_mcp`) adds its own route there, calls ``routes.agent``
    (:class:`~hivestream.api.agent.LocalAgentApi`) and checks callers with ``routes.authorize``.
    """

    def mount(app: web.Application, ingest: IngestApp) -> None:
        routes = AgentRoutes(ingest, parts)
        routes.mount(app)
        if on_mounted is not None:
            on_mounted(app, routes)

    return mount
