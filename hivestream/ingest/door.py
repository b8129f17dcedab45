"""What the hook routes ask of a front door that matches prompts (the memory stubs' :class:`hivestream.services.stub_door.StubDoor`).

A protocol, so the ingest server depends on no service: it hands a hook body or a match request to
the door, makes the records it returns durable with its own, and puts the context in its answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

Record = tuple[str, bytes, bytes]
"""A record to make durable: (topic, key, value)."""


class DoorReply(Protocol):
    """A door's answer: the ``context`` for the model (or ``None``), the ``records`` to make durable, and ``why_none``."""

    @property
    def context(self) -> str | None:
        """The text for the model, or ``None``."""

    @property
    def records(self) -> list[Record]:
        """Records to make durable with the request's own."""

    @property
    def why_none(self) -> str | None:
        """Why there is no context (``None`` when there is)."""


class Door(Protocol):
    """A front door that matches prompts."""

    async def answer_hook(self, route: str, payloads: Sequence[Any], received_ms: int) -> DoorReply | None:
        """The reply for a hook body that holds a prompt, else ``None``; never raises."""

    def prompt_of_match(self, doc: Any, received_ms: int) -> Any:
        """The prompt of a match request's JSON body, or a ``str`` saying why it is refused (one line)."""

    async def answer(self, prompt: Any) -> DoorReply:
        """The reply for a prompt of :meth:`prompt_of_match`; never raises."""

    def stats(self) -> dict[str, Any]:
        """Counts for ``/healthz``."""
