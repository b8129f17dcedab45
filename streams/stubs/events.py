"""Versioned stub events and the embedding codec.

Events (frozen pydantic v2 models, ``schema_version`` 1, discriminated by ``type``):

* :class:`StubUpserted` (``stub-upserted``): a stub was created or replaced.
* :class:`StubRefreshed` (``stub-refreshed``): the nightly job (or a manual run) re-embedded it.
* :class:`StubDeleted` (``stub-deleted``): it was removed.
* :class:`MessageEmbedded` (``message-embedded``): a user message and its embedding.
* :class:`StubMatched` (``stub-matched``): a stub was injected for a message.

A stub is identified by ``(channel, stub_id)``: ``stub_id`` is the ``INTEGER PRIMARY KEY`` of
its ``stubs.db`` and ``channel`` is ``None`` for the global database (``stubs-global.db``), so a
channel stub and a global stub may share an id. Times are epoch milliseconds (UTC). Embeddings
travel as base64 of float32 little-endian bytes (``dim * 4`` bytes).
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from streams.model.deadletter import Reason, RejectedInput
from streams.stubs.errors import StubError, reject

SCHEMA_VERSION = 1
MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z
MAX_DIM = 65_536

RefreshSource = Literal["file-watch", "scheduler-db-query", "script", "manual", "none"]
"""How the nightly 03:20 UTC job refreshes a stub; ``none`` = NULL in ``stubs.db`` (never refreshed)."""

Origin = Literal["main", "subagent"]
"""Which runtime a message reached: only ``main`` runs the stub hook."""

Ms = Annotated[int, Field(ge=0, le=MAX_MS)]
Dim = Annotated[int, Field(ge=1, le=MAX_DIM)]
StubId = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]  # SQLite INTEGER PRIMARY KEY range


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    event_id: str = Field(min_length=1, max_length=200)
    event_time_ms: Ms


class StubUpserted(_Event):
    """A stub was created or replaced (schema version 1).

    Attributes:
        stub_id: the stub's id in its ``stubs.db`` (unique per channel, and within the global set).
        channel: the channel the stub belongs to, ``None`` for a global stub.
        title: the archived section's title.
        stub_text: the short hook text that was embedded.
        archive_path: absolute (container) path of the archive ``.md`` file that is injected.
        archive_tokens: token count of the archived content (tokens, ``>= 0``), charged
            against the per-message token budget.
        embedding_b64: base64 of ``dim`` float32 little-endian values (``dim * 4`` bytes).
        model: embedding model name, e.g. ``gemini-embedding-001``.
        dim: embedding dimensions (1..65536; 3072 for ``gemini-embedding-001``).
        refresh_source: the ``type`` of the stub's refresh source, ``none`` when NULL.
        refresh_spec: the verbatim ``refresh_source`` JSON (``None`` when NULL or unknown).
        match_count, last_matched_at_ms, last_refreshed_at_ms: optional starting telemetry
            (count; epoch ms); ``None`` keeps the index's current value (0 / unset for a new stub).
        event_time_ms: when the stub was created or replaced (epoch ms).
    """

    type: Literal["stub-upserted"] = "stub-upserted"
    stub_id: StubId
    channel: str | None = Field(default=None, min_length=1, max_length=200)
    title: str = ""
    stub_text: str = ""
    archive_path: str = Field(min_length=1)
    archive_tokens: int = Field(ge=0)
    embedding_b64: str
    model: str = Field(min_length=1, max_length=200)
    dim: Dim
    refresh_source: RefreshSource = "none"
    refresh_spec: str | None = None
    match_count: int | None = Field(default=None, ge=0)
    last_matched_at_ms: Ms | None = None
    last_refreshed_at_ms: Ms | None = None


class StubRefreshed(_Event):
    """A stub's text and embedding were regenerated from its archive (schema version 1).

    Attributes:
        stub_id, channel: the stub (``channel`` ``None`` = global).
        stub_text: the new hook text; ``title`` the new title or ``None`` to keep it.
        archive_tokens: token count of the refreshed archive content (tokens).
        embedding_b64, model, dim: the new embedding (as in :class:`StubUpserted`).
        event_time_ms: when it was refreshed (epoch ms); becomes ``last_refreshed_at_ms``.
    """

    type: Literal["stub-refreshed"] = "stub-refreshed"
    stub_id: StubId
    channel: str | None = Field(default=None, min_length=1, max_length=200)
    title: str | None = None
    stub_text: str = ""
    archive_tokens: int = Field(ge=0)
    embedding_b64: str
    model: str = Field(min_length=1, max_length=200)
    dim: Dim


class StubDeleted(_Event):
    """A stub was removed (schema version 1). ``channel`` ``None`` = global; times in epoch ms."""

    type: Literal["stub-deleted"] = "stub-deleted"
    stub_id: StubId
    channel: str | None = Field(default=None, min_length=1, max_length=200)


class MessageEmbedded(_Event):
    """A user message and its embedding (schema version 1).

    Attributes:
        channel: the channel the message arrived on.
        message_id: the message's id in its channel.
        embedding_b64, model, dim: the message embedding (as in :class:`StubUpserted`).
        origin: ``main`` (the main runtime, which runs the stub hook) or ``subagent`` (never
            gets stub injection).
        event_time_ms: when the message arrived (epoch ms).
    """

    type: Literal["message-embedded"] = "message-embedded"
    channel: str = Field(min_length=1, max_length=200)
    message_id: str = Field(min_length=1, max_length=200)
    embedding_b64: str
    model: str = Field(min_length=1, max_length=200)
    dim: Dim
    origin: Origin = "main"


class StubMatched(_Event):
    """A stub was matched and its archive injected for a message (schema version 1).

    Attributes:
        message_id, channel: the message (``channel`` is the message's channel).
        stub_id, stub_channel: the stub (``stub_channel`` ``None`` = a global stub).
        similarity: the exact similarity (see :mod:`streams.stubs.vectors`), unitless.
        rank: 1-based position among the message's matches.
        tokens_injected: the stub's ``archive_tokens`` charged against the budget (tokens).
        event_time_ms: the message's event time (epoch ms); becomes ``last_matched_at_ms``.
    """

    type: Literal["stub-matched"] = "stub-matched"
    message_id: str = Field(min_length=1, max_length=200)
    channel: str = Field(min_length=1, max_length=200)
    stub_id: StubId
    stub_channel: str | None = None
    similarity: float
    rank: int = Field(ge=1)
    tokens_injected: int = Field(ge=0)


StubEvent = Annotated[StubUpserted | StubRefreshed | StubDeleted | MessageEmbedded | StubMatched, Field(discriminator="type")]
_ADAPTER: TypeAdapter[StubUpserted | StubRefreshed | StubDeleted | MessageEmbedded | StubMatched] = TypeAdapter(StubEvent)


def parse_stub_event(raw: bytes | str) -> StubUpserted | StubRefreshed | StubDeleted | MessageEmbedded | StubMatched:
    """Parse one JSON stub event (any of the five types, chosen by ``type``).

    Raises:
        RejectedInput: ``malformed_json`` for invalid JSON, ``wrong_shape`` for anything else
            pydantic rejects (unknown ``type``, missing or mistyped fields).
    """
    try:
        return _ADAPTER.validate_json(raw)
    except ValidationError as e:
        kinds = {err["type"] for err in e.errors()}
        reason = Reason.MALFORMED_JSON if "json_invalid" in kinds else Reason.WRONG_SHAPE
        raise RejectedInput(reason, str(e)[:2000]) from e


def decode_embedding(b64: str, dim: int) -> npt.NDArray[np.float32]:
    """Decode base64 float32 little-endian bytes to a float32 vector of shape ``(dim,)``.

    Args:
        b64: standard base64 (``+/``, padded) of ``dim * 4`` bytes.
        dim: expected dimensions.

    Returns:
        A fresh, writable native-order float32 array of shape ``(dim,)``.

    Raises:
        RejectedInput: reason ``wrong_shape`` with detail code ``bad_base64`` (does not decode),
            ``bad_length`` (bytes not a multiple of 4), ``dimension_mismatch`` (bytes !=
            ``dim * 4``), ``non_finite`` (NaN or ±inf) or ``zero_vector`` (all components 0).
    """
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as e:
        raise reject(StubError.BAD_BASE64, f"embedding is not valid base64: {e}") from e
    if len(raw) % 4:
        raise reject(StubError.BAD_LENGTH, f"embedding has {len(raw)} bytes, not a multiple of 4 (float32)")
    if len(raw) != dim * 4:
        raise reject(StubError.DIMENSION_MISMATCH, f"embedding has {len(raw) // 4} dims ({len(raw)} bytes), expected {dim}")
    vec = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.isfinite(vec).all():
        raise reject(StubError.NON_FINITE, f"embedding holds NaN or infinity at index {int(np.flatnonzero(~np.isfinite(vec))[0])}")
    if not vec.any():
        raise reject(StubError.ZERO_VECTOR, f"embedding of {dim} dims is all zeros")
    return vec


def encode_embedding(vec: npt.ArrayLike) -> str:
    """Encode a vector of shape ``(dim,)`` as base64 of float32 little-endian bytes (``dim * 4`` bytes).

    Values are rounded to float32 (ties to even). Raises:
        RejectedInput: ``bad_shape`` when ``vec`` is not one-dimensional.
    """
    arr = np.asarray(vec, dtype="<f4")
    if arr.ndim != 1:
        raise reject(StubError.BAD_SHAPE, f"embedding must be one-dimensional, got shape {arr.shape}")
    return base64.b64encode(arr.tobytes()).decode("ascii")
