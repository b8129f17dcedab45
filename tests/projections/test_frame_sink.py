"""The projector's batch decode and the DuckDB fold of captures into ``frames``.

``decode_frame_records`` must read every record exactly as the codec does (same columns, same
dead-letter reasons) and turn field types the codec lets through into ``wrong_shape`` rejects;
the sink must give the tables a plain Python fold gives (first writer wins, each event id once),
however the events are cut into batches and however often a record is delivered again.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import orjson
import pytest

from projections.frames.decode import decode_frame_records
from projections.frames.projection import FramesBatch, FramesProjection
from projections.frames.rows import capture_columns
from streams.frames.capture import Capture
from streams.frames.codec import frame_event_from_json, frame_event_to_json
from streams.frames.dedup import DedupFold, FrameEvent
from streams.model.deadletter import Reason, RejectedInput

SOURCES = ("openclaw", "claude-code", "codex")


def _events(n: int, seed: int = 3) -> list[FrameEvent]:
    """``n`` frame events from the dedup core: a few bodies captured by several sources, some parents/projects missing."""
    rng = random.Random(seed)
    core = DedupFold(600_000)
    out = []
    t = 1_790_000_000_000
    for i in range(n):
        t += rng.randint(0, 20_000)
        body = f"body {rng.randint(0, n // 20)}"
        h = f"{hash(body) & (2**256 - 1):064x}"
        src = rng.choice(SOURCES)
        cap = Capture(event_id=f"e{i}", key=h, body_hash=h, content=f"[hm src:{src}] {body}", source=src, session=f"s{i % 5}",
                      event_type=rng.choice(("user_prompt", "assistant_reply")), parent=rng.choice((None, "p")),
                      project=rng.choice((None, "proj")), importance="normal", event_time_ms=t, partition=0, offset=i)
        out.append(core.process(cap))
    return out


def _oracle(events: list[FrameEvent]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """``frames`` and ``frame_captures`` rows by a plain fold: each event id once, the first created capture writes the frame."""
    seen: set[str] = set()
    frames: dict[str, dict[str, Any]] = {}
    caps = []
    for fe in events:
        c = fe.capture
        if c.event_id in seen:
            continue
        seen.add(c.event_id)
        caps.append((c.event_id, fe.frame_id, c.source, c.session, c.event_type, c.event_time_ms, fe.kind == "touched", c.partition,
                     c.offset, fe.late))
        f = frames.setdefault(fe.frame_id, {"writer": None, "key": c.key, "hash": c.body_hash, "created": fe.frame_time_ms,
                                            "first": c.event_time_ms, "last": c.event_time_ms, "count": 0, "sources": set()})
        if fe.kind == "created" and f["writer"] is None:
            f["writer"] = c
        f["created"] = min(f["created"], fe.frame_time_ms)
        f["first"], f["last"] = min(f["first"], c.event_time_ms), max(f["last"], c.event_time_ms)
        f["count"] += 1
        f["sources"].add(c.source)
    rows = []
    for fid, f in frames.items():
        w = f["writer"]
        writer = (w.content, w.source, w.session, w.event_type, w.parent, w.project, w.importance) if w else (None,) * 7
        rows.append((fid, f["key"], f["hash"], *writer, f["created"], f["first"], f["last"], f["count"], sorted(f["sources"])))
    return sorted(rows), sorted(caps)


def _tables(sink: FramesProjection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    return (sink.con.execute("SELECT * FROM frames ORDER BY ALL").fetchall(),
            sink.con.execute("SELECT * FROM frame_captures ORDER BY ALL").fetchall())


def test_decode_equals_the_codec_on_every_record() -> None:
    events = _events(400)
    raws = [frame_event_to_json(fe) for fe in events]
    cols, rejects, _skipped = decode_frame_records(raws)
    assert rejects == []
    assert cols == capture_columns([frame_event_from_json(r) for r in raws])
    assert cols["content"][0] is not None and any(c is None for c in cols["content"])  # touches carry no content


def _mutate(raw: bytes, **changes: Any) -> bytes:
    d = orjson.loads(raw)
    cap = changes.pop("capture", {})
    d.update(changes)
    d["capture"].update(cap)
    return orjson.dumps(d)


def test_bad_records_get_the_codecs_reason_and_bad_types_are_rejected() -> None:
    good = frame_event_to_json(_events(1)[0])
    cases: list[tuple[bytes | None, Reason | None]] = [
        (b"{not json", Reason.MALFORMED_JSON),
        (None, Reason.MALFORMED_JSON),
        (b"[1, 2]", Reason.WRONG_SHAPE),
        (_mutate(good, schema_version=2), Reason.UNKNOWN_SCHEMA_VERSION),
        (_mutate(good, kind="deleted"), Reason.WRONG_SHAPE),
        (_mutate(good, capture={"extra": 1}), Reason.WRONG_SHAPE),
        (_mutate(good, capture={"event_id": None}), Reason.WRONG_SHAPE),  # the codec lets it through; the table cannot hold it
        (_mutate(good, capture={"event_time_ms": "soon"}), Reason.WRONG_SHAPE),
        (_mutate(good, capture={"partition": 2**40}), Reason.WRONG_SHAPE),
        (_mutate(good, capture={"offset": 2**64 - 1}), Reason.WRONG_SHAPE),
        (_mutate(good, frame_time_ms=12.0), None),  # the codec reads it as 12: accepted, as before
        (_mutate(good, extra_top_level="ignored"), None),
        (good, None),
    ]
    cols, rejects, _skipped = decode_frame_records([raw for raw, _ in cases])
    got = {i: err.reason for i, err in rejects}
    assert got == {i: reason for i, (_, reason) in enumerate(cases) if reason is not None}
    for i, (raw, reason) in enumerate(cases):
        if reason in (Reason.MALFORMED_JSON, Reason.UNKNOWN_SCHEMA_VERSION) or (reason and i in (2, 4, 5)):
            with pytest.raises(RejectedInput) as e:
                frame_event_from_json(raw or b"")
            assert e.value.reason == reason
    assert cols["frame_time_ms"][0] == 12 and len(cols["event_id"]) == 3
    assert cols["seq"] == [0, 1, 2]


@pytest.mark.parametrize("batch", [5, 64, 1000])
def test_sink_equals_a_plain_fold_in_any_batching_with_redeliveries(tmp_path: Path, batch: int) -> None:
    events = _events(600)
    rng = random.Random(batch)
    # redeliveries: some records again right away (same batch), some much later (another offset, another batch)
    stream = list(events)
    for fe in rng.sample(events, 60):
        stream.insert(min(len(stream), stream.index(fe) + rng.choice((1, 300))), fe)
    with FramesProjection(tmp_path / "p.duckdb") as sink:
        created = dups = 0
        for i in range(0, len(stream), batch):
            f, d, _ = sink.apply(FramesBatch.of_events(stream[i:i + batch]), {("frames", 0): i + batch})
            created, dups = created + f, dups + d
        again = sink.apply(FramesBatch.of_events(events))  # the whole log projected again from another offset: nothing changes
        frames, caps = _tables(sink)
    want_frames, want_caps = _oracle(stream)
    assert frames == want_frames
    assert caps == want_caps
    assert (created, dups) == (sum(not c[6] for c in want_caps), sum(c[6] for c in want_caps))
    assert again == (0, 0, 0)


def test_a_touch_before_its_created_capture_gets_the_writer_later(tmp_path: Path) -> None:
    events = _events(600)
    touched = next(fe for fe in events if fe.kind == "touched")
    created = next(fe for fe in events if fe.kind == "created" and fe.frame_id == touched.frame_id)
    with FramesProjection(tmp_path / "p.duckdb") as sink:
        sink.apply(FramesBatch.of_events([touched]))
        assert sink.con.execute("SELECT content, source FROM frames").fetchall() == [(None, None)]
        sink.apply(FramesBatch.of_events([created]))
        frames, _ = _tables(sink)
    assert frames == _oracle([touched, created])[0]
    assert frames[0][3] == created.capture.content and frames[0][13] == 2


def test_a_file_made_with_the_old_primary_keys_folds_the_same(tmp_path: Path) -> None:
    import duckdb

    from projections.frames.schema import DDL

    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    con.execute(DDL[0].replace("frame_id VARCHAR NOT NULL USING", "frame_id VARCHAR PRIMARY KEY USING", 1))
    con.execute(DDL[1].replace("event_id VARCHAR NOT NULL USING", "event_id VARCHAR PRIMARY KEY USING", 1))
    con.close()
    events = _events(300)
    with FramesProjection(db) as sink:
        assert sink.con.execute("SELECT count(*) FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY' "
                                "AND table_name IN ('frames', 'frame_captures')").fetchall() == [(2,)]
        for i in range(0, len(events), 40):
            sink.apply(FramesBatch.of_events(events[i:i + 40] + events[max(0, i - 5):i]))  # each batch also repeats the last 5 of the one before
        got = _tables(sink)
    assert got == _oracle(events)


@pytest.mark.parametrize("collide", [False, True])
def test_sink_equals_a_plain_fold_when_fingerprints_collide_and_frames_are_old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                               collide: bool) -> None:
    """The fingerprint test and the recent-rows search for frames change no answer: with
    every fingerprint colliding (each batch takes the exact scans), and with batches of 3 so that
    touches and redeliveries reach frames written far more than ``RECENT_BATCHES`` batches before."""
    from projections.frames.fingerprints import Fingerprints

    if collide:
        monkeypatch.setattr(Fingerprints, "maybe", lambda self, h: np.ones(len(h), dtype=np.bool_))
    events = _events(600, seed=5)
    rng = random.Random(11)
    stream = list(events)
    for fe in rng.sample(events, 80):
        stream.insert(min(len(stream), stream.index(fe) + rng.choice((1, 40, 300))), fe)
    touches = [fe for fe in events if fe.kind == "touched"]
    stream[200:200] = rng.sample(touches, 20)  # touched events delivered again long after their frame was written
    with FramesProjection(tmp_path / "p.duckdb") as sink:
        for i in range(0, len(stream), 3):
            sink.apply(FramesBatch.of_events(stream[i:i + 3]))
    with FramesProjection(tmp_path / "p.duckdb") as sink:  # reopened: the fingerprints are read from the file
        assert sink.apply(FramesBatch.of_events(events[:50])) == (0, 0, 0)
        frames, caps = _tables(sink)
    assert (frames, caps) == _oracle(stream)


class _Recorder:
    """A DuckDB connection that records the statements it runs."""

    def __init__(self, con: Any) -> None:
        self.con = con
        self.sql: list[str] = []

    def execute(self, sql: str, *args: Any) -> Any:
        self.sql.append(" ".join(sql.split()))
        return self.con.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


def test_a_batch_of_new_captures_scans_neither_whole_table(tmp_path: Path) -> None:
    """A batch with no repeated event id runs no join against all of ``frame_captures``,
    and the frames it touches are found among the rows of the last batches, not in all of ``frames``."""
    events = _events(600, seed=9)
    with FramesProjection(tmp_path / "p.duckdb") as sink:
        for i in range(0, 500, 50):
            sink.apply(FramesBatch.of_events(events[i:i + 50]))
        rec = _Recorder(sink.con)
        sink.con = rec  # type: ignore[assignment]
        sink.apply(FramesBatch.of_events(events[500:]))
        sink.con = rec.con
        frames, caps = _tables(sink)
    assert not [q for q in rec.sql if "JOIN frame_captures" in q]
    joins = [q for q in rec.sql if "FROM frames f JOIN _agg" in q]
    assert joins and all("WHERE f.rowid >=" in q for q in joins)
    assert (frames, caps) == _oracle(events)


def test_capture_columns_are_the_rows_transposed() -> None:
    """The columns equal :func:`event_row` of each event in order (seq the index), touches without content."""
    from projections.frames.rows import CAPTURE_COLUMNS, event_row

    events = _events(500)
    events.append(events[0]._replace(kind="touched", late=True))
    rows = [event_row(fe, i) for i, fe in enumerate(events)]
    cols = capture_columns(events)
    assert list(cols) == list(CAPTURE_COLUMNS)
    assert [tuple(cols[c][i] for c in CAPTURE_COLUMNS) for i in range(len(events))] == rows
    assert {fe.kind for fe in events} == {"created", "touched"} and any(fe.late for fe in events)
    assert capture_columns(iter(events)) == cols and capture_columns([]) == {c: [] for c in CAPTURE_COLUMNS}


class _Failing:
    """A connection that fails one statement as DuckDB would, and whose clean-up then fails too
    (DuckDB refuses ROLLBACK after a failed COMMIT, and any statement in an aborted transaction)."""

    def __init__(self, con: Any, fail_on: str, error: Exception) -> None:
        self._con, self.fail_on, self.error, self.failed = con, fail_on, error, False

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.lstrip().startswith(self.fail_on):
            self.failed = True
            raise self.error
        if sql.strip() == "ROLLBACK":
            self._con.execute("ROLLBACK")
            raise duckdb.TransactionException("TransactionContext Error: cannot rollback - no transaction is active")
        return self._con.execute(sql, *args)

    def unregister(self, name: str) -> Any:
        if self.failed:
            raise duckdb.TransactionException("TransactionContext Error: Current transaction is aborted (please ROLLBACK)")
        return self._con.unregister(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


@pytest.mark.parametrize(("fail_on", "error"), [
    ("COMMIT", duckdb.IOException("IO Error: Failed to commit: No space left on device")),
    ("INSERT INTO frame_captures", duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block of size 256.0 KiB")),
])
def test_a_failed_batch_raises_its_own_error_not_the_clean_up_s(tmp_path: Path, fail_on: str, error: Exception) -> None:
    """A full disk at COMMIT or an out-of-memory insert is the error the caller sees (the user's one line),
    not the ROLLBACK or unregister that DuckDB refuses afterwards; nothing of the batch is written."""
    sink = FramesProjection(tmp_path / "f.duckdb")
    real = sink.con
    try:
        sink.con = _Failing(real, fail_on, error)  # type: ignore[assignment]
        with pytest.raises(type(error), match=str(error).split(": ")[-1]):
            sink.apply(FramesBatch.of_events(_events(50)), {("x", 0): 50})
        sink.con = real
        assert real.execute("SELECT count(*) FROM frame_captures").fetchone() == (0,)
        sink.apply(FramesBatch.of_events(_events(50)), {("x", 0): 50})  # the next batch goes through
        assert real.execute("SELECT count(*) FROM frame_captures").fetchone() == (50,)
    finally:
        sink.con = real
        sink.close()
