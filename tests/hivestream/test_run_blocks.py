"""The runner's columnar batches (:mod:`hivestream.embedded.blocks`) against the capture-by-capture fold.

The oracle is the path the runner took before blocks and the one the Kafka worker still takes:
:meth:`DedupFold.process` on each :class:`Capture`, the frame events into
:meth:`FramesProjection.apply_batch` (rows transposed by :func:`capture_columns`), in one batch. The runner
gets the same outcomes cut into blocks of every size from 1 up, batches of every size, re-delivered
event ids, lines that are not captures, dead letters and memory tool calls between them, and runs
that resume inside a block.
"""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path
from typing import Any

import duckdb
import pytest

from hivestream.embedded import blocks
from hivestream.embedded.blocks import BatchColumns, blocks_of, to_block
from hivestream.embedded.frames import EmbeddedRunner
from projections.frames.projection import FramesBatch, FramesProjection
from projections.frames.rows import capture_columns
from streams.frames.capture import Capture, Skipped
from streams.frames.capture_import import Outcome
from streams.frames.dedup import DedupFold
from streams.memory_calls.tool_calls import MemoryToolCall
from streams.settings import Settings
from tests.support.dedup_helpers import cap

ORIGIN = "file:/w/blocks.jsonl"
T0 = 1_790_000_000_000
QUERIES = {
    "frames": "SELECT * FROM frames",
    "frame_captures": "SELECT * FROM frame_captures",
    "memory_tool_calls": "SELECT * FROM memory_tool_calls",
    "dead_letters": "SELECT * EXCLUDE (time_ms) FROM dead_letters",
    "skipped_events": "SELECT * FROM skipped_events WHERE event_id NOT LIKE 'oracle-%'",
    "event_details": "SELECT * FROM event_details WHERE event_id NOT LIKE 'oracle-%'",
}


def _call(eid: str, t: int) -> MemoryToolCall:
    return MemoryToolCall(eid, "memory_search", "hive-mind", "read", "claude-code", "s1", "claude-code", t, 3, None, None)


def _outcomes(seed: int, n: int = 600) -> list[Outcome]:
    """Captures of a few bodies close in time (touches, late ones, frames closing), some event ids read
    again, and other kinds between them; several outcomes share a line now and then."""
    rnd = random.Random(seed)
    outs: list[Outcome] = []
    seen: list[Capture] = []
    off = 0
    for i in range(n):
        if rnd.random() < 0.1:
            off += 1  # some lines hold two outcomes
        off += 1
        r = rnd.random()
        if r < 0.08 and seen:  # the same event read again (a snapshot of a growing file)
            c = rnd.choice(seen)._replace(offset=off, partition=7)
            outs.append((off, "c", None, tuple(c), None))
        elif r < 0.72:
            body = f"body {rnd.randrange(12)}"
            t = T0 + i * 40_000 + rnd.randrange(-400_000, 60_000)
            c = cap(f"[hm session:s{i % 3} src:{rnd.choice(['claude-code', 'codex', 'openclaw'])} event:stop] {body}", t, f"e{seed}-{i}",
                    offset=off)._replace(partition=7)
            seen.append(c)
            call = _call(c.event_id, t) if rnd.random() < 0.05 else None
            outs.append((off, "c", None, c if rnd.random() < 0.5 else tuple(c), call))
        elif r < 0.85:
            eid = f"n{seed}-{rnd.randrange(i + 1)}"  # now and then an event id read again: one row
            skip = Skipped(eid, rnd.choice(["not_a_turn", "empty_body"]), "claude-code", "s1", "pre-tool-use", "PreToolUse", None,
                           T0 + i, 7, off, json.dumps({"tool_use_id": eid}) if rnd.random() < 0.5 else None)
            outs.append((off, "n", None, skip, _call(f"n{seed}-{i}", T0 + i) if rnd.random() < 0.3 else None))
        elif r < 0.93:
            outs.append((off, "e", f'{{"line": {i}}}'.encode(), ("body_too_large", "body over the limit", f"x{seed}-{i}"), None))
        else:
            outs.append((off, "d", b"{not json", ("malformed_json", "expected a value", ""), None))
    return outs


def _tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[Any, ...]]]:
    return {t: sorted(con.execute(q).fetchall(), key=repr) for t, q in QUERIES.items()}


def _oracle(outs: list[Outcome], tmp_path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every capture through DedupFold.process and FramesProjection.apply_batch in one batch."""
    core = DedupFold(Settings().window, allowed_lateness_ms=Settings().allowed_lateness_ms)
    events = [core.process(Capture._make(o[3])) for o in outs if o[1] == "c"]
    runner = EmbeddedRunner(tmp_path / "oracle.duckdb")  # for the dead letters, skipped events and memory tool calls: captures as
    try:                                                    # skipped events of ids the queries leave out
        runner.run_outcomes(ORIGIN, [(o[0], "n", None, Skipped(f"oracle-{o[0]}", "not_a_turn", "x", "s", "stop", None, None, 0, 0, 0), o[4])
                                     if o[1] == "c" else o for o in outs])
        sink: FramesProjection = runner.sink
        sink.apply(FramesBatch.of_events(events))
        return _tables(sink.con)
    finally:
        runner.close()


@pytest.mark.parametrize("seed", range(3))
def test_blocks_of_every_size_and_batches_of_every_size_equal_the_capture_by_capture_fold(
        seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outs = _outcomes(seed, 350)
    want = _oracle(outs, tmp_path)
    assert len(want["frames"]) > 10 and len(want["memory_tool_calls"]) > 5 and len(want["dead_letters"]) > 10
    assert len(want["skipped_events"]) > 10 and len(want["event_details"]) > 5
    for i, (block, batch) in enumerate([(1, 29), (3, 11), (50, 23), (4096, 64), (7, 100_000)]):
        monkeypatch.setattr(blocks, "BLOCK_OUTCOMES", block)
        runner = EmbeddedRunner(tmp_path / f"r{i}.duckdb", Settings(batch_size=batch))
        try:
            runner.run_outcomes(ORIGIN, outs)
            got = _tables(runner.sink.con)
            report = runner.report
        finally:
            runner.close()
        assert got == want, f"blocks of {block}, batches of {batch}"
        caps = sum(o[1] == "c" for o in outs)
        assert report.captures == caps and report.frames_created == len(want["frames"])
        assert report.frames_created + report.duplicates + report.repeated == caps
        assert report.repeated == caps - len(want["frame_captures"]) > 0


def test_a_run_resumed_inside_a_block_equals_one_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outs = _outcomes(11)
    monkeypatch.setattr(blocks, "BLOCK_OUTCOMES", 64)
    one = EmbeddedRunner(tmp_path / "one.duckdb", Settings(batch_size=50))
    try:
        one.run_outcomes(ORIGIN, outs)
        want = _tables(one.sink.con)
    finally:
        one.close()
    cut = outs[len(outs) // 3][0]  # the first run stops before this line (a kill after a batch's commit)
    first = EmbeddedRunner(tmp_path / "two.duckdb", Settings(batch_size=50))
    try:
        first.run_outcomes(ORIGIN, [o for o in outs if o[0] < cut])
    finally:
        first.close()
    again = EmbeddedRunner(tmp_path / "two.duckdb", Settings(batch_size=50))
    try:
        again.run_outcomes(ORIGIN, outs)  # blocks of 64 outcomes: the stored position falls inside one
        assert again.report.skipped == sum(o[0] < cut for o in outs) > 64
        assert _tables(again.sink.con) == want
    finally:
        again.close()


def test_a_batch_s_columns_are_the_frame_events_rows_and_a_block_pickles() -> None:
    outs = _outcomes(5, 300)
    core, oracle = DedupFold(), DedupFold()
    batch = BatchColumns()
    for blk in blocks_of(outs, 37):
        blk = pickle.loads(pickle.dumps(blk))  # as the import processes send it
        caps = [i for i, k in enumerate(blk.kinds) if k == "c"]
        batch.decisions += [core.decide(blk.ids[j], blk.keys[j], blk.times[j], blk.parts[j], blk.coffs[j]) for j in range(len(caps))]
        batch.add(blk, 0, len(caps))
    events = [oracle.process(Capture._make(o[3])) for o in outs if o[1] == "c"]
    want = capture_columns(events)
    got = {k: v.to_pylist() if hasattr(v, "to_pylist") else list(v) for k, v in batch.columns().items()}
    created = [not d for d in want["is_duplicate"]]
    assert [c for c, keep in zip(got.pop("content"), created, strict=True) if keep] == [c for c in want.pop("content") if c is not None]
    assert got == want
    assert BatchColumns().columns() == {k: [] for k in [*want, "content"]}


def test_a_block_keeps_the_outcomes_in_order() -> None:
    outs = _outcomes(3, 200)
    blk = to_block(outs)
    assert blk.offs == [o[0] for o in outs] and blk.kinds == "".join(o[1] for o in outs)
    assert blk.others == [(o[2], o[3], None) for o in outs if o[1] != "c"]
    assert blk.calls == {i: o[4] for i, o in enumerate(outs) if o[4] is not None}
    caps = [Capture._make(o[3]) for o in outs if o[1] == "c"]
    assert blk.ids == [c.event_id for c in caps] and blk.keys == [c.key for c in caps] and blk.coffs == [c.offset for c in caps]
    assert blk.strings.column("content").to_pylist() == [c.content for c in caps]
    assert blk.strings.column("parent").to_pylist() == [c.parent for c in caps]
    empty = to_block([])
    assert empty.kinds == "" and empty.strings.num_rows == 0


def test_a_dead_letter_is_stamped_when_its_outcome_was_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A serve log's clock is the record's append time, set as each record's outcomes are made
    (hivestream/embedded/log_run.py): a block read ahead must not stamp its dead letters with the
    time of its last record."""
    monkeypatch.setattr(blocks, "BLOCK_OUTCOMES", 64)
    outs = _outcomes(8, 300)
    now = {"t": 0}

    def stamped() -> Any:
        for o in outs:
            now["t"] = T0 + 1000 * o[0]
            yield o

    runner = EmbeddedRunner(tmp_path / "clock.duckdb", Settings(batch_size=50), clock=lambda: now["t"])
    try:
        runner.run_outcomes(ORIGIN, stamped())
        rows = runner.sink.con.execute("SELECT src_offset, time_ms FROM dead_letters").fetchall()
    finally:
        runner.close()
    assert len(rows) > 10 and all(t == T0 + 1000 * off for off, t in rows), rows[:5]
