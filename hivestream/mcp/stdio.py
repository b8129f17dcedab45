"""``hivestream mcp``: the MCP server over stdio, for runtimes that start a process per server.

A thin client of the agent API (:class:`~hivestream.mcp.http_client.HttpAgentApi`: ``$HIVESTREAM_URL``,
``$HIVESTREAM_AGENT_TOKEN``): the tools are those of ``/mcp`` (:func:`hivestream.mcp.tools.build_server`).
``memory_search`` recalls the project the process runs in unless the agent names another (the
workspace name frames carry: :func:`streams.model.workspace.workspace_name` of the working
directory). stdout carries the protocol only; log lines (warnings and up) go to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys

from hivestream.mcp.http_client import HttpAgentApi
from hivestream.mcp.tools import build_server
from streams.model.workspace import workspace_name


def run(*, url: str | None = None, timeout_s: float = 20.0, agent_id: str | None = None, project: str | None = None) -> int:
    """Serve MCP on stdin/stdout until stdin closes; returns the exit code (2 with one line on
    stderr for a bad URL, 0 otherwise)."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="hivestream mcp: %(levelname)s %(message)s")
    try:
        api = HttpAgentApi.from_env(url=url, timeout_s=timeout_s)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    server = build_server(api, default_project=project or workspace_name(os.getcwd()), agent_id=agent_id or os.environ.get("HIVESTREAM_AGENT_ID"))

    async def main() -> None:
        try:
            await server.run_stdio_async()
        finally:
            await api.aclose()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0
