"""Memory stubs at the front door: the context a posted prompt gets, and the stub events its match leaves.

Between the hook routes (``POST /v1/hooks/{runtime}`` of serve and ingest, the OpenClaw plugin's
match route) and :class:`~hivestream.services.stubs.StubService`: a body of one Claude Code or Codex
``UserPromptSubmit`` payload is a prompt (:func:`~hivestream.services.stubs.prompt_from_hook`), the
service is given its budget, and the answer is the block (or ``None``) plus the ``stub-events``
records to make durable with the hook's own records: the prompt's ``message-embedded`` and one
``stub-matched`` per archive shown, keyed by channel as ``hivestream stubs produce`` keys them, so
the stub projection counts them as ``stubs run`` does. Never raises: the service fails open.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hivestream.services.stubs import Injection, Prompt, StubService, prompt_from_hook
from streams.model.events import stable_id
from streams.stubs.inject import Runtime

HOOK_RUNTIMES: dict[str, Runtime] = {"claude-code": "claude-code", "codex": "codex"}
"""Hook routes whose ``UserPromptSubmit`` is matched, and the runtime whose cap applies."""

MATCH_RUNTIMES: dict[str, Runtime] = {"openclaw": "openclaw", "claude-code": "claude-code", "codex": "codex"}
"""The ``runtime`` a match request may name (whose cap applies)."""

Record = tuple[str, bytes, bytes]


@dataclass(frozen=True)
class DoorAnswer:
    """What a prompt gets at the door: the ``context`` (or ``None``), the ``records`` to make durable, and the service's whole answer."""

    context: str | None
    records: list[Record]
    injection: Injection

    @property
    def why_none(self) -> str | None:
        """Why there is no context (``None`` when there is)."""
        return self.injection.why_none


class StubDoor:
    """The front door's use of a :class:`StubService`.

    Args:
        service: the live matcher.
        topic: the ``stub-events`` topic (the record kind of serve's log, the topic on Kafka).
    """

    def __init__(self, service: StubService, topic: str) -> None:
        self.service = service
        self.topic = topic

    def prompt_of(self, route: str, payloads: Sequence[Any], received_ms: int) -> Prompt | None:
        """The prompt of a hook body: one JSON object posted to a route of :data:`HOOK_RUNTIMES` that is a ``UserPromptSubmit``; else ``None``."""
        runtime = HOOK_RUNTIMES.get(route)
        if runtime is None or len(payloads) != 1 or not isinstance(payloads[0], Mapping):
            return None
        return prompt_from_hook(payloads[0], runtime, received_ms)

    async def answer(self, prompt: Prompt) -> DoorAnswer:
        """Match ``prompt`` within the service's budget; never raises."""
        inj = await self.service.inject_async(prompt)
        records = [(self.topic, ev.channel.encode(), ev.model_dump_json().encode()) for ev in inj.events]
        return DoorAnswer(inj.context, records, inj)

    def prompt_of_match(self, doc: Any, received_ms: int) -> Prompt | str:
        """The prompt of a match request (``POST /api/stubs/match``, the OpenClaw plugin's ``before_prompt_build``), or why it is refused (one line).

        The body: ``{"prompt": str, "channel": str, "message_id"?: str, "subagent"?: bool, "runtime"?: "openclaw"|"claude-code"|"codex"}``
        (``channel``: the OpenClaw channel or conversation, as the plugin is configured; ``runtime``
        chooses the cap, default ``openclaw``).
        """
        if not isinstance(doc, dict):
            return "the body must be a JSON object"
        prompt, channel = doc.get("prompt"), doc.get("channel")
        if not isinstance(prompt, str) or not isinstance(channel, str) or not channel.strip() or len(channel) > 200:
            return "\"prompt\" (a string) and \"channel\" (1 to 200 characters) are required"
        runtime = doc.get("runtime", "openclaw")
        if runtime not in MATCH_RUNTIMES:
            return f"\"runtime\" must be one of {', '.join(MATCH_RUNTIMES)}"
        mid = doc.get("message_id")
        if mid is not None and (not isinstance(mid, str) or not mid or len(mid) > 200):
            return "\"message_id\" must be 1 to 200 characters"
        sub = doc.get("subagent", False)
        if not isinstance(sub, bool):
            return "\"subagent\" must be true or false"
        message_id = mid or stable_id("prompt", channel, prompt, received_ms)
        return Prompt(prompt, channel, MATCH_RUNTIMES[runtime], message_id, received_ms, subagent=sub)

    def stats(self) -> dict[str, Any]:
        """The service's counts (:meth:`~hivestream.services.stubs.StubStats.as_dict`), for ``/healthz``."""
        return self.service.stats.as_dict()

    async def answer_hook(self, route: str, payloads: Sequence[Any], received_ms: int) -> DoorAnswer | None:
        """:meth:`answer` for a hook body that holds a prompt (:meth:`prompt_of`), else ``None``."""
        prompt = self.prompt_of(route, payloads, received_ms)
        return None if prompt is None else await self.answer(prompt)
