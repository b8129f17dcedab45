"""The knowledge base ("experiences") as agents and reviewers use it: search, submit, content by id,
pending, approve/reject, extraction requests; the one implementation behind the agent API's routes
(:mod:`hivestream.api`), the MCP tools and the ``hivestream kb`` commands.

Reads come from a :class:`~hivestream.services.readers.ProjectionReader`; writes are KnowHub event
lines handed to an :class:`EventWriter`, which puts them on the same log as every other event
(serve: its hook-event log, as ``POST /v1/hooks/knowhub`` does; the Kafka path: ``hook-events``),
so the projection changes only when the event is applied, as for any other submission: nothing is
written to a side table.

* **Search** ranks approved experiences by BM25 (:mod:`projections.text_index`, the ranking of
  :func:`streams.experiences.search.search`); quarantined ones only for a reviewer. The index follows
  the projection incrementally: it reads the submissions and reviews appended since its last look
  (``rowid`` above its watermarks; both tables are append-only) and checks its size against
  ``experiences`` (a mismatch rebuilds it).
* **Submit** builds the event exactly as every submission is built
  (:func:`streams.experiences.build.build_experience`: injected blocks out, redaction before the
  event exists, the injection check, the dedup key). The answer's id is the experience the
  submission belongs to (the first writer's event id within the dedup window): on serve it is read
  back once serve's loop has applied the event (``wait_applied``, bounded), so it is the one the
  projection holds and the writer reads its own write at once; on the Kafka path (no such wait) it
  is what the projector's last snapshot and this process's own recent submissions say, and the
  experience is readable here from the event itself until the snapshot has it.
* **Telemetry**: each search, content fetch and recall is a KnowHub telemetry event (``kb-search``,
  ``kb-content``, ``memory-recall``) written in the background, never delaying the answer.

Quarantined experiences are never returned to an agent: not by search, and ``content`` answers
:class:`NotFound` for them unless the caller reviews.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import duckdb
import numpy as np

from hivestream.services.readers import ProjectionReader, ReadUnavailable
from projections.experiences.queries import KB_REVIEW_QUERIES
from projections.text_index import TextIndex
from streams.experiences.build import build_experience, safe_text
from streams.experiences.events import ExperienceReviewed, ExperienceSubmitted
from streams.experiences.search import SearchDoc, SearchHit, search
from streams.experiences.settings import ExperienceSettings
from streams.model.deadletter import RejectedInput

log = logging.getLogger("hivestream.services")

MAX_LIMIT = 20
"""Most search results one call may ask for."""
TITLE_CHARS = 120
MAX_QUERY_CHARS = 1000
MAX_MESSAGES = 2000
"""Most messages one extraction request may carry."""
WAIT_APPLIED_S = 5.0
"""How long a submission or review on serve waits for the loop to apply it before answering (seconds)."""
RECENT_SUBMISSIONS = 10_000
"""How many of its own submissions a process keeps to answer before the projection has them."""

_STATUS = {"approved": 1, "quarantined": 2, "pending": 3, "rejected": 4}
_COLUMNS = ("experience_id, task, resource, result, confidence, status, agent_ids, origin, submit_count, first_seen_ms, last_seen_ms, "
            "reviewed_at_ms, review_reason")


class ServiceError(Exception):
    """A request the service refuses: ``status`` (HTTP), ``code`` (the error's name) and a one-line ``detail``."""

    status = 400
    code = "bad_request"

    def __init__(self, detail: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status


class NotFound(ServiceError):
    """No such experience (or one the caller may not see)."""

    status = 404
    code = "not_found"


class ExtractionDisabled(ServiceError):
    """The server has no extractor (``HIVESTREAM_KB_EXTRACTION_ENABLED`` is off)."""

    status = 409
    code = "extraction_disabled"


class WriteRefused(ServiceError):
    """The log did not take the event (full, failing, too large); nothing was written."""

    status = 503
    code = "unavailable"


@dataclass(frozen=True)
class Caller:
    """Who asks: the agent (its token's gateway id unless it says), its session, the runtime or adapter
    (``api``, ``mcp``, ``cli``), and whether it may review (sees quarantined experiences)."""

    agent_id: str = ""
    session_key: str = ""
    runtime: str = "api"
    reviewer: bool = False


class EventWriter(Protocol):
    """Puts KnowHub event lines on the log every event goes to."""

    async def write(self, lines: Sequence[dict[str, Any]]) -> None:
        """Make ``lines`` durable on the log, or raise.

        Raises:
            WriteRefused: nothing of them was written (the status says why: 413, 503).
            ServiceError: a line was refused as input (422).
        """
        ...


def title_of(task: str) -> str:
    """An experience's title: the task's first line, at most :data:`TITLE_CHARS` characters."""
    first = task.strip().split("\n", 1)[0].strip()
    return first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 1] + "…"


def _limit(limit: object, default: int = 5, most: int = MAX_LIMIT) -> int:
    if limit is None or limit == "":
        return default
    try:
        n = int(str(limit))
    except ValueError:
        raise ServiceError(f"limit must be a whole number from 1 to {most}", code="bad_limit") from None
    if not 1 <= n <= most:
        raise ServiceError(f"limit must be from 1 to {most}, got {n}", code="bad_limit")
    return n


def _query(q: object) -> str:
    if not isinstance(q, str) or not q.strip():
        raise ServiceError("q (what to look for) is required", code="missing_field")
    if len(q) > MAX_QUERY_CHARS:
        raise ServiceError(f"q is {len(q)} characters, at most {MAX_QUERY_CHARS}", code="too_large")
    return q


def _now_ms() -> int:
    return int(time.time() * 1000)


def _new_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex}"


# --- the index ---------------------------------------------------------------------------------------------


class ExperienceIndex:
    """Every experience's text in a :class:`~projections.text_index.TextIndex`, with its status and agents, kept up to date."""

    def __init__(self) -> None:
        self.text = TextIndex()
        self.status = np.zeros(0, dtype=np.int8)
        self._agents: dict[str, set[int]] = {}
        self._agent_masks: dict[str, np.ndarray[Any, np.dtype[np.bool_]]] = {}
        self._sub_hi = -1
        self._rev_hi = -1
        self._marker: object = object()
        self.lock = threading.Lock()

    def _set(self, rows: list[tuple[Any, ...]]) -> None:
        numbers = self.text.add([r[0] for r in rows], [f"{r[1]}\n{r[2]}\n{r[3]}" for r in rows])
        if len(self.text) > len(self.status):
            grown = np.zeros(max(len(self.text), 2 * len(self.status), 1024), dtype=np.int8)
            grown[: len(self.status)] = self.status
            self.status = grown
        for n, r in zip(numbers, rows, strict=True):
            self.status[n] = _STATUS.get(r[4], 0)
            for a in r[5]:
                if n not in self._agents.setdefault(a, set()):
                    self._agents[a].add(n)
                    self._agent_masks.pop(a, None)

    def refresh(self, cur: duckdb.DuckDBPyConnection, marker: object) -> None:
        """Bring the index up to the projection ``cur`` sees (in the caller's transaction), unless ``marker`` says nothing changed."""
        if marker is not None and marker == self._marker:
            return
        (sub_hi,) = cur.execute("SELECT coalesce(max(rowid), -1) FROM experience_submissions").fetchone() or (-1,)
        (rev_hi,) = cur.execute("SELECT coalesce(max(rowid), -1) FROM experience_reviews").fetchone() or (-1,)
        sel = "SELECT experience_id, task, resource, result, status, agent_ids FROM experiences"
        if self._sub_hi < 0 and self._rev_hi < 0:
            self._set(cur.execute(sel).fetchall())
        elif sub_hi > self._sub_hi or rev_hi > self._rev_hi:
            self._set(cur.execute(f"""{sel} WHERE experience_id IN (
                SELECT experience_id FROM experience_submissions WHERE rowid > ? UNION
                SELECT experience_id FROM experience_reviews WHERE rowid > ?)""", [self._sub_hi, self._rev_hi]).fetchall())
        self._sub_hi, self._rev_hi = int(sub_hi), int(rev_hi)
        (count,) = cur.execute("SELECT count(*) FROM experiences").fetchone() or (0,)
        if count != len(self.text):  # rows replaced under other row ids: read them all again
            log.warning("the experiences index holds %d documents, the projection %d: rebuilt", len(self.text), count)
            self.__init__()  # type: ignore[misc]
            self.refresh(cur, None)
        self._marker = marker

    def search(self, query: str, k: int, agent_id: str | None, include_quarantined: bool) -> list[tuple[str, float]]:
        """The ``k`` best ``(experience id, score)`` among approved experiences (and quarantined ones when asked), of ``agent_id`` when given."""
        n = len(self.text)
        st = self.status[:n]
        mask = (st == 1) | (st == 2) if include_quarantined else st == 1
        if agent_id is not None:
            am = self._agent_masks.get(agent_id)
            if am is None or len(am) != n:
                am = np.zeros(n, dtype=bool)
                am[list(self._agents.get(agent_id, ()))] = True
                self._agent_masks[agent_id] = am
            mask = mask & am
        return [(self.text.keys[d], s) for d, s in self.text.search(query, mask, k)]


# --- answers -----------------------------------------------------------------------------------------------


def _record(r: tuple[Any, ...]) -> dict[str, Any]:
    (i, task, resource, result, conf, status, agents, origin, count, first, last, reviewed, reason) = r
    return {"id": i, "title": title_of(task), "task": task, "resource": resource, "result": result, "confidence": conf, "status": status,
            "origin": origin, "agent_ids": list(agents), "submit_count": count, "first_seen_ms": first, "last_seen_ms": last,
            "reviewed_at_ms": reviewed, "review_reason": reason}


def _visible(rec: dict[str, Any], caller: Caller) -> dict[str, Any] | None:
    """``rec`` as ``caller`` may see it: a quarantined experience only by a reviewer; a rejected one's texts withheld from an agent."""
    if caller.reviewer:
        return rec
    if rec["status"] == "quarantined":
        return None
    if rec["status"] == "rejected":
        return {**rec, "title": "", "task": "", "resource": "", "result": "", "withheld": True}
    return rec


@dataclass(frozen=True)
class Submitted:
    """A submission's answer: the experience id (final), its status, and the event id that carried it."""

    id: str
    status: str
    event_id: str


def _status_of(ev: ExperienceSubmitted) -> str:
    return "quarantined" if ev.injection_rules else "pending" if ev.requires_review else "approved"


class ExperienceService:
    """The knowledge base for one projection.

    Args:
        reader: where the projection is read.
        writer: where event lines go (``None``: read-only, e.g. a CLI without a log).
        settings: privacy mode, approval, dedup window, extraction switch.
        wait_applied: serve: waits until its loop has applied everything durable now (returns
            whether it did within the time given, seconds); ``None`` on the Kafka path.
        executor_run: runs blocking reads off the event loop (default :func:`asyncio.to_thread`).
    """

    def __init__(self, reader: ProjectionReader, writer: EventWriter | None, settings: ExperienceSettings, *,
                 wait_applied: Callable[[float], Awaitable[bool]] | None = None,
                 executor_run: Callable[..., Awaitable[Any]] | None = None) -> None:
        self.reader = reader
        self.writer = writer
        self.settings = settings
        self.wait_applied = wait_applied
        self._run = executor_run or asyncio.to_thread
        self.index = ExperienceIndex()
        self._recent: OrderedDict[str, ExperienceSubmitted] = OrderedDict()  # experience id -> its event, this process's own
        self._recent_keys: dict[str, tuple[str, int]] = {}  # dedup key -> (experience id, first writer's time)
        self._background: set[asyncio.Task[None]] = set()

    # -- reads ---------------------------------------------------------------------------------------------

    def _search_sync(self, q: str, k: int, agent_id: str | None, include_quarantined: bool, caller: Caller) -> list[dict[str, Any]]:
        marker = self.reader.marker()

        def work(cur: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
            cur.execute("BEGIN TRANSACTION")
            try:
                with self.index.lock:
                    self.index.refresh(cur, marker)
                    hits = self.index.search(q, k, agent_id, include_quarantined)
                if not hits:
                    return []
                rows = cur.execute(f"SELECT {_COLUMNS} FROM experiences WHERE experience_id IN (SELECT unnest(?))",
                                   [[h[0] for h in hits]]).fetchall()
            finally:
                cur.execute("ROLLBACK")
            by_id = {r[0]: _record(r) for r in rows}
            out = []
            for i, score in hits:
                rec = by_id.get(i)
                if rec is None or rec["status"] not in (("approved", "quarantined") if include_quarantined else ("approved",)):
                    continue
                seen = _visible(rec, caller)
                if seen is not None:
                    out.append({k: seen[k] for k in ("id", "title", "task", "resource", "result", "confidence", "status")}
                               | {"score": round(score, 6)})
            return out

        return self.reader.read(work)

    async def search(self, q: object, *, caller: Caller, agent_id: str | None = None, limit: object = None,
                     include_quarantined: bool = False) -> list[dict[str, Any]]:
        """Approved experiences ranked by BM25 for ``q``: ``[{id, title, task, resource, result, confidence, status, score}]``.

        Raises:
            ServiceError: a missing or oversized ``q``, a ``limit`` outside 1..20, quarantined
                ones asked by a caller who does not review (403).
            ReadUnavailable: the projection cannot be read now.
        """
        query, k = _query(q), _limit(limit)
        if include_quarantined and not caller.reviewer:
            raise ServiceError("quarantined experiences are shown to reviewers only", code="forbidden", status=403)
        agent = agent_id or None
        hits: list[dict[str, Any]] = await self._run(self._search_sync, query, k, agent, include_quarantined, caller)
        self._telemetry({"type": "kb-search", "query": query, "agent_filter": agent, "hit_count": len(hits)}, caller)
        return hits

    def _content_sync(self, experience_id: str) -> dict[str, Any] | None:
        def work(cur: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
            return cur.execute(f"SELECT {_COLUMNS} FROM experiences WHERE experience_id = ?", [experience_id]).fetchall()

        rows = self.reader.read(work)
        return _record(rows[0]) if rows else None

    async def content(self, experience_id: str, *, caller: Caller) -> dict[str, Any]:
        """The experience ``experience_id`` (see the module docstring for what an agent may see).

        Raises:
            NotFound: no such experience, or a quarantined one asked by an agent.
            ReadUnavailable: the projection cannot be read now.
        """
        if not experience_id or len(experience_id) > 200:
            raise NotFound("no such experience")
        try:
            rec = await self._run(self._content_sync, experience_id)
        except ReadUnavailable:
            rec = None
            if experience_id not in self._recent:
                raise
        if rec is None and experience_id in self._recent:  # this process's own submission, not projected yet
            ev = self._recent[experience_id]
            rec = {"id": experience_id, "title": title_of(ev.task), "task": ev.task, "resource": ev.resource, "result": ev.result,
                   "confidence": ev.confidence, "status": _status_of(ev), "origin": "submitted", "agent_ids": [ev.agent_id],
                   "submit_count": 1, "first_seen_ms": ev.event_time_ms, "last_seen_ms": ev.event_time_ms, "reviewed_at_ms": None,
                   "review_reason": None, "projected": False}
        seen = None if rec is None else _visible(rec, caller)
        self._telemetry({"type": "kb-content", "experience_ref": experience_id}, caller)
        if seen is None:
            raise NotFound(f"no experience {experience_id!r}")
        return seen

    async def pending(self, *, status: str = "pending", limit: object = None) -> list[dict[str, Any]]:
        """Experiences waiting for review (``status`` ``quarantined``: the flagged ones), oldest first (a reviewer's read).

        Raises:
            ServiceError: another status or a bad limit; ReadUnavailable as :meth:`search`.
        """
        if status not in ("pending", "quarantined"):
            raise ServiceError("status must be pending or quarantined", code="bad_status")
        n = _limit(limit, default=100, most=1000)
        sql = KB_REVIEW_QUERIES[status].sql + f" LIMIT {n}"
        rows: list[tuple[Any, ...]] = await self._run(self.reader.read, lambda cur: cur.execute(sql).fetchall())
        cols = ("id", "origin", "count", "agents", "confidence", "task", "resource", "result", "rules")
        return [dict(zip(cols, r, strict=True)) | {"agents": list(r[3]), "rules": list(r[8]), "status": status, "title": title_of(r[5])}
                for r in rows]

    # -- writes --------------------------------------------------------------------------------------------

    def _writer(self) -> EventWriter:
        if self.writer is None:
            raise WriteRefused("this server takes no events", code="read_only")
        return self.writer

    def _predict(self, ev: ExperienceSubmitted) -> tuple[str, str]:
        """The experience ``ev`` joins and its status as the projection and this process's recent submissions say (the Kafka path)."""
        window = self.settings.window
        mine = self._recent_keys.get(ev.dedup_key)

        def within(first_ms: int) -> bool:
            return window is None or ev.event_time_ms - first_ms < window

        try:
            rows = self.reader.read(lambda cur: cur.execute(
                "SELECT experience_id, status, first_seen_ms FROM experiences WHERE dedup_key = ? ORDER BY first_seen_ms DESC LIMIT 1",
                [ev.dedup_key]).fetchall())
        except (ReadUnavailable, duckdb.Error):
            rows = []
        if rows and within(int(rows[0][2])):
            return str(rows[0][0]), str(rows[0][1])
        if mine is not None and mine[0] != ev.event_id and within(mine[1]):
            first = self._recent.get(mine[0])
            return mine[0], _status_of(first) if first is not None else "pending"
        return ev.event_id, _status_of(ev)

    def _applied_answer(self, event_id: str) -> tuple[str, str] | None:
        rows = self.reader.read(lambda cur: cur.execute(
            "SELECT s.experience_id, e.status FROM experience_submissions s JOIN experiences e USING (experience_id) WHERE s.event_id = ?",
            [event_id]).fetchall())
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    def _remember(self, experience_id: str, ev: ExperienceSubmitted) -> None:
        if experience_id == ev.event_id:
            self._recent[experience_id] = ev
            self._recent_keys[ev.dedup_key] = (experience_id, ev.event_time_ms)
            while len(self._recent) > RECENT_SUBMISSIONS:
                _i, old = self._recent.popitem(last=False)
                if self._recent_keys.get(old.dedup_key, ("",))[0] == old.event_id:
                    del self._recent_keys[old.dedup_key]

    async def submit(self, fields: dict[str, Any], *, caller: Caller) -> Submitted:
        """Submit one experience (``task``, ``resource``, ``result``, ``confidence``?, ``agent_id``?,
        ``submitted_by``?, ``session_key``?): redacted, checked, deduplicated like every submission.

        Raises:
            ServiceError: a missing, oversized or mistyped field (the detail holds no raw text).
            WriteRefused: the log did not take it.
        """
        for name in ("agent_id", "submitted_by", "session_key"):
            if fields.get(name) is not None and not isinstance(fields.get(name), str):
                raise ServiceError(f"{name} must be a string", code="wrong_shape")
        now = _now_ms()
        event_id = _new_id("api")
        try:
            ev = build_experience(fields, event_id=event_id, event_time_ms=now, settings=self.settings,
                                  agent_id=str(fields.get("agent_id") or caller.agent_id)[:200],
                                  submitted_by=str(fields.get("submitted_by") or "")[:200],
                                  session_key=str(fields.get("session_key") or caller.session_key)[:400],
                                  source_tool="kb_submit", runtime=caller.runtime)
        except RejectedInput as e:
            raise ServiceError(e.detail, code=str(e.reason)) from None
        assert isinstance(ev, ExperienceSubmitted)
        await self._writer().write([ev.model_dump(mode="json")])
        answer = None
        if self.wait_applied is not None and await self.wait_applied(WAIT_APPLIED_S):
            try:
                answer = await self._run(self._applied_answer, ev.event_id)
            except (ReadUnavailable, duckdb.Error):
                answer = None
        if answer is None:
            answer = await self._run(self._predict, ev)
        self._remember(answer[0], ev)
        return Submitted(answer[0], answer[1], ev.event_id)

    def _exists(self, experience_id: str) -> bool:
        return bool(self.reader.read(lambda cur: cur.execute("SELECT 1 FROM experiences WHERE experience_id = ?", [experience_id]).fetchall()))

    async def review(self, experience_id: str, decision: str, *, reason: object = "", reviewer: str) -> dict[str, Any]:
        """Approve or reject ``experience_id`` (a reviewer's write): ``{"id", "status"}`` once written
        (on serve once applied, so a search right after sees it).

        Raises:
            ServiceError: a decision other than approved/rejected, a reject without a reason, a reason over 2,000 characters.
            NotFound: no such experience; WriteRefused: the log did not take it.
        """
        if decision not in ("approved", "rejected"):
            raise ServiceError("decision must be approved or rejected", code="bad_decision")
        if reason is not None and not isinstance(reason, str):
            raise ServiceError("reason must be a string", code="wrong_shape")
        why = (reason or "").strip()
        if decision == "rejected" and not why:
            raise ServiceError("a rejection needs a reason", code="missing_field")
        if len(why) > 2000:
            raise ServiceError(f"reason is {len(why)} characters, at most 2000", code="too_large")
        if experience_id not in self._recent and not await self._run(self._exists, experience_id):
            raise NotFound(f"no experience {experience_id!r}")
        mode = self.settings.privacy_mode
        now = _now_ms()
        ev = ExperienceReviewed(event_id=_new_id("api-review"), event_time_ms=now, experience_id=experience_id, decision=decision,  # type: ignore[arg-type]
                                reviewer=safe_text(reviewer or "reviewer", mode)[:200], reason=safe_text(why, mode))
        await self._writer().write([ev.model_dump(mode="json")])
        if self.wait_applied is not None:
            await self.wait_applied(WAIT_APPLIED_S)
        return {"id": experience_id, "status": decision}

    async def extract(self, body: dict[str, Any], *, caller: Caller) -> str:
        """Ask for the experiences of a finished run (``session_key``, ``agent_id``?, ``messages``
        ``[{role, content}]``) to be extracted; returns the request id (the extraction runs where
        every extraction runs: serve's loop, the Kafka worker).

        Raises:
            ExtractionDisabled: the server has no extractor.
            ServiceError: a missing or mistyped field; WriteRefused: the log did not take it.
        """
        if not self.settings.extraction_enabled:
            raise ExtractionDisabled("this server has no extractor (HIVESTREAM_KB_EXTRACTION_ENABLED is off)")
        session = body.get("session_key")
        if not isinstance(session, str) or not session.strip():
            raise ServiceError("session_key is required", code="missing_field")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ServiceError("messages must be a non-empty list of {role, content}", code="missing_field")
        if len(messages) > MAX_MESSAGES:
            raise ServiceError(f"{len(messages)} messages, at most {MAX_MESSAGES}", code="too_large")
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str | list):
                raise ServiceError("each message must be {role: string, content: string}", code="wrong_shape")
        agent = body.get("agent_id")
        if agent is not None and not isinstance(agent, str):
            raise ServiceError("agent_id must be a string", code="wrong_shape")
        rid = _new_id("api-extract")
        await self._writer().write([{"type": "extraction-requested", "event_id": rid, "event_time_ms": _now_ms(), "session_key": session[:400],
                                     "agent_id": (agent or caller.agent_id)[:200],
                                     "messages": [{"role": m["role"][:40], "content": m["content"]} for m in messages]}])
        return rid

    # -- telemetry -----------------------------------------------------------------------------------------

    def _telemetry(self, line: dict[str, Any], caller: Caller) -> None:
        """Write one telemetry line in the background (a failure is logged, never the caller's)."""
        if self.writer is None:
            return
        full = {"event_id": _new_id("api-tel"), "event_time_ms": _now_ms(), "session_key": caller.session_key[:400],
                "agent_id": caller.agent_id[:200], "runtime": caller.runtime, **line}
        writer = self.writer

        async def write() -> None:
            try:
                await writer.write([full])
            except Exception as e:  # telemetry never fails a read
                log.warning("a %s telemetry event was not written: %s", line.get("type"), str(e).splitlines()[0][:200] if str(e) else type(e).__name__)

        try:
            task = asyncio.get_running_loop().create_task(write())
        except RuntimeError:  # no loop (a synchronous caller): nothing to record it on
            return
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def recall_line(self, query: str, project: str, hits: int, caller: Caller) -> None:
        """Record a frames recall (``memory-recall``) the recall service answered."""
        self._telemetry({"type": "memory-recall", "query": query, "project": project, "hit_count": hits}, caller)

    async def drain(self) -> None:
        """Wait for the telemetry still being written (at stop)."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)


# --- the CLI's reads: named queries (serve's read listener, or the file) -------------------------------------


NamedRows = Callable[[str], list[tuple[Any, ...]]]
"""A named query of :data:`projections.experiences.queries.KB_REVIEW_QUERIES` → its rows (serve's read listener or the file)."""


def docs_of(named: NamedRows) -> list[SearchDoc]:
    """Every experience as search ranks it (the ``search-docs`` query)."""
    return [SearchDoc(i, t, r, res, s, tuple(a)) for i, t, r, res, s, a in named("search-docs")]


def search_named(named: NamedRows, query: str, *, k: int = 5, agent_id: str | None = None, include_quarantined: bool = False) -> list[SearchHit]:
    """``kb search``: the experiences of ``named`` ranked for ``query`` (:func:`streams.experiences.search.search`)."""
    return search(docs_of(named), query, k=k, agent_id=agent_id, include_quarantined=include_quarantined)


def resolve_id(named: NamedRows, given: str) -> list[str]:
    """The ids ``given`` may name: itself when it is an id, else those it is a prefix of (at most five; ``…`` at its end ignored)."""
    prefix = given.rstrip("…")
    found = [str(r[0]) for r in named("experience-ids") if str(r[0]).startswith(prefix)][:5]
    return [given] if given in found else found


def submission(fields: dict[str, Any], settings: ExperienceSettings, *, agent_id: str, submitted_by: str, now_ms: int) -> ExperienceSubmitted:
    """``kb submit``'s event (``source_tool`` and runtime ``cli``).

    Raises:
        RejectedInput: as :func:`streams.experiences.build.build_experience`.
    """
    from streams.model.events import stable_id

    ev = build_experience(fields, event_id=stable_id("cli-submit", now_ms, fields.get("task"), fields.get("result")), event_time_ms=now_ms,
                          settings=settings, agent_id=agent_id, submitted_by=submitted_by, source_tool="cli", runtime="cli")
    assert isinstance(ev, ExperienceSubmitted)
    return ev


def review_event(experience_id: str, decision: str, reason: str, reviewer: str, settings: ExperienceSettings, now_ms: int) -> ExperienceReviewed:
    """``kb approve|reject``'s event (reviewer and reason redacted in strict mode).

    Raises:
        pydantic.ValidationError: a field out of its bounds.
    """
    from streams.model.events import stable_id

    mode = settings.privacy_mode
    return ExperienceReviewed(event_id=stable_id("review", experience_id, decision, now_ms), event_time_ms=now_ms, experience_id=experience_id,
                              decision=decision, reviewer=safe_text(reviewer, mode), reason=safe_text(reason, mode))  # type: ignore[arg-type]
