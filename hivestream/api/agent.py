"""What an in-process adapter (the MCP server on ``serve`` and ``ingest``) calls: :class:`AgentApi`,
the four agent operations of the services, with the caller named by the adapter.

Shape (every method async; errors are :class:`~hivestream.services.experiences.ServiceError`
subclasses with ``status``, ``code`` and a one-line ``detail``, or
:class:`~hivestream.services.readers.ReadUnavailable`):

* ``search(q, *, caller, agent_id=None, limit=None) -> list[dict]``: ``{id, title, task, resource,
  result, confidence, status, score}`` per hit, best first (approved experiences only).
* ``submit(fields, *, caller) -> Submitted``: ``fields`` as ``POST /api/submit`` takes them;
  ``Submitted(id, status, event_id)``.
* ``content(experience_id, *, caller) -> dict``: the experience (``NotFound`` for an unknown or quarantined one).
* ``memory_search(q, *, caller, project=None, limit=None, scope=None) -> list[dict]``: frames recall.

Each call is recorded once, as the HTTP route's is (``kb-search``, ``kb-content``,
``memory-recall``, the submission itself); the runtime's ``PostToolUse`` copy of a call to the MCP
server named ``hivestream`` derives nothing (:func:`streams.experiences.from_hooks.answered_by_hivestream`).
"""

from __future__ import annotations

from typing import Any, Protocol

from hivestream.services.experiences import Caller, ExperienceService, Submitted
from hivestream.services.readers import ReadUnavailable
from hivestream.services.recall import RecallService


class AgentApi(Protocol):
    """The agent operations an adapter calls (see the module docstring)."""

    async def search(self, q: object, *, caller: Caller, agent_id: str | None = None, limit: object = None) -> list[dict[str, Any]]:
        """Approved experiences ranked for ``q``."""
        ...

    async def submit(self, fields: dict[str, Any], *, caller: Caller) -> Submitted:
        """Submit one experience."""
        ...

    async def content(self, experience_id: str, *, caller: Caller) -> dict[str, Any]:
        """One experience by id."""
        ...

    async def memory_search(self, q: object, *, caller: Caller, project: object = None, limit: object = None,
                            scope: object = None) -> list[dict[str, Any]]:
        """Frames recall."""
        ...


class LocalAgentApi:
    """:class:`AgentApi` over the services of this process.

    Args:
        experiences: the knowledge base service.
        recall: the frames recall service (``None``: :meth:`memory_search` raises ``ReadUnavailable``).
    """

    def __init__(self, experiences: ExperienceService, recall: RecallService | None) -> None:
        self.experiences = experiences
        self.recall = recall

    async def search(self, q: object, *, caller: Caller, agent_id: str | None = None, limit: object = None) -> list[dict[str, Any]]:
        """See :class:`AgentApi`."""
        return await self.experiences.search(q, caller=caller, agent_id=agent_id, limit=limit)

    async def submit(self, fields: dict[str, Any], *, caller: Caller) -> Submitted:
        """See :class:`AgentApi`."""
        return await self.experiences.submit(fields, caller=caller)

    async def content(self, experience_id: str, *, caller: Caller) -> dict[str, Any]:
        """See :class:`AgentApi`."""
        return await self.experiences.content(experience_id, caller=caller)

    async def memory_search(self, q: object, *, caller: Caller, project: object = None, limit: object = None,
                            scope: object = None) -> list[dict[str, Any]]:
        """See :class:`AgentApi`."""
        if self.recall is None:
            raise ReadUnavailable("this server has no frames projection to recall from")
        return await self.recall.search(q, caller=caller, project=project, limit=limit, scope=scope)
