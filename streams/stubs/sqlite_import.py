"""Read a NanoClaw ``stubs.db`` (per channel, or ``stubs-global.db``) into :class:`StubUpserted` events.

The seed's schema (table ``stubs``): ``id INTEGER PRIMARY KEY, title TEXT, stub_text TEXT,
archive_path TEXT, embedding BLOB (float32 little-endian, 3072 dims = 12288 bytes),
created_at TEXT, last_matched_at TEXT, match_count INTEGER, refresh_source TEXT (JSON such as
{"type":"file-watch","path":"..."}; NULL = never refreshed by the nightly job),
last_refreshed_at TEXT``. Only the standard library's :mod:`sqlite3` is used; the database is
opened read-only.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast, get_args

from pydantic import ValidationError

from streams.model.deadletter import Reason, RejectedInput
from streams.model.events import stable_id
from streams.model.timeparse import parse_time_ms
from streams.stubs.errors import StubError, reject
from streams.stubs.events import RefreshSource, StubUpserted, decode_embedding

DEFAULT_MODEL = "gemini-embedding-001"
CHARS_PER_TOKEN = 4  # the common rough estimate for English and Swedish prose
_COLUMNS = "id, title, stub_text, archive_path, embedding, created_at, last_matched_at, match_count, refresh_source, last_refreshed_at"
_TYPES = frozenset(get_args(RefreshSource)) - {"none"}


def estimate_archive_tokens(archive_path: str) -> int:
    """Tokens of an archive file estimated as ``ceil(characters / 4)`` (file read as UTF-8).

    Raises:
        RejectedInput: ``bad_row`` when the file cannot be read (e.g. a container path that is
            not mounted here: pass ``tokens_for`` to :func:`read_stubs_db` instead).
    """
    try:
        text = Path(archive_path).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise reject(StubError.BAD_ROW, f"archive {archive_path!r} is not readable here: {e}") from e
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def iter_stub_rows(
    path: str | Path,
    channel: str | None,
    *,
    model: str = DEFAULT_MODEL,
    tokens_for: Callable[[str], int] = estimate_archive_tokens,
) -> Iterator[StubUpserted | RejectedInput]:
    """One :class:`StubUpserted` (or the :class:`RejectedInput` for a bad row) per row, by ascending id.

    Args:
        path: the ``stubs.db`` file.
        channel: the channel it belongs to, ``None`` for the global database.
        model: the embedding model name (the seed uses ``gemini-embedding-001`` throughout).
        tokens_for: ``archive_path`` → its token count (tokens); the table has no such column.

    Raises:
        sqlite3.Error: when the file is not a readable SQLite database with a ``stubs`` table.
    """
    con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        for row in con.execute(f"SELECT {_COLUMNS} FROM stubs ORDER BY id"):
            try:
                yield _row_event(row, channel, model, tokens_for)
            except RejectedInput as e:
                yield e
    finally:
        con.close()


def read_stubs_db(
    path: str | Path,
    channel: str | None,
    *,
    model: str = DEFAULT_MODEL,
    tokens_for: Callable[[str], int] = estimate_archive_tokens,
) -> list[StubUpserted]:
    """Every stub of a ``stubs.db`` as :class:`StubUpserted` events, by ascending id.

    ``dim`` is the blob length / 4; ``refresh_source`` is the JSON's ``type`` (NULL → ``none``)
    and ``refresh_spec`` the verbatim JSON; ``created_at`` (ISO-8601 or epoch) becomes
    ``event_time_ms`` (0 when NULL), the other TEXT times epoch ms; ``match_count`` NULL → 0.
    Event ids are ``stable_id`` over the channel and every column, so re-reading an unchanged
    database yields the same ids.

    Raises:
        RejectedInput: for the first bad row (``bad_row``, ``bad_refresh_source``, embedding
            codes, ``bad_timestamp``); use :func:`iter_stub_rows` to dead-letter rows one by one.
        sqlite3.Error: as :func:`iter_stub_rows`.
    """
    out: list[StubUpserted] = []
    for item in iter_stub_rows(path, channel, model=model, tokens_for=tokens_for):
        if isinstance(item, RejectedInput):
            raise item
        out.append(item)
    return out


def _row_event(row: tuple[Any, ...], channel: str | None, model: str, tokens_for: Callable[[str], int]) -> StubUpserted:
    sid, title, stub_text, archive_path, blob, created, matched, count, source, refreshed = row
    if not isinstance(blob, bytes) or not blob:
        raise reject(StubError.BAD_ROW, f"stub {sid}: embedding is {type(blob).__name__}, not a non-empty BLOB")
    if not isinstance(archive_path, str) or not archive_path:
        raise reject(StubError.BAD_ROW, f"stub {sid}: archive_path is missing")
    b64 = base64.b64encode(blob).decode("ascii")
    dim = len(blob) // 4
    decode_embedding(b64, dim)  # bad_length / non_finite / zero_vector before the event exists
    source_type = _refresh_type(sid, source)
    digest = hashlib.sha256(blob).hexdigest()
    try:
        return StubUpserted(
            event_id=stable_id("stubs-db", channel, sid, title, stub_text, archive_path, digest, created, matched, count, source, refreshed),
            event_time_ms=_ms(sid, "created_at", created) or 0,
            stub_id=sid,
            channel=channel,
            title=title or "",
            stub_text=stub_text or "",
            archive_path=archive_path,
            archive_tokens=tokens_for(archive_path),
            embedding_b64=b64,
            model=model,
            dim=dim,
            refresh_source=source_type,
            refresh_spec=source,
            match_count=count if count is not None else 0,
            last_matched_at_ms=_ms(sid, "last_matched_at", matched),
            last_refreshed_at_ms=_ms(sid, "last_refreshed_at", refreshed),
        )
    except ValidationError as e:  # one line: each field and what is wrong with it, no input echoed, no links
        why = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors(include_url=False, include_input=False)[:5])
        raise reject(StubError.BAD_ROW, f"stub {sid}: {why}") from e


def _refresh_type(sid: object, source: object) -> RefreshSource:
    if source is None:
        return "none"
    if not isinstance(source, str):
        raise reject(StubError.BAD_REFRESH_SOURCE, f"stub {sid}: refresh_source is {type(source).__name__}, not TEXT")
    try:
        parsed = json.loads(source)
    except ValueError:
        parsed = {"type": source.strip()}  # tolerate a bare type name
    kind = parsed.get("type") if isinstance(parsed, dict) else None
    if kind not in _TYPES:
        raise reject(StubError.BAD_REFRESH_SOURCE, f"stub {sid}: refresh_source {source[:200]!r} has no known type {sorted(_TYPES)}")
    return cast(RefreshSource, kind)


def _ms(sid: object, column: str, value: object) -> int | None:
    if value is None:
        return None
    try:
        return parse_time_ms(value)
    except RejectedInput as e:
        raise RejectedInput(Reason.BAD_TIMESTAMP, f"stub {sid}: {column}: {e.detail}") from e
