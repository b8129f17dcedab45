"""hivestream's MCP server: the agent API (KnowHub search, submit, content; frames recall) as MCP tools.

Over streamable HTTP at ``/mcp`` on ``serve`` and ``ingest`` (:mod:`hivestream.mcp.http_mount`), and
over stdio as ``hivestream mcp`` (:mod:`hivestream.mcp.stdio`, a thin client of the HTTP API).
"""
