"""The records of the ``stub-matches`` topic: the stub worker's ordered output per partition.

For each partition of ``stub-events`` the worker writes, in input order:

* the stub state events it applied (:class:`StubUpserted`, :class:`StubRefreshed`,
  :class:`StubDeleted`), forwarded unchanged, so the projector sees every match after the stub
  state it was computed against;
* one :class:`StubMatched` per injected stub of a message;
* one :class:`MessageProcessed` per message, after its matches (also for messages that matched
  nothing, and for subagent messages).

A message processed again after a worker restart (at-least-once) re-emits the same records
with the same event ids; the projector applies each one once.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from streams.model.deadletter import Reason, RejectedInput
from streams.stubs.events import MAX_MS, Origin, StubDeleted, StubMatched, StubRefreshed, StubUpserted


class MessageProcessed(BaseModel):
    """The outcome of matching one message (schema version 1).

    Attributes:
        event_id: ``<message event id>/processed``.
        event_time_ms: the message's event time (epoch ms).
        message_event_id: the :class:`~streams.stubs.events.MessageEmbedded` event id.
        channel, message_id: the message.
        origin: ``main`` or ``subagent``.
        match_count: stubs injected; ``tokens_injected``: their archive tokens (tokens).
        best_similarity: the best candidate's similarity whatever the threshold (unitless), or
            ``None`` (subagent message, or no candidate stub).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["message-processed"] = "message-processed"
    schema_version: Literal[1] = 1
    event_id: str = Field(min_length=1, max_length=220)
    event_time_ms: int = Field(ge=0, le=MAX_MS)
    message_event_id: str = Field(min_length=1, max_length=200)
    channel: str = Field(min_length=1, max_length=200)
    message_id: str = Field(min_length=1, max_length=200)
    origin: Origin
    match_count: int = Field(ge=0)
    tokens_injected: int = Field(ge=0)
    best_similarity: float | None = None


OutputRecord = StubUpserted | StubRefreshed | StubDeleted | StubMatched | MessageProcessed
"""Any record of the ``stub-matches`` topic."""

_ADAPTER: TypeAdapter[OutputRecord] = TypeAdapter(Annotated[OutputRecord, Field(discriminator="type")])


def parse_output_record(raw: bytes) -> OutputRecord:
    """Parse one ``stub-matches`` record.

    Raises:
        RejectedInput: ``malformed_json`` or ``wrong_shape`` (e.g. a ``message-embedded`` event,
            which never belongs on this topic).
    """
    try:
        return _ADAPTER.validate_json(raw)
    except ValidationError as e:
        kinds = {err["type"] for err in e.errors()}
        raise RejectedInput(Reason.MALFORMED_JSON if "json_invalid" in kinds else Reason.WRONG_SHAPE, str(e)[:2000]) from e
