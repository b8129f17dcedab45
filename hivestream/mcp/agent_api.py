"""What the MCP tools call: the agent API (``/api/search``, ``/api/submit``, ``/api/content/{id}``,
``/api/memory/search``) as an async protocol.

Each method answers the JSON object the HTTP route answers (the contract in docs/agents.md, the agent API
section): :class:`~hivestream.mcp.http_client.HttpAgentApi` asks a server over HTTP (``hivestream
mcp`` over stdio); an in-process implementation calls the service layer directly (``/mcp`` on serve
and ingest). A refusal is an :class:`AgentApiError`, never another exception type.
"""

from __future__ import annotations

from typing import Any, Protocol

from streams.ingest.auth import Grant


class AgentApiError(Exception):
    """A refused or failed call: the HTTP status (``0``: no answer: unreachable, timed out), the
    error code (``not_found``, ``unauthorized``, ``unreachable``, …) and a one-line detail free of
    tokens. ``str()`` is the line a tool shows the agent."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        """Args: status: the HTTP status or 0; code: the contract's error code; detail: one line."""
        self.status = status
        self.code = code
        self.detail = " ".join(detail.split())[:300]
        super().__init__(f"{code}: {self.detail}" if self.detail else code)


class AgentApi(Protocol):
    """The agent API. ``caller`` is who asks, as the mount authenticated them (``None`` over stdio,
    where the server knows the caller by the token the client sends); an in-process implementation
    uses it for provenance, the HTTP client ignores it.

    Every method raises :class:`AgentApiError` for a refusal (4xx), an unreachable server or an
    answer that is not the contract's JSON object.
    """

    async def search(self, query: str, *, agent_id: str | None = None, limit: int = 5, caller: Grant | None = None) -> dict[str, Any]:
        """``GET /api/search``: ``{"results": [{"id", "title", "task", "resource", "result", "confidence", "score", "status"}]}``
        (approved experiences by BM25, best first; ``limit`` 1..20)."""
        ...

    async def submit(self, experience: dict[str, Any], *, caller: Grant | None = None) -> dict[str, Any]:
        """``POST /api/submit`` with ``{"task", "resource", "result", "confidence"?, "agent_id"?,
        "submitted_by"?, "session_key"?}``: ``{"id", "status"}`` (``pending``, ``approved`` or ``quarantined``)."""
        ...

    async def content(self, experience_id: str, *, caller: Grant | None = None) -> dict[str, Any]:
        """``GET /api/content/{id}``: ``{"id", "task", "resource", "result", "confidence", "status", ...}``;
        :class:`AgentApiError` with status 404 for an unknown id."""
        ...

    async def memory_search(self, query: str, *, project: str | None = None, limit: int = 5, scope: str = "project",
                            caller: Grant | None = None) -> dict[str, Any]:
        """``GET /api/memory/search``: ``{"results": [frame, ...]}``, ranked deduplicated frames with
        their provenance (``id``/``frame_id``, ``content``, ``project``, ``score``, ``sources``,
        ``access_count``, first and last seen); ``scope`` ``project`` (``project``'s frames) or ``all``."""
        ...
