"""Serve's read routes: ``hivestream query`` and ``report`` in another process get their answer from
the running serve, as of its last committed batch, instead of from a snapshot (DuckDB lets no
second process open the file serve holds, and a snapshot is a copy of the whole file).

A listener of its own on 127.0.0.1 (a free port; never on the ingest bind, which may be public),
named with its read token in ``<db>.serve`` (:mod:`hivestream.serve.read_marker`):

* ``POST /v1/query`` ``{"set": "frames"|"kb"|"kb-review"|"stubs", "name": NAME}``: ``200 {"columns", "rows",
  "applied", "log_records", "pid"}`` (values JSON as ``hivestream query --format json`` writes
  them: anything else as text); ``400`` for a body or a name it does not know; ``422
  {"error": "query_failed", "detail"}`` when the file lacks the tables (one line).
* ``GET /v1/report``: the HTML report (:func:`hivestream.report.render_html`) of the file.

* ``GET /v1/alive``: ``200 {"pid"}`` at once, from the event loop (the reader's liveness check
  while a long read runs: a stopped serve is found in seconds).

All need the read token: ``Authorization: Hivestream-HMAC ...`` with a nonce, which proves it
without sending it (:mod:`hivestream.serve.read_proof`; what ``hivestream`` sends), or
``Authorization: Bearer <read token>`` (``curl``); ``401`` otherwise (a gateway's ingest token is
no read token: a gateway may post, not read the memory). Every answer to a request with a nonce
carries serve's proof over that nonce and the answer, so a reader can tell serve from another
process on the note's port. ``503 {"error": "unavailable"}`` while the file is being reopened.

Each query runs on a cursor the :class:`~hivestream.serve.read_gate.ReadGate` lends (DuckDB MVCC:
the file as of the query's start; the dedup loop goes on committing) in a pool of its own of two
threads, so reads never take the threads the log's fsyncs run in, and at most two run at once. A
read whose client went away (its connection closed) or that runs past ``READ_DEADLINE_S`` is
cancelled: never started when still queued, else its cursor is interrupted (DuckDB
``interrupt()``) until its thread is free, so abandoned reads do not hold the pool.

Reads share the process with ingest, so their cost is bounded (two concurrent reports took
ingest from ~3,000 to ~900 events/s on two cores; ``bench/bench_serve_reads.py``): the read
threads run at a lower CPU priority (Linux; they take spare CPU, not the HTTP side's or the dedup
loop's), and a **heavy** read (the report, the per-capture analytics of :data:`HEAVY_QUERIES`, a
query computed in Python) runs one at a time: the next ones wait in line, at most
:data:`HEAVY_QUEUE` of them; one more is answered ``503 {"error": "busy"}`` with ``Retry-After``.
The other queries keep the second thread. A report is kept for as long as the file has applied no
new record, so asking again costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import duckdb
from aiohttp import web

from hivestream.ingest.unreadable import quiet_parse_errors
from hivestream.serve.log_writer import HookLog
from hivestream.serve.progress import Progress
from hivestream.serve.publisher import lower_priority
from hivestream.serve.read_gate import ReadGate, Unavailable
from hivestream.serve.read_proof import NONCE_HEADER, PROOF_HEADER, answer_mac, request_proven, valid_nonce
from projections.experiences.queries import KB_QUERIES, KB_REVIEW_QUERIES
from projections.frames.analytics import ANALYTICS_QUERIES, MEMORY_QUERIES
from projections.frames.queries import QUERIES
from projections.named_query import NamedQuery, run_query
from projections.stubs.queries import STUB_QUERIES
from streams.model.clock import Clock, wall_clock_ms

log = logging.getLogger("hivestream.serve")

QUERY_SETS: dict[str, dict[str, NamedQuery]] = {"frames": {**QUERIES, **ANALYTICS_QUERIES, **MEMORY_QUERIES},
                                                "kb": KB_QUERIES, "kb-review": KB_REVIEW_QUERIES, "stubs": STUB_QUERIES}
"""The named queries serve answers, by set: ``hivestream query``'s, ``kb query``'s, those of ``kb
pending|search|approve|reject`` and ``stubs query``'s."""

MAX_REQUEST_BYTES = 64 << 10
READ_THREADS = 2
HEAVY_QUEUE = 4
"""Heavy reads that may wait for the one running; one more is refused with 503 and ``Retry-After``."""
BUSY_RETRY_AFTER_S = 2

HEAVY_QUERIES = frozenset(ANALYTICS_QUERIES) | frozenset(n for qs in QUERY_SETS.values() for n, q in qs.items() if q.compute is not None)
"""Queries that run one at a time with the report: the per-capture analytics and those computed in Python."""
READ_DEADLINE_S = 300.0
"""Longest a query or a report may run (seconds): as long as ``hivestream`` waits for one
(:data:`hivestream.serve.read_client.TIMEOUT_S`); past it, it is interrupted and answered 503."""
INTERRUPT_EVERY_S = 0.05
"""How often a cancelled read's cursor is interrupted again until its thread is free (a report runs
many queries, and DuckDB forgets an interrupt that comes between two)."""

T = TypeVar("T")


def _line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}"[:500]


class Busy(Exception):
    """Too many heavy reads are running or waiting: the answer is 503 with ``Retry-After``."""


class Cancelled(Exception):
    """The read was cancelled before it got its cursor."""


class ReadOverdue(Exception):
    """The read ran past the deadline and was cancelled."""


class ReadJob:
    """One read in the pool: the cursor it runs on, so that another thread can interrupt it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cur: duckdb.DuckDBPyConnection | None = None
        self.cancelled = False

    @contextlib.contextmanager
    def running(self, cur: duckdb.DuckDBPyConnection) -> Iterator[None]:
        """Run on ``cur`` (in the pool's thread) until the block ends.

        Raises:
            Cancelled: the read was cancelled before it started.
        """
        with self._lock:
            if self.cancelled:
                raise Cancelled
            self._cur = cur
        try:
            yield
        finally:
            with self._lock:
                self._cur = None

    def cancel(self) -> None:
        """Cancel: a read not started never starts, a running one's query is interrupted (DuckDB
        raises ``InterruptException`` in its thread). Call again until the read ends."""
        with self._lock:
            self.cancelled = True
            if self._cur is not None:
                with contextlib.suppress(duckdb.Error):
                    self._cur.interrupt()


class ReadApp:
    """The read routes over one serve's file.

    Args:
        gate: lends cursors on the dedup loop's connection.
        progress: the loop's state (``applied``); hook_log: the log (its record count).
        token: the read token (required as a bearer token).
        clock: the report's time stamp (epoch ms).
    """

    def __init__(self, gate: ReadGate, progress: Progress, hook_log: HookLog, token: str, clock: Clock = wall_clock_ms) -> None:
        self.gate = gate
        self.progress = progress
        self.log = hook_log
        self._token = token
        self._auth = f"Bearer {token}".encode()
        self.clock = clock
        self.pool = ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="hivestream-serve-read", initializer=lower_priority)
        self.deadline_s = READ_DEADLINE_S
        self._reapers: set[asyncio.Task[None]] = set()
        self._heavy: asyncio.Semaphore | None = None
        self._heavy_waiting = 0
        self._report: tuple[tuple[int, Path], bytes] | None = None  # (applied, file) -> the page, while nothing new is applied

    def _json(self, status: int, body: dict[str, Any]) -> web.Response:
        return web.Response(body=json.dumps(body, default=str).encode(), status=status, content_type="application/json")

    def _authorized(self, request: web.Request, body: bytes = b"") -> bool:
        given = request.headers.get("Authorization", "")
        if request_proven(self._token, given, request.headers.get(NONCE_HEADER), request.method, request.raw_path, body):
            return True
        return hmac.compare_digest(given.encode("utf-8", "replace"), self._auth)

    def _unauthorized(self) -> web.Response:
        r = self._json(401, {"error": "unauthorized", "detail": "missing or wrong read token (it is in the <db>.serve file)"})
        r.headers["WWW-Authenticate"] = 'Bearer realm="hivestream-reads"'
        return r

    @web.middleware
    async def _prove(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        """Sign each answer to a request with a nonce (:func:`hivestream.serve.read_proof.answer_mac`)."""
        answer = await handler(request)
        nonce = request.headers.get(NONCE_HEADER)
        if valid_nonce(nonce) and isinstance(answer, web.Response) and isinstance(answer.body, bytes | bytearray):
            assert nonce is not None
            answer.headers[PROOF_HEADER] = answer_mac(self._token, nonce, answer.status, bytes(answer.body))
        return answer

    async def _in_pool(self, fn: Callable[[ReadJob], T], release: Callable[[], None] | None = None) -> T:
        """``fn(job)`` in the read pool; cancelled (see :class:`ReadJob`) when the handler is (its
        client went away) or after :attr:`deadline_s`. ``release`` is called on the loop once
        ``fn`` has returned in its thread (or was cancelled before it started).

        Raises:
            ReadOverdue: it ran past the deadline (and was cancelled); what ``fn`` raises.
        """
        job = ReadJob()
        loop = asyncio.get_running_loop()
        try:
            done: Future[T] = self.pool.submit(fn, job)
        except BaseException:
            if release is not None:
                release()
            raise
        if release is not None:
            done.add_done_callback(lambda _f: loop.call_soon_threadsafe(release))
        answer = asyncio.wrap_future(done)
        answer.add_done_callback(lambda f: f.cancelled() or f.exception())  # read even when nobody waits any more
        try:
            finished, _ = await asyncio.wait({answer}, timeout=self.deadline_s)
        except asyncio.CancelledError:
            self._abandon(job, done)
            raise
        if not finished:
            self._abandon(job, done)
            raise ReadOverdue
        return answer.result()

    def _abandon(self, job: ReadJob, done: Future[Any]) -> None:
        if done.cancel():  # still queued: never runs
            return
        task = asyncio.get_running_loop().create_task(self._interrupt_until_done(job, done))
        self._reapers.add(task)
        task.add_done_callback(self._reapers.discard)

    @staticmethod
    async def _interrupt_until_done(job: ReadJob, done: Future[Any]) -> None:
        while not done.done():
            job.cancel()
            await asyncio.sleep(INTERRUPT_EVERY_S)

    async def _heavy_in_pool(self, fn: Callable[[ReadJob], T]) -> T:
        """``fn`` in the pool once no other heavy read runs. The slot is taken back when ``fn``
        returns in its thread, not when the request goes away (a client that hangs up leaves a
        computation running that the next heavy read would otherwise run beside).

        Raises:
            Busy: :data:`HEAVY_QUEUE` heavy reads wait already.
        """
        if self._heavy is None:
            self._heavy = asyncio.Semaphore(1)
        heavy = self._heavy
        if heavy.locked() and self._heavy_waiting >= HEAVY_QUEUE:
            raise Busy(f"{HEAVY_QUEUE + 1} heavy reads (the report, per-capture analytics) are running or waiting; "
                       f"ask again in {BUSY_RETRY_AFTER_S} s")
        self._heavy_waiting += 1
        try:
            await heavy.acquire()
        finally:
            self._heavy_waiting -= 1
        return await self._in_pool(fn, heavy.release)

    def _busy(self, e: Busy) -> web.Response:
        r = self._json(503, {"error": "busy", "detail": str(e)})
        r.headers["Retry-After"] = str(BUSY_RETRY_AFTER_S)
        return r

    def _state(self) -> dict[str, Any]:
        return {"applied": self.progress.applied, "log_records": self.log.next_offset, "pid": os.getpid()}

    async def query(self, request: web.Request) -> web.Response:
        """``POST /v1/query``."""
        raw = await request.content.read(MAX_REQUEST_BYTES + 1)
        if not self._authorized(request, raw):
            return self._unauthorized()
        try:
            if len(raw) > MAX_REQUEST_BYTES:
                raise ValueError("body too large")
            req = json.loads(raw)
            queries, name = QUERY_SETS[req["set"]], req["name"]
            if not isinstance(name, str) or name not in queries:
                raise KeyError(name)
        except (ValueError, KeyError, TypeError, RecursionError) as e:  # RecursionError: JSON nested too deep to decode
            return self._json(400, {"error": "bad_request", "detail": f"expected {{\"set\": one of {sorted(QUERY_SETS)}, "
                                                                      f"\"name\": a query of that set}} ({type(e).__name__})"})

        def run(job: ReadJob) -> dict[str, Any]:
            state = self._state()
            with self.gate.cursor() as (cur, _path), job.running(cur):
                cols, rows = run_query(cur, name, queries)
            return {"columns": cols, "rows": [list(r) for r in rows], **state}

        try:
            answer = await (self._heavy_in_pool(run) if name in HEAVY_QUERIES else self._in_pool(run))
        except Busy as e:
            return self._busy(e)
        except Unavailable as e:
            return self._json(503, {"error": "unavailable", "detail": str(e)})
        except ReadOverdue:
            return self._overdue()
        except duckdb.Error as e:
            return self._json(422, {"error": "query_failed", "detail": _line(e)})
        except Exception as e:  # a bug in a query's computation: one line, never a traceback to the client
            log.error("serve: query %s failed: %s", name, _line(e))
            return self._json(500, {"error": "query_failed", "detail": _line(e)})
        return self._json(200, answer)

    async def report(self, request: web.Request) -> web.Response:
        """``GET /v1/report``."""
        if not self._authorized(request):
            return self._unauthorized()

        def run(job: ReadJob) -> bytes:
            from hivestream.report import Sources, render_html

            s = self._state()
            with self.gate.cursor() as (cur, path), job.running(cur):
                key = (int(s["applied"]), path)
                kept = self._report
                if kept is not None and kept[0] == key:
                    return kept[1]  # nothing applied since that page: the same rows
                note = (f"answered by hivestream serve (pid {s['pid']}) from {path} itself: {s['applied']:,} of the "
                        f"{s['log_records']:,} records of its log applied")
                page = render_html(Sources(cur, cur, cur, [note]), generated_at_ms=self.clock()).encode()
            if self.progress.applied == key[0]:  # no batch committed while it was made: it is the file as of key
                self._report = (key, page)
            return page

        try:
            page = await self._heavy_in_pool(run)
        except Busy as e:
            return self._busy(e)
        except Unavailable as e:
            return self._json(503, {"error": "unavailable", "detail": str(e)})
        except ReadOverdue:
            return self._overdue()
        except Exception as e:  # duckdb.Error: a file of an unexpected shape
            return self._json(422 if isinstance(e, duckdb.Error) else 500, {"error": "report_failed", "detail": _line(e)})
        return web.Response(body=page, content_type="text/html", charset="utf-8")

    def _overdue(self) -> web.Response:
        return self._json(503, {"error": "overdue", "detail": f"the read ran longer than {self.deadline_s:g} s and was cancelled"})

    async def alive(self, request: web.Request) -> web.Response:
        """``GET /v1/alive``: answered by the event loop itself, never queued behind reads."""
        if not self._authorized(request):
            return self._unauthorized()
        return self._json(200, {"pid": os.getpid()})

    def build(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application(client_max_size=MAX_REQUEST_BYTES, middlewares=[self._prove])
        app.router.add_post("/v1/query", self.query)
        app.router.add_get("/v1/report", self.report)
        app.router.add_get("/v1/alive", self.alive)
        return app


async def start_reads(app: ReadApp) -> tuple[web.AppRunner, int]:
    """Listen on 127.0.0.1 (a free port); the runner (``cleanup()`` it to stop) and the port.

    Raises:
        OSError: when no port can be bound.
    """
    runner = web.AppRunner(app.build(), access_log=None, handler_cancellation=True)  # a client gone cancels its read
    await runner.setup()
    quiet_parse_errors(runner)
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = getattr(site, "_server", None)
    port = int(server.sockets[0].getsockname()[1]) if server is not None and server.sockets else 0
    if port == 0:
        await runner.cleanup()
        raise OSError("the read listener has no port")
    return runner, port
