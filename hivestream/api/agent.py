"""The agent API in process: :class:`LocalAgentApi`, the :class:`hivestream.mcp.agent_api.AgentApi`
the MCP tools call on ``serve`` and ``ingest`` (``/mcp``), over the same services as the HTTP routes;
and what both adapters share: who the caller is (:func:`caller_of`) and how a service's refusal
becomes a status, a code and one line (:func:`refusal`).

So a tool call through ``/mcp`` is answered exactly as the matching ``/api/*`` request would be (the
same JSON object, the same refusals as :class:`~hivestream.mcp.agent_api.AgentApiError`), and it is
recorded once, by the service (``kb-search``, ``kb-content``, ``memory-recall``, the submission
itself), with the runtime ``mcp``; the runtime's ``PostToolUse`` copy of a call to the MCP server
named ``hivestream`` derives nothing (:func:`streams.experiences.from_hooks.answered_by_hivestream`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

import duckdb

from hivestream.mcp.agent_api import AgentApiError
from hivestream.services.experiences import Caller, ExperienceService, ServiceError
from hivestream.services.readers import ReadUnavailable, Stale
from hivestream.services.recall import RecallService
from streams.ingest.auth import Grant, Scope

T = TypeVar("T")


@dataclass(frozen=True)
class Refusal:
    """A refused call as HTTP answers it: ``status`` (4xx, or 503 when the projection or the log
    cannot serve now, to be retried), ``code`` and a one-line ``detail``."""

    status: int
    code: str
    detail: str

    @property
    def retry(self) -> bool:
        """Whether the client should retry later (``Retry-After``)."""
        return self.status == 503


def refusal(e: BaseException) -> Refusal | None:
    """What ``e``, raised by a service, answers; ``None`` for an exception that is not a refusal
    (a bug: it propagates). Services' :class:`ServiceError` keep their status and code; a stale
    snapshot is ``503 stale``, an unreadable projection ``503 unavailable``, a projection DuckDB
    cannot open or query ``503 no_projection`` (its first line only)."""
    if isinstance(e, ServiceError):
        return Refusal(e.status, e.code, e.detail[:500])
    if isinstance(e, Stale):
        return Refusal(503, "stale", str(e)[:500])
    if isinstance(e, ReadUnavailable):
        return Refusal(503, "unavailable", str(e)[:500])
    if isinstance(e, duckdb.Error):
        line = (str(e).splitlines() or [type(e).__name__])[0]
        return Refusal(503, "no_projection", f"the projection cannot answer (is it built yet?): {type(e).__name__}: {line}"[:300])
    return None


def caller_of(grant: Grant, *, runtime: str, session: object = None) -> Caller:
    """The service's :class:`Caller` for a request authenticated as ``grant``: the agent is the
    token's gateway id, ``runtime`` the adapter (``api``, ``mcp``), ``session`` the session key when
    the caller names one (a string), and a caller holding the review scope may review."""
    return Caller(agent_id=grant.gateway_id, session_key=session if isinstance(session, str) else "", runtime=runtime,
                  reviewer=Scope.REVIEW in grant.scopes)


class LocalAgentApi:
    """:class:`~hivestream.mcp.agent_api.AgentApi` over this process's services, for the MCP tools on
    ``/mcp`` (the caller is the grant the mount authenticated; its runtime is ``mcp``).

    Args:
        experiences: the knowledge base service.
        recall: the frames recall service (``None``: ``memory_search`` is refused ``503 unavailable``).

    Every method raises :class:`~hivestream.mcp.agent_api.AgentApiError` for what the HTTP route
    answers with a 4xx or 503 (:func:`refusal`), and ``401 unauthorized`` without a caller.
    """

    RUNTIME = "mcp"

    def __init__(self, experiences: ExperienceService, recall: RecallService | None) -> None:
        self.experiences = experiences
        self.recall = recall

    def _caller(self, grant: Grant | None) -> Caller:
        if grant is None:  # the mount always names one; an unauthenticated call is refused, never served as someone
            raise AgentApiError(401, "unauthorized", "no authenticated caller")
        return caller_of(grant, runtime=self.RUNTIME)

    @staticmethod
    async def _call(work: Awaitable[T]) -> T:
        try:
            return await work
        except Exception as e:
            r = refusal(e)
            if r is None:
                raise
            raise AgentApiError(r.status, r.code, r.detail) from None

    async def search(self, query: str, *, agent_id: str | None = None, limit: int = 5, caller: Grant | None = None) -> dict[str, Any]:
        """``GET /api/search``'s answer (see the protocol)."""
        who = self._caller(caller)
        return {"results": await self._call(self.experiences.search(query, caller=who, agent_id=agent_id, limit=limit))}

    async def submit(self, experience: dict[str, Any], *, caller: Grant | None = None) -> dict[str, Any]:
        """``POST /api/submit``'s answer: ``{"id", "status"}``."""
        who = self._caller(caller)
        done = await self._call(self.experiences.submit(experience, caller=who))
        return {"id": done.id, "status": done.status}

    async def content(self, experience_id: str, *, caller: Grant | None = None) -> dict[str, Any]:
        """``GET /api/content/{id}``'s answer (404 ``not_found`` for an unknown or quarantined id)."""
        who = self._caller(caller)
        return await self._call(self.experiences.content(experience_id, caller=who))

    async def memory_search(self, query: str, *, project: str | None = None, limit: int = 5, scope: str = "project",
                            caller: Grant | None = None) -> dict[str, Any]:
        """``GET /api/memory/search``'s answer."""
        who = self._caller(caller)
        if self.recall is None:
            raise AgentApiError(503, "unavailable", "this server has no frames projection to recall from")
        return {"results": await self._call(self.recall.search(query, caller=who, project=project, limit=limit, scope=scope))}
