"""An in-memory agent API for the MCP tests: :class:`FakeAgentApi` implements
:class:`hivestream.mcp.agent_api.AgentApi` (BM25 over approved experiences with the real
:func:`streams.experiences.search.search`, submissions pending, an injection quarantined, frames
recalled per project), and :func:`contract_app` serves it over HTTP as the agent API contract's
routes (``/api/search``, ``/api/submit``, ``/api/content/{id}``, ``/api/memory/search``, bearer
token optional), for the HTTP client and ``hivestream mcp`` over stdio. The tools against the real
services: ``tests/hivestream/test_mcp_serve.py`` and ``tests/hivestream/test_mcp_runtimes.py``."""

from __future__ import annotations

import hashlib
from typing import Any

from aiohttp import web

from hivestream.mcp.agent_api import AgentApiError
from streams.experiences.search import SearchDoc, search
from streams.ingest.auth import Grant

LIMITS = {"task": 2000, "resource": 4000, "result": 8000}


class FakeAgentApi:
    """Experiences and frames in dicts; ``calls`` records (method, arguments, caller) of every call."""

    def __init__(self) -> None:
        self.experiences: dict[str, dict[str, Any]] = {}
        self.frames: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any], Grant | None]] = []

    def add(self, task: str, resource: str, result: str, *, status: str = "approved", confidence: float = 0.9,
            agent_ids: tuple[str, ...] = ()) -> str:
        """Store an experience as it would be after review; returns its id."""
        eid = "exp-" + hashlib.sha256(f"{task}\n{resource}\n{result}".encode()).hexdigest()[:16]
        self.experiences[eid] = {"id": eid, "task": task, "resource": resource, "result": result, "confidence": confidence,
                                 "status": status, "agent_ids": list(agent_ids)}
        return eid

    async def search(self, query: str, *, agent_id: str | None = None, limit: int = 5, caller: Grant | None = None) -> dict[str, Any]:
        """BM25 over the approved experiences."""
        self.calls.append(("search", {"q": query, "agent_id": agent_id, "limit": limit}, caller))
        if not 1 <= limit <= 20:
            raise AgentApiError(400, "invalid", f"limit must be 1..20, got {limit}")
        docs = [SearchDoc(e["id"], e["task"], e["resource"], e["result"], e["status"], tuple(e["agent_ids"])) for e in self.experiences.values()]
        hits = search(docs, query, k=limit, agent_id=agent_id)
        return {"results": [{"id": h.doc.experience_id, "title": h.doc.task.split("\n")[0][:120], "task": h.doc.task,
                             "resource": h.doc.resource, "result": h.doc.result,
                             "confidence": self.experiences[h.doc.experience_id]["confidence"], "score": h.score, "status": h.doc.status}
                            for h in hits]}

    async def submit(self, experience: dict[str, Any], *, caller: Grant | None = None) -> dict[str, Any]:
        """Pending (quarantined when it reads as an order to the model); 400 for a missing or oversized field."""
        self.calls.append(("submit", dict(experience), caller))
        for k, n in LIMITS.items():
            v = experience.get(k)
            if not isinstance(v, str) or (k != "resource" and not v.strip()):
                raise AgentApiError(400, "invalid", f"{k} is required")
            if len(v) > n:
                raise AgentApiError(400, "invalid", f"{k} has {len(v)} characters, at most {n}")
        text = " ".join(str(experience.get(k, "")) for k in LIMITS).lower()
        status = "quarantined" if "ignore previous instructions" in text else "pending"
        eid = self.add(experience["task"], experience["resource"], experience["result"], status=status,
                       confidence=float(experience.get("confidence", 0.5)), agent_ids=(str(experience.get("agent_id") or ""),))
        return {"id": eid, "status": status}

    async def content(self, experience_id: str, *, caller: Grant | None = None) -> dict[str, Any]:
        """The stored experience; 404 for an unknown id."""
        self.calls.append(("content", {"id": experience_id}, caller))
        if experience_id not in self.experiences:
            raise AgentApiError(404, "not_found", f"no experience {experience_id!r}")
        return dict(self.experiences[experience_id])

    async def memory_search(self, query: str, *, project: str | None = None, limit: int = 5, scope: str = "project",
                            caller: Grant | None = None) -> dict[str, Any]:
        """Frames sharing a word with ``query``, of ``project`` unless ``scope`` is ``all``."""
        self.calls.append(("memory_search", {"q": query, "project": project, "limit": limit, "scope": scope}, caller))
        if scope == "project" and not project:
            raise AgentApiError(400, "invalid", "project is required unless scope=all")
        words = set(query.lower().split())
        rows = [f for f in self.frames if (scope == "all" or f["project"] == project) and words & set(f["content"].lower().split())]
        return {"results": [{**f, "score": float(len(words & set(f["content"].lower().split())))} for f in rows][:limit]}


def contract_app(api: FakeAgentApi, token: str | None = None) -> web.Application:
    """The agent API contract's routes over ``api`` (401 without ``token`` when one is set)."""

    def error(status: int, code: str, detail: str) -> web.Response:
        return web.json_response({"error": code, "detail": detail}, status=status)

    async def call(request: web.Request, go: Any) -> web.Response:
        if token is not None and request.headers.get("Authorization") != f"Bearer {token}":
            return error(401, "unauthorized", "missing or unknown bearer token")
        try:
            return web.json_response(await go())
        except AgentApiError as e:
            return error(e.status, e.code, e.detail)

    async def do_search(request: web.Request) -> web.Response:
        q = request.query
        return await call(request, lambda: api.search(q.get("q", ""), agent_id=q.get("agent_id"), limit=int(q.get("limit", "5"))))

    async def do_submit(request: web.Request) -> web.Response:
        body = await request.json()
        return await call(request, lambda: api.submit(body))

    async def do_content(request: web.Request) -> web.Response:
        return await call(request, lambda: api.content(request.match_info["id"]))

    async def do_memory(request: web.Request) -> web.Response:
        q = request.query
        return await call(request, lambda: api.memory_search(q.get("q", ""), project=q.get("project"), limit=int(q.get("limit", "5")),
                                                             scope=q.get("scope", "project")))

    app = web.Application()
    app.router.add_get("/api/search", do_search)
    app.router.add_post("/api/submit", do_submit)
    app.router.add_get("/api/content/{id}", do_content)
    app.router.add_get("/api/memory/search", do_memory)
    return app
