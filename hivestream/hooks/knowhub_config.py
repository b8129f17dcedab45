"""Pure merges of hivestream's MCP server into Claude Code's and Codex's configuration (no file I/O).

* Claude Code: ``mcpServers.hivestream = {"type": "http", "url": URL/mcp, "headers"?:
  {"Authorization": "Bearer ${HIVESTREAM_AGENT_TOKEN}"}}`` in a JSON object (``~/.claude.json`` for
  the user scope, ``.mcp.json`` for a project), the form ``claude mcp add --transport http`` writes;
  Claude Code expands ``${VAR}`` in ``url`` and ``headers`` when it starts the server.
* Codex: ``[mcp_servers.hivestream]`` with ``url``, ``bearer_token_env_var`` (the variable's name,
  never the token) and ``startup_timeout_sec`` in ``config.toml``, edited with tomlkit so the user's
  comments, order and formatting stay as they were.

An entry named ``hivestream`` is hivestream's when it has exactly the shape written here (any URL
ending in ``/mcp``); anything else under that name is the user's: an install refuses to replace it
(one error line, nothing written) and an uninstall leaves it. The header or ``bearer_token_env_var``
is written only with ``token`` (the installer's rule: the variable is set where it runs, or the
server is not on loopback), since a loopback server without a tokens file needs none and Claude Code
would otherwise send ``Bearer`` with nothing after it.
"""

from __future__ import annotations

import copy
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Table

SERVER = "hivestream"
"""The MCP server's name in every runtime (its tools are ``mcp__hivestream__kb_search``, …)."""
TOKEN_ENV = "HIVESTREAM_AGENT_TOKEN"
STARTUP_TIMEOUT_S = 10
_AUTH = {"Authorization": f"Bearer ${{{TOKEN_ENV}}}"}


def mcp_url(url: str) -> str:
    """The ``/mcp`` endpoint of the server at ``url``."""
    return url.rstrip("/") + "/mcp"


def claude_entry(url: str, *, token: bool) -> dict[str, Any]:
    """Claude Code's ``mcpServers`` entry for the server at ``url`` (with ``token``: the bearer header)."""
    entry: dict[str, Any] = {"type": "http", "url": mcp_url(url)}
    if token:
        entry["headers"] = dict(_AUTH)
    return entry


def is_our_claude_entry(entry: Any) -> bool:
    """Whether ``entry`` has exactly the shape :func:`claude_entry` writes (any URL ending in ``/mcp``)."""
    return (isinstance(entry, dict) and set(entry) <= {"type", "url", "headers"} and entry.get("type") == "http"
            and isinstance(entry.get("url"), str) and entry["url"].endswith("/mcp") and entry.get("headers", _AUTH) == _AUTH)


def merge_claude(cfg: dict[str, Any], *, install: bool, url: str, token: bool, where: str) -> tuple[dict[str, Any], list[str]]:
    """``cfg`` (a copy) with ``mcpServers.hivestream`` added or replaced (``install``) or removed, and notes.

    Raises:
        ValueError: ``mcpServers`` is not an object, or (installing) its ``hivestream`` entry is not
            hivestream's; the message names ``where``.
    """
    out = copy.deepcopy(cfg)
    servers = out.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise ValueError(f"{where}: 'mcpServers' is not an object")
    mine = SERVER in servers and is_our_claude_entry(servers[SERVER])
    if SERVER in servers and not mine:
        if install:
            raise ValueError(f"{where} already has an MCP server named {SERVER!r} that hivestream did not write; "
                             f"remove or rename it and install again (nothing was changed)")
        return out, [f"{where}: left the MCP server {SERVER!r}, which hivestream did not write"]
    if install:
        out["mcpServers"] = {**servers, SERVER: claude_entry(url, token=token)}
    elif mine:
        rest = {k: v for k, v in servers.items() if k != SERVER}
        if rest:
            out["mcpServers"] = rest
        else:
            del out["mcpServers"]
    return out, []


def _codex_entry_ok(entry: Any) -> bool:
    if not isinstance(entry, dict) or not set(entry) <= {"url", "bearer_token_env_var", "startup_timeout_sec"}:
        return False
    url = entry.get("url")
    return isinstance(url, str) and url.endswith("/mcp") and entry.get("bearer_token_env_var", TOKEN_ENV) == TOKEN_ENV


def merge_codex(toml_text: str, *, install: bool, url: str, token: bool, where: str) -> tuple[str, list[str]]:
    """``config.toml`` text with ``[mcp_servers.hivestream]`` added or replaced (``install``) or
    removed, everything else kept byte for byte where tomlkit can (comments, order, spacing; blank
    lines at the end of the file become one newline); and notes. A ``[mcp_servers]`` table left
    empty by the removal is dropped unless the user wrote its header.

    Raises:
        ValueError: the text is not TOML, ``mcp_servers`` is not a table, or (installing) its
            ``hivestream`` entry is not hivestream's; the message names ``where``.
    """
    try:
        doc = tomlkit.parse(toml_text)
    except TOMLKitError as e:
        raise ValueError(f"{where}: not valid TOML ({str(e).splitlines()[0][:200]}); nothing was changed") from None
    servers = doc.get("mcp_servers")
    if servers is not None and not isinstance(servers, dict):
        raise ValueError(f"{where}: 'mcp_servers' is not a table")
    entry = servers.get(SERVER) if servers is not None else None
    mine = entry is not None and _codex_entry_ok(entry.unwrap() if hasattr(entry, "unwrap") else entry)
    if entry is not None and not mine:
        if install:
            raise ValueError(f"{where} already has [mcp_servers.{SERVER}] that hivestream did not write; "
                             f"remove or rename it and install again (nothing was changed)")
        return toml_text, [f"{where}: left [mcp_servers.{SERVER}], which hivestream did not write"]
    if install:
        table = tomlkit.table()
        table.add("url", mcp_url(url))
        if token:
            table.add("bearer_token_env_var", TOKEN_ENV)
        table.add("startup_timeout_sec", STARTUP_TIMEOUT_S)
        table.add(tomlkit.nl())  # a blank line before whatever table follows
        if servers is None:
            servers = tomlkit.table(is_super_table=True)
            doc.add("mcp_servers", servers)
        servers[SERVER] = table
    elif mine and servers is not None:
        del servers[SERVER]
        if not servers and isinstance(servers, Table) and servers.is_super_table():
            del doc["mcp_servers"]
    out = tomlkit.dumps(doc)
    return (out.rstrip("\n") + "\n" if out.strip() else ""), []  # no blank lines piled up at the end
