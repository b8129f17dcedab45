"""The agent API: the knowledge base and frames recall for agents, over HTTP on the port of
``/v1/hooks/*`` (``hivestream serve``, and ``hivestream ingest`` on the Kafka path), and in-process
for the MCP adapter (:class:`~hivestream.api.agent.AgentApi`). The routes are thin: the work is
:mod:`hivestream.services`'s.
"""
