"""The guard: a pipeline's processing of one record never raises; what it raises becomes a dead letter.

Bad input is raised as :class:`~streams.model.deadletter.RejectedInput` by the pure code and
becomes a dead letter that says why; any other exception is a bug, logged with its traceback and
dead-lettered as ``processing_error`` so the stream goes on (Kafka Streams' "log and continue"
handler; arroyo's ``InvalidMessage`` and its one dead-letter layer). Each pipeline makes its dead
letters its own way (the KnowHub ones redacted), so a :class:`Guard` holds a :data:`LetterMaker`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.model.position import Position

log = logging.getLogger(__name__)

LetterMaker = Callable[..., DeadLetter]
"""``make(err, data, pos, now_ms, event_id=...)`` → the :class:`DeadLetter` of ``err`` for the
record ``data`` read at ``pos`` (``now_ms``: the clock reading that stamps it; ``event_id``: the
hook event's id when the record got that far, else ``""``)."""


def plain_letter(err: RejectedInput, data: bytes, pos: Position, now_ms: int, event_id: str = "") -> DeadLetter:
    """The :class:`DeadLetter` of ``err`` with ``data`` kept as it is (:meth:`DeadLetter.of`)."""
    return DeadLetter.of(err, data, pos.topic, pos.partition, pos.offset, now_ms, event_id=event_id)


def record_value(raw: bytes | None) -> bytes:
    """The value of a record to process.

    Raises:
        RejectedInput: ``malformed_json`` for an empty value (a null value, Kafka's tombstone).
    """
    if not raw:
        raise RejectedInput(Reason.MALFORMED_JSON, "empty record value (a null value / tombstone)")
    return raw


class Guard:
    """Turns whatever a pipeline's processing of one record raises into that record's dead letter.

    Args:
        what: names the pipeline in the log line of a bug (``"frames processing error at t[0]@5"``).
        make: how the pipeline makes a dead letter (default :func:`plain_letter`).
    """

    __slots__ = ("make", "what")

    def __init__(self, what: str, make: LetterMaker = plain_letter) -> None:
        self.what = what
        self.make = make

    def rejection(self, exc: Exception, pos: Position) -> RejectedInput:
        """``exc`` as the rejection it stands for: a :class:`RejectedInput` as it is; anything else
        ``processing_error`` with the exception's type and message, its traceback logged once."""
        if isinstance(exc, RejectedInput):
            return exc
        log.error("%s processing error at %s[%d]@%d", self.what, pos.topic, pos.partition, pos.offset, exc_info=exc)
        return RejectedInput(Reason.PROCESSING_ERROR, f"{type(exc).__name__}: {exc}")

    def letter(self, exc: Exception, data: bytes, pos: Position, now_ms: int, event_id: str = "") -> DeadLetter:
        """The dead letter of the record ``data`` at ``pos`` whose processing raised ``exc`` (see :meth:`rejection`)."""
        return self.make(self.rejection(exc, pos), data, pos, now_ms, event_id=event_id)
