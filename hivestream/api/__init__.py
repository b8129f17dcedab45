"""The agent API: the knowledge base and frames recall for agents, over HTTP on the port of
``/v1/hooks/*`` (``hivestream serve``, and ``hivestream ingest`` on the Kafka path), and in process
for the MCP tools on ``/mcp`` (:class:`~hivestream.api.agent.LocalAgentApi`, the
:class:`~hivestream.mcp.agent_api.AgentApi` ``hivestream mcp`` implements over HTTP). The routes are
thin: the work is :mod:`hivestream.services`'s.
"""
