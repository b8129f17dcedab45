"""Dead-letter records: bad input with the reason it was rejected (docs/design.md#dedup-semantics).

Bad input never crashes a worker and is never silently dropped: every rejected record becomes
a :class:`DeadLetter` that carries the original bytes and where they came from, and the stream
goes on.
"""

from __future__ import annotations

import base64
from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class Reason(StrEnum):
    """Why a record was dead-lettered (a stable code; ``detail`` says more)."""

    NOT_UTF8 = "not_utf8"
    MALFORMED_JSON = "malformed_json"
    WRONG_SHAPE = "wrong_shape"
    MISSING_FIELD = "missing_field"
    UNKNOWN_PAYLOAD = "unknown_payload"
    UNKNOWN_SCHEMA_VERSION = "unknown_schema_version"
    BAD_TIMESTAMP = "bad_timestamp"
    EMPTY_BODY = "empty_body"
    BODY_TOO_LARGE = "body_too_large"
    BAD_ENCODING = "bad_encoding"  # a request body whose Content-Encoding could not be decoded
    UNKNOWN_RUNTIME = "unknown_runtime"  # a request body posted to /v1/hooks/{runtime} with a runtime hivestream does not know
    EXTRACTION_FAILED = "extraction_failed"  # the experience extractor's endpoint failed or answered out of contract
    PROCESSING_ERROR = "processing_error"  # an unexpected exception on this record (a bug): logged and dead-lettered
    TORN_RECORD = "torn_record"  # bytes after the last whole record of a serve log segment (a write cut by a crash, never acknowledged)
    CORRUPT_RECORD = "corrupt_record"  # bytes inside a serve log's durable part that hold no whole record (the disk changed them)


class RejectedInput(ValueError):
    """Raised by pure validation code; the caller turns it into a :class:`DeadLetter`.

    Attributes:
        reason: the :class:`Reason` code.
        detail: a human-readable explanation.
    """

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


MAX_ORIGINAL_BYTES = 262_144  # originals above 256 KiB are truncated (Kafka's default max message is 1 MiB)


class DeadLetter(BaseModel):
    """One rejected record, as written to the ``dead-letter`` topic or table.

    Attributes:
        reason: :class:`Reason` code.
        detail: explanation, e.g. the pydantic error or the offending field.
        original_b64: the original record bytes, base64 (so invalid UTF-8 survives JSON).
        source: the topic or input file the record came from; a payload refused at the HTTP
            front door: its request, ``ingest:<gateway>:<runtime>:<request id>``
            (:func:`streams.ingest.payloads.request_source`).
        partition: topic partition, or 0 for a file or a request.
        offset: topic offset, the 0-based line number in a file, or the payload's index in its request.
        event_id: the hook event's id when the record got that far, else ``""``.
        time_ms: when it was rejected, epoch ms, from the injected clock.

    ``(source, partition, offset, event_id)`` is the refusal's identity (docs/design.md#dedup-semantics): no two
    refusals share one, and a table keeps one row per identity, so reading the same record again
    (a replay after a crash, a file run twice) doubles nothing.
    """

    model_config = ConfigDict(frozen=True)

    schema_version: int = 1
    reason: Reason
    detail: str
    original_b64: str
    source: str
    partition: int = 0
    offset: int = 0
    event_id: str = ""
    time_ms: int = 0

    @classmethod
    def of(
        cls,
        err: RejectedInput,
        original: bytes,
        source: str,
        partition: int,
        offset: int,
        time_ms: int,
        event_id: str = "",
    ) -> DeadLetter:
        """Build a record from a :class:`RejectedInput` and the original bytes.

        Originals over :data:`MAX_ORIGINAL_BYTES` are truncated, and the detail says so.
        """
        detail = err.detail[:2000]
        if len(original) > MAX_ORIGINAL_BYTES:
            detail += f" (original {len(original)} bytes, truncated to {MAX_ORIGINAL_BYTES})"
            original = original[:MAX_ORIGINAL_BYTES]
        return cls(
            reason=err.reason,
            detail=detail,
            original_b64=base64.b64encode(original).decode("ascii"),
            source=source,
            partition=partition,
            offset=offset,
            event_id=event_id,
            time_ms=time_ms,
        )

    def original(self) -> bytes:
        """The original record bytes."""
        return base64.b64decode(self.original_b64)
