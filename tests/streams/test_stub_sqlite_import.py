"""Importing a NanoClaw stubs.db with the seed's exact schema, then matching against it."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from streams.model.deadletter import Reason, RejectedInput
from streams.stubs.errors import StubError, code_of
from streams.stubs.events import MessageEmbedded, encode_embedding
from streams.stubs.matcher import StubIndex, to_matched_events
from streams.stubs.sqlite_import import DEFAULT_MODEL, iter_stub_rows, read_stubs_db
from tests.support.stub_fixtures import SCHEMA

DIM = 3072

ROWS = [  # id, title, created_at, last_matched_at, match_count, refresh_source, last_refreshed_at
    (
        1,
        "Tracking-stack",
        "2026-04-20T10:00:00.000Z",
        "2026-05-03T18:01:02.500Z",
        12,
        '{"type":"file-watch","path":"/workspace/project/x.md"}',
        "2026-05-04T03:20:00Z",
    ),
    (2, "Mätning+BigQuery", "2026-04-21 09:30:00", None, 0, '{"type":"scheduler-db-query","query":"SELECT 1"}', "2026-05-04 03:20:01"),
    (3, "BidTheatre", "2026-04-22T11:00:00+02:00", "2026-05-01T12:00:00Z", 3, '{"type":"script","path":"/x.sh"}', None),
    (4, "OAuth Extra Usage", "2026-04-23T08:00:00Z", None, None, '{"type":"manual"}', None),
    (7, "Matprisjamforare", "2026-04-24T08:00:00Z", "2026-04-30T07:00:00Z", 1, None, None),
]


def _vectors(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def build_db(path: Path, archive_dir: Path, vectors: np.ndarray, rows: list[tuple] = ROWS) -> None:  # type: ignore[type-arg]
    archive_dir.mkdir(exist_ok=True)
    con = sqlite3.connect(path)
    con.execute(SCHEMA)
    for (sid, title, created, matched, count, source, refreshed), vec in zip(rows, vectors, strict=True):
        archive = archive_dir / f"{sid}.md"
        archive.write_text("x" * (400 * sid + 1), encoding="utf-8")  # ceil((400*sid+1)/4) = 100*sid + 1 tokens
        con.execute(
            "INSERT INTO stubs VALUES (?,?,?,?,?,?,?,?,?,?)",
            (sid, title, f"hook for {title}", str(archive), vec.astype("<f4").tobytes(), created, matched, count, source, refreshed),
        )
    con.commit()
    con.close()


def embedded(channel: str, vec: np.ndarray, n: int = 0) -> MessageEmbedded:
    return MessageEmbedded(
        event_id=f"e{channel}{n}",
        event_time_ms=1_800_000_000_000 + n,
        channel=channel,
        message_id=f"m{n}",
        embedding_b64=encode_embedding(vec),
        model=DEFAULT_MODEL,
        dim=DIM,
    )


def test_import_maps_every_column(tmp_path: Path) -> None:
    vecs = _vectors(1, len(ROWS))
    build_db(tmp_path / "stubs.db", tmp_path / "archived", vecs)
    events = read_stubs_db(tmp_path / "stubs.db", "safariresor")
    assert [e.stub_id for e in events] == [1, 2, 3, 4, 7]
    e1, e2, e3, e4, e7 = events
    assert (e1.channel, e1.title, e1.stub_text, e1.model, e1.dim) == ("safariresor", "Tracking-stack", "hook for Tracking-stack", "gemini-embedding-001", 3072)
    assert [e.refresh_source for e in events] == ["file-watch", "scheduler-db-query", "script", "manual", "none"]
    assert e1.refresh_spec == ROWS[0][5] and e7.refresh_spec is None
    assert [e.archive_tokens for e in events] == [101, 201, 301, 401, 701]
    assert e1.event_time_ms == 1776679200000  # 2026-04-20T10:00:00Z
    assert e2.event_time_ms == 1776763800000  # naive SQLite datetime = UTC
    assert e3.event_time_ms == 1776848400000  # +02:00 offset
    assert (e1.match_count, e1.last_matched_at_ms, e1.last_refreshed_at_ms) == (12, 1777831262500, 1777864800000)
    assert (e2.match_count, e2.last_matched_at_ms, e2.last_refreshed_at_ms) == (0, None, 1777864801000)
    assert (e4.match_count, e4.last_matched_at_ms) == (0, None)  # NULL count = never matched
    for e, v in zip(events, vecs, strict=True):
        assert np.frombuffer(base64.b64decode(e.embedding_b64), "<f4").tobytes() == v.tobytes()
    # deterministic ids: same database, same ids; a changed column, a new id
    assert [e.event_id for e in read_stubs_db(tmp_path / "stubs.db", "safariresor")] == [e.event_id for e in events]
    assert len({e.event_id for e in events}) == len(events)
    con = sqlite3.connect(tmp_path / "stubs.db")
    con.execute("UPDATE stubs SET match_count = 13 WHERE id = 1")
    con.commit()
    con.close()
    again = read_stubs_db(tmp_path / "stubs.db", "safariresor")
    assert again[0].event_id != e1.event_id and again[1].event_id == e2.event_id
    assert read_stubs_db(tmp_path / "stubs.db", None)[0].event_id != e1.event_id  # the channel is part of the id


def test_own_vector_plus_noise_matches_first_and_telemetry_survives(tmp_path: Path) -> None:
    vecs = _vectors(2, len(ROWS))
    gvecs = _vectors(3, 2)
    build_db(tmp_path / "stubs.db", tmp_path / "archived", vecs)
    build_db(tmp_path / "stubs-global.db", tmp_path / "garchived", gvecs, ROWS[:2])
    index = StubIndex()
    for ev in [*read_stubs_db(tmp_path / "stubs.db", "discord-main"), *read_stubs_db(tmp_path / "stubs-global.db", None)]:
        index.apply(ev)
    assert len(index) == 7
    rng = np.random.default_rng(99)
    for n, (row, vec) in enumerate(zip(ROWS, vecs, strict=True)):
        noisy = (vec + rng.normal(0.0, 0.05, DIM)).astype(np.float32)
        msg = embedded("discord-main", noisy, n)
        matches = index.match(msg)
        assert matches[0].stub_id == row[0] and matches[0].stub_channel == "discord-main"
        assert matches[0].similarity > 0.99 and len(matches) == 1  # unrelated random 3072-dim vectors are near 0
        assert index.match_many([msg]) == [matches]
        for ev in to_matched_events(msg, matches):
            index.apply(ev)
    # a global stub's vector matches from any channel
    [g] = index.match(embedded("another-channel", gvecs[1], 50))
    assert (g.stub_channel, g.stub_id) == (None, 2)

    imported = read_stubs_db(tmp_path / "stubs.db", "discord-main")
    for n, (sid, _title, _created, _matched, count, source, _refreshed) in enumerate(ROWS):
        rec = index.record("discord-main", sid)
        assert rec is not None
        assert rec.match_count == (count or 0) + 1  # the imported count survived, plus this match
        assert rec.last_matched_at_ms == 1_800_000_000_000 + n  # later than every imported time
        assert rec.refresh_source == ("none" if source is None else json.loads(source)["type"])
        assert rec.refresh_spec == source
        assert rec.last_refreshed_at_ms == imported[n].last_refreshed_at_ms
        assert rec.created_at_ms == imported[n].event_time_ms
    assert [index.record("discord-main", s).last_refreshed_at_ms for s in (1, 2, 3)] == [1777864800000, 1777864801000, None]  # type: ignore[union-attr]
    untouched = index.record(None, 1)
    assert untouched is not None and (untouched.match_count, untouched.last_matched_at_ms) == (12, 1777831262500)
    assert untouched.last_refreshed_at_ms == 1777864800000 and untouched.refresh_source == "file-watch"


def test_bad_rows_are_rejected_one_by_one(tmp_path: Path) -> None:
    vecs = _vectors(4, len(ROWS))
    vecs[1, 5] = np.nan
    vecs[2] = 0.0
    build_db(tmp_path / "stubs.db", tmp_path / "archived", vecs)
    con = sqlite3.connect(tmp_path / "stubs.db")
    con.execute('UPDATE stubs SET refresh_source = \'{"type":"carrier-pigeon"}\' WHERE id = 4')
    con.execute("UPDATE stubs SET embedding = x'0000803f00' WHERE id = 7")
    ok_archive = str(tmp_path / "archived" / "1.md")
    con.execute("INSERT INTO stubs (id, title, archive_path, embedding) VALUES (8, 't', '/workspace/project/8.md', ?)", (vecs[0].tobytes(),))
    con.execute("INSERT INTO stubs (id, title, archive_path, embedding) VALUES (9, 't', ?, NULL)", (ok_archive,))
    con.execute("INSERT INTO stubs (id, title, archive_path, embedding, created_at) VALUES (10, 't', ?, ?, 'soon')", (ok_archive, vecs[0].tobytes()))
    con.commit()
    con.close()
    items = list(iter_stub_rows(tmp_path / "stubs.db", "c"))
    assert not isinstance(items[0], RejectedInput)
    codes = [code_of(i) if isinstance(i, RejectedInput) else "ok" for i in items]
    assert codes == [
        "ok",
        StubError.NON_FINITE,
        StubError.ZERO_VECTOR,
        StubError.BAD_REFRESH_SOURCE,
        StubError.BAD_LENGTH,
        StubError.BAD_ROW,
        StubError.BAD_ROW,
        "",
    ]
    assert isinstance(items[7], RejectedInput) and items[7].reason == Reason.BAD_TIMESTAMP and "stub 10: created_at" in items[7].detail
    # an archive that is only mounted in the container: supply its size instead
    items = list(iter_stub_rows(tmp_path / "stubs.db", "c", tokens_for=lambda p: 10))
    assert not isinstance(items[5], RejectedInput) and items[5].archive_tokens == 10
    with pytest.raises(RejectedInput) as ei:
        read_stubs_db(tmp_path / "stubs.db", "c")
    assert code_of(ei.value) == StubError.NON_FINITE


def test_not_a_stubs_db(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "empty.db").close()
    with pytest.raises(sqlite3.Error):
        read_stubs_db(tmp_path / "empty.db", "c")
