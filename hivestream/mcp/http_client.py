"""The agent API over HTTP (:class:`~hivestream.mcp.agent_api.AgentApi` as a client of serve's or
ingest's ``/api/*`` routes): what ``hivestream mcp`` over stdio calls.

The server is ``$HIVESTREAM_URL`` (default ``http://127.0.0.1:8787``, serve's and ingest's default
address), the bearer token ``$HIVESTREAM_AGENT_TOKEN`` (a token with the ``agent`` scope; none is
needed on loopback without a tokens file). Each call has a connect timeout and an overall timeout
and reads at most :data:`MAX_ANSWER_BYTES`; every failure is an
:class:`~hivestream.mcp.agent_api.AgentApiError` with one line (the server's own ``detail`` for a
4xx, what went wrong otherwise), never a traceback and never the token.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from typing import Any

import httpx

from hivestream.mcp.agent_api import AgentApiError
from streams.ingest.auth import Grant

URL_ENV = "HIVESTREAM_URL"
TOKEN_ENV = "HIVESTREAM_AGENT_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8787"
CONNECT_TIMEOUT_S = 3.0
"""How long a call waits to connect (seconds)."""
TIMEOUT_S = 20.0
"""How long a call waits for the whole answer (seconds)."""
MAX_ANSWER_BYTES = 4 << 20
"""Largest answer read (bytes); a larger one is refused as ``bad_answer``."""
_URL = re.compile(r"https?://[^\s/?#@]+(?:/[^\s?#]*)?")


class HttpAgentApi:
    """:class:`~hivestream.mcp.agent_api.AgentApi` against ``base_url``'s ``/api/*`` routes.

    Raises (constructor):
        ValueError: ``base_url`` is not ``http(s)://host[:port][/path]`` (no credentials, query or fragment).
    """

    def __init__(self, base_url: str, token: str | None = None, *, timeout_s: float = TIMEOUT_S, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        """Args: base_url: the server; token: the bearer token (``None``: no header); timeout_s,
        connect_timeout_s: per call (seconds); transport: an httpx transport (tests)."""
        base = base_url.strip().rstrip("/")
        if not _URL.fullmatch(base):
            raise ValueError(f"the hivestream URL must be http(s)://host[:port][/path], got {base_url[:200]!r}")
        self.base_url = base
        self._headers = {"Accept": "application/json", "User-Agent": "hivestream-mcp"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self._timeout_s = timeout_s
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, *, url: str | None = None, timeout_s: float = TIMEOUT_S) -> HttpAgentApi:
        """The client of ``url`` (else ``$HIVESTREAM_URL``, else :data:`DEFAULT_URL`) with the token of
        ``$HIVESTREAM_AGENT_TOKEN``.

        Raises:
            ValueError: a URL that is not ``http(s)://host[:port][/path]``.
        """
        e = os.environ if env is None else env
        return cls(url or e.get(URL_ENV) or DEFAULT_URL, e.get(TOKEN_ENV) or None, timeout_s=timeout_s)

    async def aclose(self) -> None:
        """Close the connection pool (idempotent)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _call(self, method: str, path: str, *, params: dict[str, str] | None = None, body: dict[str, Any] | None = None) -> dict[str, Any]:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout, transport=self._transport, trust_env=False, follow_redirects=False)
        where = f"{self.base_url}{urllib.parse.urlsplit(path).path}"
        try:
            async with self._client.stream(method, self.base_url + path, params=params, json=body, headers=self._headers) as resp:
                raw = b""
                async for chunk in resp.aiter_bytes():
                    raw += chunk
                    if len(raw) > MAX_ANSWER_BYTES:
                        raise AgentApiError(resp.status_code, "bad_answer", f"{where} answered more than {MAX_ANSWER_BYTES} bytes")
                status = resp.status_code
        except httpx.ConnectError:
            raise AgentApiError(0, "unreachable", f"no hivestream server answers at {self.base_url} (start `hivestream serve`, "
                                                  f"or set {URL_ENV})") from None
        except httpx.TimeoutException:
            raise AgentApiError(0, "timeout", f"{where} did not answer within {self._timeout_s:g} s") from None
        except httpx.HTTPError as e:
            raise AgentApiError(0, "unreachable", f"{where}: {type(e).__name__}") from None
        try:
            obj = json.loads(raw) if raw else None
        except ValueError:
            obj = None
        if status >= 400:
            if isinstance(obj, dict) and isinstance(obj.get("error"), str):
                raise AgentApiError(status, obj["error"], str(obj.get("detail") or ""))
            text = raw[:200].decode("utf-8", "replace").splitlines()
            raise AgentApiError(status, f"http_{status}", text[0] if text else f"{where} answered HTTP {status}")
        if not isinstance(obj, dict):
            raise AgentApiError(status, "bad_answer", f"{where} answered HTTP {status} without a JSON object")
        return obj

    async def search(self, query: str, *, agent_id: str | None = None, limit: int = 5, caller: Grant | None = None) -> dict[str, Any]:
        """``GET /api/search?q=&agent_id=&limit=`` (``caller`` is ignored: the token says who asks)."""
        params = {"q": query, "limit": str(limit)}
        if agent_id:
            params["agent_id"] = agent_id
        return await self._call("GET", "/api/search", params=params)

    async def submit(self, experience: dict[str, Any], *, caller: Grant | None = None) -> dict[str, Any]:
        """``POST /api/submit`` with ``experience`` as the JSON body."""
        return await self._call("POST", "/api/submit", body=experience)

    async def content(self, experience_id: str, *, caller: Grant | None = None) -> dict[str, Any]:
        """``GET /api/content/{id}`` (the id percent-encoded as one path segment)."""
        return await self._call("GET", "/api/content/" + urllib.parse.quote(experience_id, safe=""))

    async def memory_search(self, query: str, *, project: str | None = None, limit: int = 5, scope: str = "project",
                            caller: Grant | None = None) -> dict[str, Any]:
        """``GET /api/memory/search?q=&project=&limit=&scope=``."""
        params = {"q": query, "limit": str(limit), "scope": scope}
        if project:
            params["project"] = project
        return await self._call("GET", "/api/memory/search", params=params)
