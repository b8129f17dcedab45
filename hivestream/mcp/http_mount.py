"""``/mcp``: the MCP server over streamable HTTP on an aiohttp application (serve's and ingest's).

The SDK serves streamable HTTP as an ASGI application; serve and ingest are aiohttp. Rather than a
general ASGI bridge (or a second server on another port behind a proxy), this module hands each
request to the SDK's session manager
(:class:`mcp.server.streamable_http_manager.StreamableHTTPSessionManager`) through a thin aiohttp
handler: it authenticates first (the ``authorize`` callback of the server, the same tokens and
scopes as the HTTP routes), reads the body itself (size cap, read timeout), builds the ASGI scope
(with the caller's :class:`~streams.ingest.auth.Grant` under
:data:`~hivestream.mcp.tools.GRANT_KEY`) and writes what the SDK sends as an aiohttp response.

The manager runs *stateless* with JSON answers: every POST is answered on its own (no session to
keep, lose at a restart or hold memory for; no open stream to hold a shutdown), which is all the four
tools need. So ``GET`` (a server-to-client event stream) and ``DELETE`` (ending a session) are
``405``, as the streamable HTTP transport allows. On a loopback bind the SDK's DNS-rebinding guard
is on (``Host`` and ``Origin`` must be loopback names), as the SDK sets it for a loopback server.
The manager runs for the application's lifetime in a task of its own (its task group must be
entered and left by one task).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any

import orjson
from aiohttp import web
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from hivestream.mcp.agent_api import AgentApi
from hivestream.mcp.tools import GRANT_KEY, build_server
from streams.ingest.auth import Grant, is_loopback

log = logging.getLogger("hivestream.mcp")
MCP_PATH = "/mcp"

Authorize = Callable[[web.Request], "Grant | web.Response"]
"""The server's check of a request to ``/mcp``: the caller's grant, or the 401/403 to answer."""


def _json(status: int, error: str, detail: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps({"error": error, "detail": detail}), status=status, headers=headers, content_type="application/json")


class McpEndpoint:
    """``/mcp`` over ``api`` for one aiohttp application.

    Args:
        api: the agent API the tools call.
        authorize: the server's authentication and scope check (see :data:`Authorize`).
        host: the address the server binds (loopback: the DNS-rebinding guard is on).
        max_body_bytes: largest request body (bytes; larger: 413).
        read_timeout_s: time allowed to receive a body (seconds; slower: 408).
    """

    def __init__(self, api: AgentApi, authorize: Authorize, *, host: str, max_body_bytes: int, read_timeout_s: float) -> None:
        self._authorize = authorize
        self._max_body = max_body_bytes
        self._read_timeout_s = read_timeout_s
        security = None
        if is_loopback(host):
            security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                                 allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
                                                 allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"])
        server = build_server(api)
        self._manager = StreamableHTTPSessionManager(server._lowlevel_server, json_response=True, stateless=True, security_settings=security,
                                                     max_request_body_size=max_body_bytes)
        logging.getLogger("mcp").setLevel(logging.WARNING)  # the SDK logs every request at INFO

    def add_to(self, app: web.Application) -> None:
        """Route ``/mcp`` (every method) to this endpoint and run the session manager with ``app``."""
        app.router.add_route("*", MCP_PATH, self.handle)
        app.cleanup_ctx.append(self._lifespan)

    async def _lifespan(self, _app: web.Application) -> AsyncIterator[None]:
        started, stop = asyncio.Event(), asyncio.Event()

        async def run() -> None:
            async with self._manager.run():
                started.set()
                await stop.wait()

        task = asyncio.get_running_loop().create_task(run(), name="hivestream-mcp")
        waiter = asyncio.ensure_future(started.wait())
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
        if not started.is_set():
            waiter.cancel()
            task.result()  # the manager failed to start: raise its error
        try:
            yield
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """One request to ``/mcp``: 401/403 from ``authorize``; 405 for a method other than POST; 413,
        408 for a body too large or too slow; else the SDK's answer."""
        who = self._authorize(request)
        if isinstance(who, web.Response):
            return who
        if request.method != "POST":
            return _json(405, "method_not_allowed", "this MCP server is stateless: POST JSON-RPC messages to /mcp (no event stream, no session)",
                         {"Allow": "POST"})
        if request.content_length is not None and request.content_length > self._max_body:
            return _json(413, "body_too_large", f"body of {request.content_length} bytes is over the {self._max_body}-byte limit")
        try:
            async with asyncio.timeout(self._read_timeout_s):
                body = await self._read(request)
        except TimeoutError:
            return _json(408, "client_timeout", f"body not received within {self._read_timeout_s:g} s")
        if body is None:
            return _json(413, "body_too_large", f"body is over the {self._max_body}-byte limit")
        return await self._asgi(request, body, who)

    async def _read(self, request: web.Request) -> bytes | None:
        chunks: list[bytes] = []
        total = 0
        while chunk := await request.content.read(65_536):
            total += len(chunk)
            if total > self._max_body:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    async def _asgi(self, request: web.Request, body: bytes, grant: Grant) -> web.StreamResponse:
        """Run the SDK's ASGI handler on ``body``; its ``http.response.*`` messages become an aiohttp response."""
        peer = request.transport.get_extra_info("peername") if request.transport is not None else None
        sock = request.transport.get_extra_info("sockname") if request.transport is not None else None
        scope: dict[str, Any] = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": f"{request.version.major}.{request.version.minor}",
            "method": request.method, "scheme": request.scheme, "path": request.path, "raw_path": request.raw_path.split("?", 1)[0].encode(),
            "root_path": "", "query_string": request.query_string.encode("latin-1"),
            "headers": [(k.lower(), v) for k, v in request.raw_headers],
            "client": tuple(peer[:2]) if isinstance(peer, tuple) else None, "server": tuple(sock[:2]) if isinstance(sock, tuple) else None,
            GRANT_KEY: grant,
        }
        done = asyncio.Event()
        delivered = False
        response: web.StreamResponse | None = None

        async def receive() -> MutableMapping[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()  # nothing more comes: the client "disconnects" once the answer is written
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            nonlocal response
            if message["type"] == "http.response.start":
                response = web.StreamResponse(status=int(message["status"]))
                for k, v in message.get("headers", ()):
                    response.headers.add(k.decode("latin-1"), v.decode("latin-1"))
                await response.prepare(request)
            elif message["type"] == "http.response.body" and response is not None:
                data = message.get("body", b"")
                if data:
                    await response.write(data)
                if not message.get("more_body", False):
                    await response.write_eof()
                    done.set()

        try:
            await self._manager.handle_request(scope, receive, send)
        except Exception as e:  # a failure of the SDK's, not of the input: one line, never the request's content
            log.warning("/mcp: the MCP handler failed: %s", type(e).__name__)
            if response is None:
                return _json(500, "mcp_failed", "the MCP handler failed; see the server's log")
        finally:
            done.set()
        if response is None:
            return _json(500, "mcp_failed", "the MCP handler gave no answer")
        return response
