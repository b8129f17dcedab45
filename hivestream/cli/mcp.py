"""``hivestream mcp``: the MCP server over stdio (:mod:`hivestream.mcp.stdio`)."""

from __future__ import annotations

from typing import Annotated

import typer


def mcp(
    url: Annotated[str | None, typer.Option("--url", envvar="HIVESTREAM_URL", show_envvar=True,
                                            help="the hivestream server, serve or ingest (default http://127.0.0.1:8787)")] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=0.5, max=600, help="seconds a tool waits for the server")] = 20.0,
    agent_id: Annotated[str | None, typer.Option("--agent-id", envvar="HIVESTREAM_AGENT_ID", help="sent with every kb_submit")] = None,
    project: Annotated[str | None, typer.Option("--project", help="memory_search's default project (default: the working directory's name)")] = None,
) -> None:
    """Serve the MCP tools (kb_search, kb_submit, kb_content, memory_search) on stdin/stdout; the bearer
    token comes from HIVESTREAM_AGENT_TOKEN."""
    from hivestream.mcp.stdio import run

    raise typer.Exit(run(url=url, timeout_s=timeout, agent_id=agent_id, project=project))


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to the main app."""
    app.command("mcp")(mcp)
