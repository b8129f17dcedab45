"""Per-stub metadata and telemetry kept next to the vectors."""

from __future__ import annotations

from dataclasses import dataclass

from streams.stubs.events import RefreshSource


@dataclass(frozen=True, slots=True)
class StubRecord:
    """What the index knows about one stub besides its vector.

    Attributes:
        stub_id, channel: the stub (``channel`` ``None`` = global).
        title, stub_text, archive_path: as in :class:`~streams.stubs.events.StubUpserted`.
        archive_tokens: token count of the archive (tokens).
        model, dim: embedding model and dimensions.
        refresh_source, refresh_spec: refresh type and its verbatim JSON (or ``None``).
        created_at_ms: event time of the upsert that created it (epoch ms).
        match_count: how many messages injected it.
        last_matched_at_ms, last_refreshed_at_ms: epoch ms, or ``None`` when never.
    """

    stub_id: int
    channel: str | None
    title: str
    stub_text: str
    archive_path: str
    archive_tokens: int
    model: str
    dim: int
    refresh_source: RefreshSource
    refresh_spec: str | None
    created_at_ms: int
    match_count: int = 0
    last_matched_at_ms: int | None = None
    last_refreshed_at_ms: int | None = None
