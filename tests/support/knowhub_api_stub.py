"""A stand-in for hivestream's ``POST /api/extract`` and ``POST /v1/hooks/{runtime}`` that holds or
fails its answers on purpose and records every request: for the OpenClaw plugin's tests that show the
plugin never waits for the network and turns a failing API into a tool error (everything else runs
against a real ``hivestream serve``). Other ``/api`` routes answer 404. Runs aiohttp on its own event
loop in a thread, on a free loopback port.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Seen:
    """One request: method, path, query (dict), the Authorization header, the body (parsed JSON, or NDJSON lines for hooks)."""

    method: str
    path: str
    query: dict[str, str]
    auth: str | None
    body: Any


@dataclass
class KnowHubStub:
    """The stand-in. ``extraction``: whether ``/api/extract`` accepts (202) or answers 409;
    ``hold_extract_s`` / ``hold_first_hook_s``: seconds those answers wait (to show a caller does not
    wait for them); ``fail_api``: answer every ``/api`` request 500."""

    extraction: bool = False
    hold_extract_s: float = 0.0
    hold_first_hook_s: float = 0.0
    fail_api: bool = False
    seen: list[Seen] = field(default_factory=list)
    hook_lines: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._hooks = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the KnowHub stub did not start")

    def requests(self, path_prefix: str) -> list[Seen]:
        """The requests whose path starts with ``path_prefix``, in arrival order."""
        with self._lock:
            return [s for s in self.seen if s.path.startswith(path_prefix)]

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        self._ready.set()
        self._loop.run_forever()

    def close(self) -> None:
        """Stop serving and release the port."""
        async def stop() -> None:
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)

    async def _handle(self, req: web.Request) -> web.Response:
        raw = await req.read()
        path = req.path
        if path.startswith("/v1/hooks/"):
            lines = [json.loads(ln) for ln in raw.decode().splitlines() if ln.strip()]
            with self._lock:
                self.seen.append(Seen(req.method, path, dict(req.query), req.headers.get("Authorization"), lines))
                self._hooks += 1
                first = self._hooks == 1
            if first and self.hold_first_hook_s:
                await asyncio.sleep(self.hold_first_hook_s)
            with self._lock:
                self.hook_lines += lines
            return web.json_response({"accepted": len(lines), "rejected": 0, "dead_lettered": 0, "truncated": False, "durable": "log"})
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                return _err(400, "malformed_json", "the body is not JSON")
        with self._lock:
            self.seen.append(Seen(req.method, path, dict(req.query), req.headers.get("Authorization"), body))
        if self.fail_api:
            return web.Response(status=500, text="internal error")
        return await self._api(req.method, path, dict(req.query), body)

    async def _api(self, method: str, path: str, q: dict[str, str], body: Any) -> web.Response:
        if method == "POST" and path == "/api/extract":
            if not self.extraction:
                return _err(409, "extraction_disabled", "the server has no extractor")
            if self.hold_extract_s:
                await asyncio.sleep(self.hold_extract_s)
            return web.json_response({"request_id": f"req-{len(self.seen)}"}, status=202)
        return _err(404, "not_found", f"no route {method} {path}")


def _err(status: int, code: str, detail: str) -> web.Response:
    return web.json_response({"error": code, "detail": detail}, status=status)
