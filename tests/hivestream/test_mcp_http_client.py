"""The agent API's HTTP client (what ``hivestream mcp`` calls): the contract's requests, and every
failure one line without the token."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from hivestream.mcp.agent_api import AgentApiError
from hivestream.mcp.http_client import MAX_ANSWER_BYTES, HttpAgentApi

TOKEN = "secret-agent-token-0123456789"


def _api(handler: httpx.MockTransport | None = None, **kw: float) -> HttpAgentApi:
    return HttpAgentApi("http://127.0.0.1:8787/", TOKEN, transport=handler, **kw)


async def _fails(api: HttpAgentApi) -> AgentApiError:
    with pytest.raises(AgentApiError) as info:
        await api.search("kafka")
    await api.aclose()
    assert TOKEN not in str(info.value) and "\n" not in str(info.value)
    return info.value


async def test_the_contracts_requests() -> None:
    seen: list[httpx.Request] = []

    def answer(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json={"results": [], "id": "exp-1", "status": "pending"})

    api = _api(httpx.MockTransport(answer))
    await api.search("kafka rebalancing", agent_id="a-1", limit=7)
    await api.submit({"task": "t", "resource": "r", "result": "x"})
    await api.content("exp/1 ?#")
    await api.memory_search("fix", project="tidepool", limit=3, scope="all")
    await api.aclose()
    assert [(r.method, r.url.raw_path.decode()) for r in seen] == [
        ("GET", "/api/search?q=kafka+rebalancing&limit=7&agent_id=a-1"), ("POST", "/api/submit"), ("GET", "/api/content/exp%2F1%20%3F%23"),
        ("GET", "/api/memory/search?q=fix&limit=3&scope=all&project=tidepool")]
    assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in seen)
    assert json.loads(seen[1].content) == {"task": "t", "resource": "r", "result": "x"}


async def test_a_refusal_is_the_servers_code_and_detail() -> None:
    e = await _fails(_api(httpx.MockTransport(lambda _r: httpx.Response(403, json={"error": "forbidden", "detail": "needs\nthe agent scope"}))))
    assert (e.status, e.code, str(e)) == (403, "forbidden", "forbidden: needs the agent scope")
    e = await _fails(_api(httpx.MockTransport(lambda _r: httpx.Response(502, text="<html>Bad Gateway</html>\nmore"))))
    assert (e.status, str(e)) == (502, "http_502: <html>Bad Gateway</html>")


async def test_an_answer_that_is_not_the_contracts_is_bad_answer() -> None:
    e = await _fails(_api(httpx.MockTransport(lambda _r: httpx.Response(200, text="[1, 2]"))))
    assert e.code == "bad_answer" and str(e) == "bad_answer: http://127.0.0.1:8787/api/search answered HTTP 200 without a JSON object"
    e = await _fails(_api(httpx.MockTransport(lambda _r: httpx.Response(200, content=b"{" + b" " * MAX_ANSWER_BYTES + b"}"))))
    assert e.code == "bad_answer" and "more than" in str(e)


async def test_a_server_that_does_not_answer_in_time_is_a_timeout() -> None:
    async def slow(_server_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)
        w.close()

    server = await asyncio.start_server(slow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        api = HttpAgentApi(f"http://127.0.0.1:{port}", TOKEN, timeout_s=0.3)
        e = await _fails(api)
    finally:
        server.close()
    assert (e.status, e.code) == (0, "timeout") and str(e) == f"timeout: http://127.0.0.1:{port}/api/search did not answer within 0.3 s"


def test_a_bad_url_is_refused_at_once() -> None:
    for bad in ("ftp://x", "http://user:pw@host", "127.0.0.1:8787", "http://h/?q=1"):
        with pytest.raises(ValueError, match="must be http"):
            HttpAgentApi(bad)
    assert HttpAgentApi.from_env({}).base_url == "http://127.0.0.1:8787"
    assert HttpAgentApi.from_env({"HIVESTREAM_URL": "https://kb.example:9/base/"}).base_url == "https://kb.example:9/base"
