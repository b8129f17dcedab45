"""Frames recall: the deduplicated turns of earlier sessions most relevant to a query, with their
provenance, for an agent (``GET /api/memory/search``, the ``memory_search`` tool).

Ranking is BM25 over each frame's body (its content without the ``[hm …]`` prefix;
:mod:`projections.text_index`), the statistics taken over the frames in scope: the caller's project
(``scope=project``, the default, as hive-mind scopes recall to a workspace) or every project
(``scope=all``). Ties go to the frame id. Each result carries its provenance as the projection holds
it when the answer is made: every source that captured the turn, how often it was captured
(``access_count``), when first and last (``first_seen_ms``, ``last_seen_ms``), and where (project,
session, event type). Bodies longer than :data:`MAX_CONTENT_CHARS` are cut (``truncated``).

The index follows the ``frames`` table incrementally: frames are only ever appended (a duplicate
capture updates its frame's row in place), so the rows above the highest ``rowid`` read so far are
the new ones; a row count that disagrees with the index rebuilds it. Results are read back by
``rowid`` and checked against their frame id.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import duckdb
import numpy as np

from hivestream.services.experiences import Caller, ExperienceService, ServiceError, _limit, _query
from hivestream.services.readers import ProjectionReader
from projections.text_index import TextIndex
from streams.model.body_hash import stripped_body

log = logging.getLogger("hivestream.services")

MAX_CONTENT_CHARS = 4000
"""Longest body a recall result carries (characters); longer ones are cut and marked ``truncated``."""
_CHUNK = 50_000


class FrameIndex:
    """Every frame's body in a :class:`~projections.text_index.TextIndex`, with its project and ``rowid``, kept up to date."""

    def __init__(self) -> None:
        self.text = TextIndex()
        self.project = np.zeros(0, dtype=np.int32)
        self.rowid = np.zeros(0, dtype=np.int64)
        self._projects: dict[str | None, int] = {}
        self._hi = -1
        self._marker: object = object()
        self.lock = threading.Lock()

    def _grow(self, n: int) -> None:
        if n > len(self.project):
            size = max(n, 2 * len(self.project), 1024)
            self.project = np.concatenate([self.project, np.full(size - len(self.project), -1, dtype=np.int32)])
            self.rowid = np.concatenate([self.rowid, np.zeros(size - len(self.rowid), dtype=np.int64)])

    def refresh(self, cur: duckdb.DuckDBPyConnection, marker: object) -> None:
        """Add the frames ``cur`` sees beyond the last refresh (in the caller's transaction), unless ``marker`` says nothing changed."""
        if marker is not None and marker == self._marker:
            return
        while True:
            rows = cur.execute("SELECT rowid, frame_id, content, project FROM frames WHERE rowid > ? ORDER BY rowid LIMIT ?",
                               [self._hi, _CHUNK]).fetchall()
            if not rows:
                break
            numbers = self.text.add([r[1] for r in rows], [stripped_body(r[2] or "") for r in rows])
            self._grow(len(self.text))
            for n, (rid, _f, _c, proj) in zip(numbers, rows, strict=True):
                self.rowid[n] = rid
                self.project[n] = self._projects.setdefault(proj, len(self._projects))
            self._hi = int(rows[-1][0])
        (count,) = cur.execute("SELECT count(*) FROM frames").fetchone() or (0,)
        if count != len(self.text):
            log.warning("the frames index holds %d frames, the projection %d: rebuilt", len(self.text), count)
            self.__init__()  # type: ignore[misc]
            self.refresh(cur, None)
        self._marker = marker

    def search(self, query: str, k: int, project: str | None, everywhere: bool) -> list[tuple[int, float]]:
        """The ``k`` best ``(document number, score)`` among the frames of ``project`` (or all with ``everywhere``)."""
        n = len(self.text)
        if everywhere:
            mask = np.ones(n, dtype=bool)
        else:
            code = self._projects.get(project)
            if code is None:
                return []
            mask = self.project[:n] == code
        return self.text.search(query, mask, k)


class RecallService:
    """Frames recall over one projection.

    Args:
        reader: where the frames projection is read.
        telemetry: where a recall is recorded (``memory-recall``; ``None``: not recorded).
        executor_run: runs blocking reads off the event loop (default :func:`asyncio.to_thread`).
    """

    def __init__(self, reader: ProjectionReader, telemetry: ExperienceService | None = None, *,
                 executor_run: Callable[..., Awaitable[Any]] | None = None) -> None:
        self.reader = reader
        self.telemetry = telemetry
        self._run = executor_run or asyncio.to_thread
        self.index = FrameIndex()

    def _search_sync(self, q: str, k: int, project: str | None, everywhere: bool) -> list[dict[str, Any]]:
        marker = self.reader.marker()

        def work(cur: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
            cur.execute("BEGIN TRANSACTION")
            try:
                with self.index.lock:
                    self.index.refresh(cur, marker)
                    hits = self.index.search(q, k, project, everywhere)
                    keys = [(self.index.text.keys[d], int(self.index.rowid[d]), s) for d, s in hits]
                if not keys:
                    return []
                rows = cur.execute("""SELECT rowid, frame_id, content, project, session, event_type, source, sources, access_count,
                                             first_seen_ms, last_accessed_ms FROM frames WHERE rowid IN (SELECT unnest(?))""",
                                   [[r for _k, r, _s in keys]]).fetchall()
            finally:
                cur.execute("ROLLBACK")
            by_rowid = {r[0]: r for r in rows}
            out = []
            for frame_id, rid, score in keys:
                r = by_rowid.get(rid)
                if r is None or r[1] != frame_id:
                    continue
                body = stripped_body(r[2] or "")
                out.append({"id": frame_id, "content": body[:MAX_CONTENT_CHARS], "truncated": len(body) > MAX_CONTENT_CHARS,
                            "project": r[3], "session": r[4], "event_type": r[5], "source": r[6], "sources": list(r[7]),
                            "access_count": r[8], "first_seen_ms": r[9], "last_seen_ms": r[10], "score": round(score, 6)})
            return out

        return self.reader.read(work)

    async def search(self, q: object, *, caller: Caller, project: object = None, limit: object = None, scope: object = None) -> list[dict[str, Any]]:
        """The frames most relevant to ``q`` in ``project`` (``scope`` ``project``, the default) or
        everywhere (``scope`` ``all``): ``[{id, content, truncated, project, session, event_type,
        source, sources, access_count, first_seen_ms, last_seen_ms, score}]``.

        Raises:
            ServiceError: a missing or oversized ``q``, a bad ``limit``, an unknown ``scope``, no
                ``project`` with ``scope=project``.
            ReadUnavailable: the projection cannot be read now.
        """
        query, k = _query(q), _limit(limit)
        where = scope or "project"
        if where not in ("project", "all"):
            raise ServiceError("scope must be project or all", code="bad_scope")
        if project is not None and not isinstance(project, str):
            raise ServiceError("project must be a string", code="wrong_shape")
        if where == "project" and not project:
            raise ServiceError("project is required unless scope=all", code="missing_field")
        hits: list[dict[str, Any]] = await self._run(self._search_sync, query, k, project, where == "all")
        if self.telemetry is not None:
            self.telemetry.recall_line(query, "" if where == "all" else str(project), len(hits), caller)
        return hits
