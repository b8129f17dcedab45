"""The broker's answers to what a worker sent, checked before a commit (no offset past a refused output).

aiokafka's ``send_batch`` and ``send`` return a delivery future per batch or record; aiokafka's and
faust's producer ``flush`` wait for the batches in flight but never raise when the broker refused one
(``MESSAGE_TOO_LARGE`` against the topic's ``max.message.bytes``, ``TOPIC_AUTHORIZATION_FAILED``, a
delivery timeout after the retries), so a worker that committed after a flush lost those outputs.
:class:`Acknowledgements` keeps every answer until :meth:`Acknowledgements.confirm`, which the
workers' before-commit hook awaits: a refusal raises :class:`OutputRefused`, which stops the worker
before the commit, as Kafka Streams' default production exception handler fails the task.
"""

from __future__ import annotations

import asyncio
from typing import Any, NamedTuple

from streams.kafka.errors import scrub


class OutputRefused(Exception):
    """The broker did not acknowledge an output a worker sent, so the input records behind it must not
    be committed. ``str()`` is one line (:func:`refusal_line`; secrets scrubbed, :func:`streams.kafka.errors.scrub`)."""


class Sent(NamedTuple):
    """One output handed to the producer and the broker's answer to it.

    Attributes:
        topic: the topic.
        partition: its partition, or None when the producer chose it by key.
        answer: aiokafka's delivery future (RecordMetadata, or the error).
        size_bytes: the batch's size in bytes (None: a single record sent by faust's ``producer.send``).
        records: records in it.
    """

    topic: str
    partition: int | None
    answer: asyncio.Future[Any]
    size_bytes: int | None = None
    records: int = 1


def refused_at_once(exc: BaseException) -> asyncio.Future[Any]:
    """A done future holding ``exc``: the answer to a send the producer refused before sending (it raised)."""
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    fut.set_exception(exc)
    return fut


class Acknowledgements:
    """Every output sent since the last :meth:`confirm` that had no answer then, and every refusal (kept:
    every later :meth:`confirm` raises too, so no later commit passes a refused output)."""

    def __init__(self) -> None:
        self._sent: list[Sent] = []

    def add(self, sent: Sent) -> None:
        """Keep ``sent`` until it is confirmed."""
        self._sent.append(sent)

    async def confirm(self) -> None:
        """Wait for the answer to every output added so far; return when each was acknowledged.

        Outputs added while this waits are checked too when their answers are in by then (a second
        concurrent call waits for them).

        Raises:
            OutputRefused: when the producer gave up on any of them (one line: :func:`refusal_line`).
        """
        waiting = [s.answer for s in self._sent if not s.answer.done()]
        if waiting:
            await asyncio.wait(waiting)
        refused = [s for s in self._sent if s.answer.done() and (s.answer.cancelled() or s.answer.exception() is not None)]
        self._sent = [s for s in self._sent if not s.answer.done()] + refused
        if refused:
            raise OutputRefused(refusal_line(refused))


def refusal_line(refused: list[Sent]) -> str:
    """One line for refused outputs: how many, then per topic and error the partitions it hit, the
    largest refused batch or record (bytes, records) and, for a size refusal, what to raise."""
    by: dict[tuple[str, str], list[Sent]] = {}
    for s in refused:
        by.setdefault((s.topic, "cancelled" if s.answer.cancelled() else _error_text(s.answer.exception())), []).append(s)
    parts_said = []
    for (topic, err), group in by.items():
        parts = sorted({s.partition for s in group if s.partition is not None})
        where = f"partition(s) {', '.join(map(str, parts))}" if parts else "partition by key"
        sized = [s for s in group if s.size_bytes is not None]
        largest = max(sized, key=lambda s: s.size_bytes or 0) if sized else None
        size = "" if largest is None else (f"; largest: one record of {largest.size_bytes:,} bytes" if largest.records == 1 else
                                           f"; largest: a batch of {largest.size_bytes:,} bytes, {largest.records:,} records")
        hint = (f"; raise {topic}'s max.message.bytes above {largest.size_bytes:,}"
                if largest is not None and "MessageSizeTooLarge" in err else "")
        parts_said.append(f"{topic} {where}: {err}{size}{hint}")
    return (f"the broker did not acknowledge {len(refused)} output(s) (batches or records), so no offset was committed past them: "
            + " | ".join(parts_said))


def _error_text(exc: BaseException | None) -> str:
    name = type(exc).__name__
    text = " ".join(str(exc).split())
    return scrub(name if not text or name in text else f"{name}: {text}")
