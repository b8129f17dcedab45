"""``hivestream ingest``: the HTTP server every gateway and agent posts its hook events to.

Framework: aiohttp (already a dependency through faust; asyncio-native, streaming request bodies
so the size limit and the slow-client timeout apply while reading). Routes:

* ``POST /v1/hooks/{runtime}``: one JSON payload, a JSON array or NDJSON
  (:mod:`streams.ingest.payloads`). Answers ``200`` when every accepted payload is durable (broker
  acknowledgement or fsync'd spool) with one result per payload; ``422`` when every payload was
  rejected; ``400`` for a body that is not JSON (dead-lettered); ``404`` for an unknown runtime
  (the body is dead-lettered too, ``unknown_runtime``); ``403`` when the token lacks a scope a
  payload needs (:func:`streams.ingest.payloads.scope_needed`: an ``experience-reviewed`` event
  needs ``review``), and then nothing of the request is written. Every answer after a dead letter
  was written says ``"dead_lettered": N`` and ``"truncated"`` (true when a dead letter keeps only
  the first 256 KiB of its payload): the verdict :mod:`hivestream.hooks.delivery` lets a client
  drop a refused payload on; ``401`` without a valid token; ``408`` when the body does not arrive within the read timeout;
  ``413`` over ``max_body_bytes``; ``503`` with ``Retry-After`` when the broker did not take the
  records and the spool is full or failing (nothing was promised, so the client keeps them).
  The ``200`` to a runtime's own ``http`` hook (a request carrying
  :data:`~streams.ingest.hook_output.RUNTIME_HOOK_HEADER`) is its hook output instead of the
  verdict (:func:`~streams.ingest.hook_output.hook_output`).
* ``GET /healthz``: ``200 {"status": "ok", ...}``; ``503`` whenever a POST would be refused
  (``spool_full``, ``disk_full``, ``spool_error``: see :meth:`DurableSink.health`).
* ``GET /metrics``: Prometheus text (:mod:`hivestream.ingest.metrics`); with ``metrics_auth``
  only for a bearer token of the tokens file.
* what ``mount`` adds: the agent API ``/api/*`` and ``/mcp`` (:mod:`hivestream.api.mounts`), each
  route checked by :meth:`IngestApp.authorize` (``401`` without a valid token, ``403`` without the
  scope it needs; a loopback server without tokens lets its one local user post hooks and use the agent API).

Tokens are never logged; the access log is off unless asked for. The event loop is uvloop's (libuv)
when it is installed (a dependency), and answers are serialised by orjson. ``reuse_port`` lets
several server processes listen on one port (``SO_REUSEPORT``; the kernel spreads connections),
each with its own spool directory.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import signal
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from hivestream.ingest.door import Door
from hivestream.ingest.metrics import CONTENT_TYPE, IngestMetrics
from hivestream.ingest.record_sink import Record, RecordSink
from hivestream.ingest.refusal import SinkFull
from hivestream.ingest.repeats import RepeatedLines
from hivestream.ingest.sink import DurableSink
from hivestream.ingest.spool import Spool, default_spool_dir
from hivestream.ingest.unreadable import quiet_parse_errors
from streams.ingest.auth import LOCAL_SCOPES, Grant, Scope, TokenTable, bearer_digest, is_loopback
from streams.ingest.content_encoding import BadEncoding, DecodedTooLarge, decode_body
from streams.ingest.hook_output import RUNTIME_HOOK_HEADER, hook_output
from streams.ingest.payloads import ROUTE_RUNTIMES, Accepted, Item, Rejected, body_dead_letter, process, request_source, split_body
from streams.kafka.connection import DEFAULT_BOOTSTRAP, ConnectionLike
from streams.kafka.topics import Topics
from streams.model.clock import wall_clock_ms
from streams.model.deadletter import MAX_ORIGINAL_BYTES, DeadLetter, Reason, RejectedInput
from streams.redaction.redact import RedactionMode

log = logging.getLogger("hivestream.ingest")
LOCAL_GATEWAY = "local"
"""Gateway id of requests on a loopback server started without tokens."""
LOCAL_REVIEW_SCOPES = LOCAL_SCOPES | {Scope.REVIEW}
"""The scopes of a request bearing :attr:`IngestConfig.review_token`."""


@dataclass
class IngestConfig:
    """Settings of one ingest server.

    Attributes:
        host, port: where to listen (default loopback 127.0.0.1:8787).
        tokens: the token table (empty: loopback only, every request is gateway ``local``).
        connection: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
        namespace: topic namespace.
        partitions: partition count of topics created at start.
        replication_factor, min_insync_replicas: of the topics created at start (None: the broker's defaults).
        spool_dir: the durable spool directory (one process each; default :func:`~hivestream.ingest.spool.default_spool_dir`).
        spool_max_bytes: bound of the spool (bytes).
        max_body_bytes: largest request body (bytes; larger: 413).
        read_timeout_s: time allowed to receive a whole body (seconds; slower: 408).
        produce_timeout_s: time a request waits for the broker before spooling (seconds).
        privacy_mode: KnowHub redaction before the topic.
        retry_after_s: the ``Retry-After`` of a 503 (seconds).
        access_log: log one line per request (never the Authorization header).
        reuse_port: bind with ``SO_REUSEPORT`` so several processes share ``port`` (Linux, BSD).
        metrics_auth: ``GET /metrics`` needs a bearer token of ``tokens`` too (401 without).
        review_token: on a server without ``tokens`` (loopback), a bearer of this token may also
            post ``experience-reviewed`` events (serve makes one per start for ``kb approve``);
            ignored when ``tokens`` is not empty (the tokens file's scopes decide there).
    """

    host: str = "127.0.0.1"
    port: int = 8787
    tokens: TokenTable = field(default_factory=lambda: TokenTable([]))
    connection: ConnectionLike = DEFAULT_BOOTSTRAP
    namespace: str = "hivestream"
    partitions: int = 4
    replication_factor: int | None = None
    min_insync_replicas: int | None = None
    spool_dir: Path = field(default_factory=default_spool_dir)
    spool_max_bytes: int = 1 << 30
    max_body_bytes: int = 1 << 20
    read_timeout_s: float = 10.0
    produce_timeout_s: float = 5.0
    privacy_mode: RedactionMode = RedactionMode.STRICT
    retry_after_s: int = 5
    access_log: bool = False
    reuse_port: bool = False
    metrics_auth: bool = False
    review_token: str | None = None


@dataclass(frozen=True)
class Taken:
    """A posting request taken in (:meth:`IngestApp.take`): who posted, its dead letters' ``source``,
    its payloads and when it was received (epoch ms)."""

    grant: Grant
    source: str
    items: list[Item]
    received_ms: int


class ConfigError(ValueError):
    """A configuration the server refuses to start with (e.g. a public bind without tokens)."""


def check_bind(cfg: IngestConfig) -> None:
    """Refuse a non-loopback bind without tokens.

    Raises:
        ConfigError: when ``cfg.host`` is not loopback, or ``cfg.metrics_auth`` is set, and no
            token is configured.
    """
    if not is_loopback(cfg.host) and len(cfg.tokens) == 0:
        raise ConfigError(f"refusing to listen on {cfg.host}: a non-loopback address needs --tokens-file (HIVESTREAM_INGEST_TOKENS_FILE)")
    if cfg.metrics_auth and len(cfg.tokens) == 0:
        raise ConfigError("--metrics-auth needs --tokens-file (HIVESTREAM_INGEST_TOKENS_FILE): /metrics takes the gateways' tokens")


class _TooLarge(Exception):
    pass


async def _read_body(request: web.Request, limit: int) -> bytes:
    """The request's body, at most ``limit`` bytes on the wire and once decoded
    (:func:`streams.ingest.content_encoding.decode_body`; aiohttp's own decompression is off, see
    :meth:`IngestApp.build`).

    Raises:
        _TooLarge: over ``limit`` raw or decoded.
        BadEncoding: a ``Content-Encoding`` this server does not decode, or a body that does not decode.
    """
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = await request.content.read(65_536)
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise _TooLarge
        chunks.append(chunk)
    try:
        return decode_body(b"".join(chunks), request.headers.get("Content-Encoding", ""), limit)
    except DecodedTooLarge:
        raise _TooLarge from None


def new_request_id() -> str:
    """A fresh id for one request (a random UUID, 32 hex digits): the part of its dead letters'
    ``source`` that no other request shares (:func:`streams.ingest.payloads.request_source`)."""
    return uuid.uuid4().hex


class IngestApp:
    """The request handlers around one :class:`~hivestream.ingest.record_sink.RecordSink` (``ingest``: the
    Kafka sink; ``serve``: the local hook-event log); given ``door``
    (:class:`~hivestream.ingest.door.Door`), a Claude Code or Codex prompt is matched against the
    memory stubs (:class:`~hivestream.services.stub_door.StubDoor`): its ``stub-events`` records are
    made durable with the hook's, and the answer carries the context (the hook output's
    ``additionalContext`` for a runtime's own hook, ``"additional_context"`` in the verdict for the command hook)."""

    def __init__(self, cfg: IngestConfig, sink: RecordSink, metrics: IngestMetrics, now_ms: Callable[[], int] = wall_clock_ms,
                 door: Door | None = None) -> None:
        self.cfg = cfg
        self.door = door
        self.sink = sink
        self.metrics = metrics
        self.now_ms = now_ms
        self.topics = Topics(cfg.namespace)
        self._hook_events = self.topics.hook_events
        self._no_tokens = len(cfg.tokens) == 0
        self._review_digest = bearer_digest(f"Bearer {cfg.review_token}") if cfg.review_token and self._no_tokens else None
        self.failures = RepeatedLines(log)  # a failing disk fails every request: one line per interval, /metrics counts each

    def _answer(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
        self.metrics.request(status)
        return web.Response(body=orjson.dumps(body), status=status, headers=headers, content_type="application/json")

    def _reject(self, status: int, reason: str, detail: str, headers: dict[str, str] | None = None) -> web.Response:
        self.metrics.reject(reason)
        return self._answer(status, {"error": reason, "detail": detail}, headers)

    @staticmethod
    async def _unread(request: web.Request, resp: web.Response) -> web.Response:
        """Send ``resp`` and close the connection without reading (or inflating) what is left of
        the body: aiohttp would otherwise drain it after the answer, for up to 10 s per request."""
        resp.force_close()
        await resp.prepare(request)
        await resp.write_eof()
        if request.protocol is not None:
            request.protocol.force_close()
        return resp

    def _dead_lettered(self, status: int, err: RejectedInput, original_len: int, source: str) -> web.Response:
        """The verdict on a whole body that was dead-lettered (as ``source``): the reason, ``"dead_lettered": 1``
        and ``"truncated"`` (true when the dead letter keeps only the first
        :data:`~streams.model.deadletter.MAX_ORIGINAL_BYTES` of the body, so a client keeps it)."""
        self.metrics.reject(str(err.reason))
        log.info("refused a request (HTTP %d, dead-lettered as %s): %s: %s", status, source, err.reason, err.detail[:200])
        return self._answer(status, {"error": str(err.reason), "detail": err.detail[:500], "dead_lettered": 1,
                                     "truncated": original_len > MAX_ORIGINAL_BYTES})

    def grant(self, request: web.Request) -> Grant | None:
        """Who ``request`` is and what it may do (the tokens file's line of its bearer token); on a
        loopback server without tokens the one local user (:data:`~streams.ingest.auth.LOCAL_SCOPES`,
        and review with serve's review token); ``None`` for a missing or unknown token."""
        header = request.headers.get("Authorization")
        if not self._no_tokens:
            return self.cfg.tokens.grant_for(header)
        if self._review_digest is not None and hmac.compare_digest(bearer_digest(header) or b"", self._review_digest):
            return Grant(LOCAL_GATEWAY, LOCAL_REVIEW_SCOPES)
        return Grant(LOCAL_GATEWAY, LOCAL_SCOPES)

    def authorize(self, request: web.Request, *need: Scope, hint: str = "") -> Grant | web.Response:
        """The request's grant when it holds one of ``need`` (the agent API's routes and ``/mcp``);
        else the ``401`` (no or unknown token) or ``403`` to answer: one line naming the path, the
        scope it needs (and ``hint``: how to get it) and the scopes the token has, never the token."""
        grant = self.grant(request)
        if grant is None:
            return self._reject(401, "unauthorized", "missing or unknown bearer token", {"WWW-Authenticate": 'Bearer realm="hivestream"'})
        if set(need) & grant.scopes:
            return grant
        has = ", ".join(sorted(grant.scopes)) or "none"
        want = " or ".join(s.value for s in need)
        log.info("refused %s %s (HTTP 403): gateway %s lacks the %s scope", request.method, request.path, grant.gateway_id, want)
        return self._reject(403, "forbidden", f"{request.path} needs the {want} scope{f' ({hint})' if hint else ''}; the token of gateway "
                                              f"{grant.gateway_id!r} has: {has}")

    def _forbidden(self, grant: Grant, missing: set[Scope]) -> web.Response:
        """``403``: the request's token lacks ``missing``; one line saying which authority would do."""
        has = ", ".join(sorted(grant.scopes)) or "none"
        if Scope.REVIEW in missing:
            if not self._no_tokens:
                how = f"a token whose tokens-file line ends in scopes=review (the token of gateway {grant.gateway_id!r} has: {has})"
            elif self._review_digest is not None:
                how = "serve's review token (`hivestream kb approve|reject --db FILE` and `hivestream stubs import --db FILE` send it)"
            else:
                how = "a token whose tokens-file line ends in scopes=review (start with --tokens-file), or `hivestream kb approve|reject --kafka`"
            need = "experience-reviewed events and stub writes need review authority: " + how
        else:
            need = f"these events need a token with the {', '.join(sorted(missing))} scope (the token of gateway {grant.gateway_id!r} has: {has})"
        log.info("refused a request (HTTP 403): gateway %s lacks the %s scope", grant.gateway_id, ", ".join(sorted(missing)))
        return self._reject(403, "forbidden", need + "; nothing of this request was written")

    def _dl_record(self, dl: DeadLetter) -> Record:
        key = f"{dl.source}:{dl.time_ms}:{dl.offset}".encode()
        return (self.topics.dead_letter, key, dl.model_dump_json().encode())

    async def _durable(self, records: list[Record]) -> tuple[str | None, web.Response | None]:
        retry = {"Retry-After": str(self.cfg.retry_after_s)}
        try:
            return await self.sink.write(records), None
        except SinkFull as e:
            return None, self._reject(503, e.reason, str(e), retry)
        except OSError as e:
            self.failures.log(f"write failed (answered 503 {self.sink.error_reason}): {e}")
            return None, self._reject(503, self.sink.error_reason, "the records could not be made durable", retry)

    async def hooks(self, request: web.Request) -> web.Response:
        """``POST /v1/hooks/{runtime}``."""
        runtime = request.match_info["runtime"]
        known = runtime in ROUTE_RUNTIMES
        if not known:
            runtime = runtime[:64]
        taken = await self.take(request, runtime, None if known else
                                RejectedInput(Reason.UNKNOWN_RUNTIME, f"runtime {runtime!r} is not one of {', '.join(ROUTE_RUNTIMES)}"))
        if isinstance(taken, web.Response):
            return taken
        accepted, rejected = process(taken.items, runtime, gateway=taken.grant.gateway_id, received_at_ms=taken.received_ms,
                                     privacy_mode=self.cfg.privacy_mode, source=taken.source)
        return await self.commit(request, taken, runtime, self._hook_events, accepted, rejected)

    async def take(self, request: web.Request, route: str, refuse: RejectedInput | None = None) -> Taken | web.Response:
        """Authenticate a posting request, read its body and split it into payloads (:func:`split_body`).

        Args:
            request: the request.
            route: what its dead letters' ``source`` names (the runtime, or another route's name).
            refuse: a refusal of the whole body (an unknown runtime: ``404``) made before it is split.

        Returns:
            What was taken, or the answer already given: ``401`` without a valid token, ``413`` over
            the body limit, ``408`` past the read timeout, ``400`` (dead-lettered) for a body that does
            not decode or split, ``404`` (dead-lettered) with ``refuse``, ``503`` when a dead letter cannot be made durable.
        """
        grant = self.grant(request)
        if grant is None:
            return await self._unread(request, self._reject(401, "unauthorized", "missing or unknown bearer token",
                                                            {"WWW-Authenticate": 'Bearer realm="hivestream"'}))
        source = request_source(grant.gateway_id, route, new_request_id())
        limit = self.cfg.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            return await self._unread(request, self._reject(413, "body_too_large",
                                                            f"body of {request.content_length} bytes is over the {limit}-byte limit"))
        try:
            if request.content.is_eof():  # the whole body is already buffered: reading cannot wait
                body = await _read_body(request, limit)
            else:
                async with asyncio.timeout(self.cfg.read_timeout_s):
                    body = await _read_body(request, limit)
        except _TooLarge:
            return await self._unread(request, self._reject(413, "body_too_large", f"body is over the {limit}-byte limit"))
        except TimeoutError:
            return await self._unread(request, self._reject(408, "client_timeout", f"body not received within {self.cfg.read_timeout_s:g} s"))
        except (web.RequestPayloadError, web.HTTPException, zlib.error, BadEncoding) as e:
            # a Content-Encoding the server does not decode, or a body that does not decode with it: 400 and a dead letter
            encoding = request.headers.get("Content-Encoding", "")
            why = str(e) if isinstance(e, BadEncoding) else type(e).__name__
            err = RejectedInput(Reason.BAD_ENCODING, f"body not readable as Content-Encoding {encoding!r}: {why}"[:300])
            dl = body_dead_letter(err, b"", source=source, received_at_ms=self.now_ms())
            _where, failed = await self._durable([self._dl_record(dl)])
            return await self._unread(request, failed if failed is not None else self._dead_lettered(400, err, 0, source))
        received = self.now_ms()
        try:
            if refuse is not None:
                raise refuse
            items = split_body(body)
        except Exception as exc:  # bad input is a dead letter, never a 500
            refusal = exc if isinstance(exc, RejectedInput) else RejectedInput(Reason.PROCESSING_ERROR, f"{type(exc).__name__}: {exc}"[:500])
            if not isinstance(exc, RejectedInput):
                log.warning("%s body from %s could not be split (dead-lettered): %s", route, grant.gateway_id, refusal.detail,
                            exc_info=log.isEnabledFor(logging.DEBUG))
            dl = body_dead_letter(refusal, body, source=source, received_at_ms=received)
            _where, failed = await self._durable([self._dl_record(dl)])
            if failed is not None:
                return failed
            return self._dead_lettered(404 if refuse is not None else 400, refusal, len(body), source)
        return Taken(grant, source, items, received)

    async def commit(self, request: web.Request, taken: Taken, route: str, topic: str, accepted: list[Accepted],
                     rejected: list[Rejected]) -> web.Response:
        """Make the accepted payloads (as records of ``topic``) and the rejected ones' dead letters durable
        together, and answer: ``403`` (nothing written) when the token lacks a scope an accepted payload
        needs, ``503`` when the sink refuses, else ``200`` with one result per payload (``422`` when every
        payload was rejected); a runtime's own hook (:data:`RUNTIME_HOOK_HEADER`) gets its hook output instead."""
        grant, items, received = taken.grant, taken.items, taken.received_ms
        missing = {a.scope for a in accepted} - grant.scopes
        if missing:
            return self._forbidden(grant, missing)
        records: list[Record] = [(topic, a.key, a.value) for a in accepted]
        if rejected:
            records += [self._dl_record(r.dead_letter) for r in rejected]
        context = None
        if self.door is not None and topic == self._hook_events and accepted and not rejected:
            door = await self.door.answer_hook(route, [it.value for it in items], received)
            if door is not None:
                records += door.records
                context = door.context
        where, failed = await self._durable(records)
        if failed is not None:
            return failed
        if accepted:
            self.metrics.accept(route, len(accepted))
        for r in rejected:
            self.metrics.reject(r.reason)
        results: list[dict[str, Any]] = [{"index": a.index, "status": "accepted", "event_id": a.event_id} for a in accepted]
        if rejected:
            results += [{"index": r.index, "status": "rejected", "reason": r.reason, "detail": r.detail} for r in rejected]
            results.sort(key=lambda x: int(x["index"]))
        status = 422 if rejected and not accepted else 200
        if status == 200 and RUNTIME_HOOK_HEADER in request.headers:  # the runtime's hook: its hook output, not the verdict
            return self._answer(status, hook_output(_event_name(items), context))
        refused = {r.index for r in rejected}
        truncated = any(len(it.original) > MAX_ORIGINAL_BYTES for it in items if it.index in refused)
        verdict = {"accepted": len(accepted), "rejected": len(rejected), "dead_lettered": len(rejected), "truncated": truncated, "durable": where,
                   "gateway": grant.gateway_id, "received_at_ms": received, "results": results}
        if context is not None:
            verdict["additional_context"] = context
        return self._answer(status, verdict)

    async def stub_match(self, request: web.Request) -> web.Response:
        """``POST /api/stubs/match`` (agent scope; open on a loopback server without tokens): a prompt's memory-stub
        context for the OpenClaw plugin's ``before_prompt_build``, ``{"prependContext": TEXT}`` (``""`` when none,
        and ``"why_none"``); the match's stub events are made durable first. ``409 stubs_live_off`` without a stub
        door; ``400`` for a bad body; ``503`` when the events cannot be made durable."""
        grant = self.grant(request)
        if grant is None:
            return self._reject(401, "unauthorized", "missing or unknown bearer token", {"WWW-Authenticate": 'Bearer realm="hivestream"'})
        if Scope.AGENT not in grant.scopes:
            return self._reject(403, "forbidden", f"stub matching needs a token with the agent scope (gateway {grant.gateway_id!r} has not)")
        if self.door is None:
            return self._reject(409, "stubs_live_off", "this server matches no memory stubs (serve without --no-stubs-live, with an embedder)")
        try:
            async with asyncio.timeout(self.cfg.read_timeout_s):
                body = await _read_body(request, min(self.cfg.max_body_bytes, 256 << 10))
            doc = orjson.loads(body)
        except _TooLarge:
            return await self._unread(request, self._reject(413, "body_too_large", "a match request is at most 256 KiB"))
        except TimeoutError:
            return await self._unread(request, self._reject(408, "client_timeout", f"body not received within {self.cfg.read_timeout_s:g} s"))
        except (orjson.JSONDecodeError, web.HTTPException, zlib.error, BadEncoding) as e:
            return self._reject(400, "bad_request", f"the body is no JSON: {type(e).__name__}")
        prompt = self.door.prompt_of_match(doc, self.now_ms())
        if isinstance(prompt, str):
            return self._reject(400, "bad_request", prompt)
        got = await self.door.answer(prompt)
        if got.records:
            _where, failed = await self._durable(got.records)
            if failed is not None:
                return failed
        out: dict[str, Any] = {"prependContext": got.context or ""}
        if got.context is None:
            out["why_none"] = got.why_none
        return self._answer(200, out)

    async def healthz(self, _request: web.Request) -> web.Response:
        """``GET /healthz``: 200 while the server can promise durability; 503 when the sink would refuse a POST.
        With a stub door, ``"stubs"`` holds its counts (prompts, injected, failed open, archives skipped, stubs of another model)."""
        ready, body = self.sink.health()
        if self.door is not None:
            body = {**body, "stubs": self.door.stats()}
        return web.Response(body=orjson.dumps(body), status=200 if ready else 503, content_type="application/json")

    async def metrics_text(self, request: web.Request) -> web.Response:
        """``GET /metrics``: Prometheus text format (401 without a gateway's token when ``metrics_auth``)."""
        if self.cfg.metrics_auth and self.cfg.tokens.gateway_for(request.headers.get("Authorization")) is None:
            return self._reject(401, "unauthorized", "missing or unknown bearer token", {"WWW-Authenticate": 'Bearer realm="hivestream"'})
        return web.Response(body=self.metrics.render(self.sink), headers={"Content-Type": CONTENT_TYPE})

    def build(self) -> web.Application:
        """The aiohttp application (client_max_size is the body limit: bodies are read as streams)."""
        app = web.Application(client_max_size=self.cfg.max_body_bytes, handler_args={"auto_decompress": False})  # see _read_body
        app.router.add_post("/v1/hooks/{runtime}", self.hooks)
        app.router.add_post("/api/stubs/match", self.stub_match)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/metrics", self.metrics_text)
        return app


def _event_name(items: list[Item]) -> object:
    """The ``hook_event_name`` of a one-payload body (a runtime's hook posts one), else ``None``."""
    if len(items) == 1 and isinstance(items[0].value, dict):
        return items[0].value.get("hook_event_name")
    return None


def make_sink(cfg: IngestConfig, metrics: IngestMetrics) -> DurableSink:
    """The server's sink: the spool in ``cfg.spool_dir`` and a producer on ``cfg.connection``.

    Raises:
        hivestream.ingest.spool.SpoolInUse: another process serves from that spool directory.
        OSError: when the spool directory cannot be opened.
    """
    spool = Spool(cfg.spool_dir, max_bytes=cfg.spool_max_bytes, lock=True)
    return DurableSink(cfg.connection, spool, produce_timeout_s=cfg.produce_timeout_s,
                       topic_specs=Topics(cfg.namespace).specs(cfg.partitions), replication_factor=cfg.replication_factor,
                       min_insync_replicas=cfg.min_insync_replicas, on_produce_latency=metrics.latency.observe,
                       headroom_bytes=2 * cfg.max_body_bytes + (64 << 10))


async def serve(cfg: IngestConfig, stop: asyncio.Event, on_ready: Callable[[int], None] | None = None,
                sink: RecordSink | None = None, name: str = "ingest", app: type[IngestApp] = IngestApp,
                mount: Callable[[web.Application, IngestApp], None] | None = None, door: Door | None = None) -> None:
    """Run the server until ``stop`` is set; then stop accepting and close the sink (flush and seal the spool).

    Args:
        cfg: the settings (checked by :func:`check_bind`).
        stop: set it to shut down.
        on_ready: called with the bound port once listening.
        sink: where accepted records go (default :func:`make_sink`'s Kafka sink; ``serve``
            passes its local log); closed when the server stops.
        name: the command's name in log lines.
        app: the request handlers' class (``serve`` passes :class:`IngestApp` with its own routes added).
        mount: adds more routes to the application (the agent API and ``/mcp``, :func:`hivestream.api.routes.mounter`).
        door: the memory stubs' front door (``None``: prompts are not matched).

    Raises:
        ConfigError: a non-loopback bind without tokens.
        OSError: the address is in use or the spool cannot be opened.
    """
    check_bind(cfg)
    metrics = IngestMetrics()
    if sink is None:
        sink = make_sink(cfg, metrics)
    note = sink.startup_note()
    if note:
        log.info("%s", note)
    handlers = app(cfg, sink, metrics, door=door)
    application = handlers.build()
    if mount is not None:
        mount(application, handlers)
    runner = web.AppRunner(application, access_log=log if cfg.access_log else None)
    await runner.setup()
    quiet_parse_errors(runner)
    site = web.TCPSite(runner, cfg.host, cfg.port, backlog=1024, reuse_port=cfg.reuse_port or None)
    await site.start()
    forwarder = asyncio.get_running_loop().create_task(sink.background())
    try:
        port = cfg.port
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            port = server.sockets[0].getsockname()[1]
        log.info("%s: listening on http://%s:%d (%d gateway tokens)", name, cfg.host, port, len(cfg.tokens))
        if on_ready:
            on_ready(port)
        await stop.wait()
    finally:
        await runner.cleanup()
        handlers.failures.flush()
        forwarder.cancel()
        await asyncio.gather(forwarder, return_exceptions=True)
        await sink.close()


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop factory when uvloop is importable (Linux/macOS), else ``None`` (asyncio's)."""
    try:
        import uvloop
    except ImportError:  # e.g. Windows: asyncio's own loop
        return None
    new_loop: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return new_loop


def run(cfg: IngestConfig, on_ready: Callable[[int], None] | None = None, mount: Callable[[web.Application, IngestApp], None] | None = None,
        door: Door | None = None) -> None:
    """Blocking entry point of ``hivestream ingest``: serves until SIGTERM or SIGINT (on uvloop when installed); ``mount`` and ``door`` as :func:`serve`."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(cfg, stop, on_ready, mount=mount, door=door)

    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(main())

