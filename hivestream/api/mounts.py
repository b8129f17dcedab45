"""The agent API on each server: how it reads and when a write is visible.

* :func:`for_serve`: reads on cursors of serve's own connection (the file as of its last batch);
  a submission or a review waits (at most a few seconds) until serve's loop has applied it before
  answering, so its writer reads it right after the answer.
* :func:`for_ingest` (the Kafka path): reads the snapshot the projector publishes beside
  ``--db`` (answers at most ``max_staleness_s`` old, else 503 ``stale``); a write is durable on
  ``hook-events`` when answered and visible once the worker and the projector have taken it and
  the next snapshot is out (seconds); meanwhile this process answers ``GET /api/content/{id}`` for
  its own submissions from the event itself.

Both also serve ``/mcp`` (:func:`mount_mcp`): the MCP tools answered in process by the same
services, readers and writers, so what a tool sees is what the matching ``/api/*`` route answers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from hivestream.api.routes import AgentRoutes, ApiParts, mounter
from hivestream.ingest.server import IngestApp
from hivestream.serve.app import ServeReads
from hivestream.services.readers import CursorReader, SnapshotReader
from streams.experiences.settings import ExperienceSettings

Mount = Callable[[web.Application, IngestApp], None]
DEFAULT_MAX_STALENESS_S = 60.0
"""The Kafka path's bound on how old an answer may be (seconds), unless ``--max-staleness`` says."""


def mount_mcp(app: web.Application, routes: AgentRoutes) -> None:
    """``/mcp`` on ``app`` beside ``routes``: the MCP tools over ``routes.agent`` (the same services as
    ``/api/*``), for callers ``routes`` authorizes with the agent scope, with the server's body size
    limit and read timeout (:class:`hivestream.mcp.http_mount.McpEndpoint`)."""
    from hivestream.mcp.http_mount import McpEndpoint  # the MCP SDK is imported only by a server that serves it

    cfg = routes.ingest.cfg
    McpEndpoint(routes.agent, routes.authorize_agent, host=cfg.host, max_body_bytes=cfg.max_body_bytes,
                read_timeout_s=cfg.read_timeout_s).add_to(app)


def for_serve(settings: ExperienceSettings, db: Path, *, mcp: bool = True) -> Callable[[ServeReads], Mount]:
    """The agent API (and, with ``mcp``, ``/mcp``) for ``hivestream serve --db db`` (:attr:`hivestream.serve.app.ServeConfig.api`)."""

    def make(reads: ServeReads) -> Mount:
        reader = CursorReader(reads.gate.cursor, reads.applied)

        async def wait_applied(timeout_s: float) -> bool:
            target = reads.durable_end()
            deadline = time.monotonic() + timeout_s
            while reads.applied() < target:
                if time.monotonic() > deadline:
                    return False
                await asyncio.sleep(0.005)
            return True

        hint = f"serve's per-start review token, in its note {db}.serve, or a tokens-file line with scopes=review"
        return mounter(ApiParts(reader, reader, settings, wait_applied, review_hint=hint), mount_mcp if mcp else None)

    return make


def for_ingest(settings: ExperienceSettings, kb_db: Path, frames_db: Path | None = None, max_staleness_s: float = DEFAULT_MAX_STALENESS_S,
               *, mcp: bool = True) -> Mount:
    """The agent API (and, with ``mcp``, ``/mcp``) for ``hivestream ingest --db kb_db [--frames-db frames_db]`` (the Kafka path)."""
    kb = SnapshotReader(kb_db, max_staleness_s)
    frames = kb if frames_db is None or frames_db == kb_db else SnapshotReader(frames_db, max_staleness_s)
    return mounter(ApiParts(kb, frames, settings, None, review_hint="a tokens-file line with scopes=review"), mount_mcp if mcp else None)
