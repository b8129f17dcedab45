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
from streams.stubs.inject import Runtime

HOOK_RUNTIMES: dict[str, Runtime] = {"claude-code": "claude-code", "codex": "codex"}
"""Hook routes whose ``UserPromptSubmit`` is matched, and the runtime whose cap applies."""

Record = tuple[str, bytes, bytes]


@dataclass(frozen=True)
class DoorAnswer:
    """What a prompt gets at the door: the ``context`` (or ``None``), the ``records`` to make durable, and the service's whole answer."""

    context: str | None
    records: list[Record]
    injection: Injection


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

    async def answer_hook(self, route: str, payloads: Sequence[Any], received_ms: int) -> DoorAnswer | None:
        """:meth:`answer` for a hook body that holds a prompt (:meth:`prompt_of`), else ``None``."""
        prompt = self.prompt_of(route, payloads, received_ms)
        return None if prompt is None else await self.answer(prompt)
