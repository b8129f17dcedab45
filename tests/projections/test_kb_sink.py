"""ExperienceProjection.apply (projections.experiences.projection): one Arrow ``INSERT … SELECT`` per table and batch.

A key twice in one batch keeps one row (DuckDB rejects a key twice in one statement), a batch
applied again changes nothing, the dedup state and the reminder counters are replaced as the
fold reported them, positions only move forward, and a failing batch leaves nothing behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from projections.experiences.projection import ExperienceBatch, ExperienceProjection
from streams.experiences.fold import ExperienceChanges
from streams.model.deadletter import DeadLetter, Reason


def _review(event_id: str, experience_id: str = "x1") -> dict[str, Any]:
    return {"event_id": event_id, "experience_id": experience_id, "decision": "approved", "reviewer": "lead", "reason": "ok",
            "event_time_ms": 1_000}


def _dead_letter(offset: int) -> DeadLetter:
    return DeadLetter(reason=Reason.MALFORMED_JSON, detail="not json", original_b64="bm90IGpzb24=", source="kb", partition=1,
                      offset=offset, event_id="ev-dl", time_ms=5)


def _rows(sink: ExperienceProjection, table: str) -> list[tuple[Any, ...]]:
    return sink.con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()


def _all(sink: ExperienceProjection) -> dict[str, list[tuple[Any, ...]]]:
    tables = ["experience_redactions", "experience_reviews", "kb_dead_letters", "kb_hooks_seen", "kb_reminder_counters", "kb_dedup_state",
              "kb_positions"]
    return {t: _rows(sink, t) for t in tables}


def _first() -> ExperienceChanges:
    return ExperienceChanges(
        redactions=[("e1", "email", 1), ("e1", "email", 1), ("e1", "phone", 2)],
        reviews=[_review("r1"), _review("r1")],
        dead_letters=[_dead_letter(7), _dead_letter(7), _dead_letter(8)],
        hooks=["h1", "h2", "h1"],
        state_changes=({"k1": {"frame": "f1", "n": 1}, "k2": {"frame": "f2", "n": 1}}, []),
    )


def test_duplicate_keys_in_one_batch_keep_one_row(tmp_path: Path) -> None:
    with ExperienceProjection(tmp_path / "kb.duckdb") as sink:
        sink.apply(ExperienceBatch(_first(), {"s1": 2, "s0": 1}), {("kb", 0): 10, ("kb", 1): 4})
        got = _all(sink)
    assert got["experience_redactions"] == [("e1", "email", 1), ("e1", "phone", 2)]
    assert got["experience_reviews"] == [("r1", "x1", "approved", "lead", "ok", 1_000)]
    assert got["kb_dead_letters"] == [("kb[1]", 7, "ev-dl", "malformed_json", "not json", b"not json", 5),
                                      ("kb[1]", 8, "ev-dl", "malformed_json", "not json", b"not json", 5)]
    assert got["kb_hooks_seen"] == [("h1",), ("h2",)]
    assert got["kb_reminder_counters"] == [("s0", 1), ("s1", 2)]
    assert got["kb_dedup_state"] == [("k1", '{"frame": "f1", "n": 1}'), ("k2", '{"frame": "f2", "n": 1}')]
    assert got["kb_positions"] == [("kb", 0, 10), ("kb", 1, 4)]


def test_later_batches_upsert_delete_replace_and_only_move_positions_forward(tmp_path: Path) -> None:
    with ExperienceProjection(tmp_path / "kb.duckdb") as sink:
        sink.apply(ExperienceBatch(_first(), {"s1": 2}), {("kb", 0): 10})
        second = ExperienceChanges(hooks=["h2", "h3"], state_changes=({"k1": {"frame": "f1", "n": 2}}, ["k2"]))
        sink.apply(ExperienceBatch(second, {"s2": 1}), {("kb", 0): 6, ("kb", 2): 3})
        got = _all(sink)
        assert got["kb_hooks_seen"] == [("h1",), ("h2",), ("h3",)]
        assert got["kb_dedup_state"] == [("k1", '{"frame": "f1", "n": 2}')]
        assert got["kb_reminder_counters"] == [("s2", 1)]
        assert got["kb_positions"] == [("kb", 0, 10), ("kb", 2, 3)]
        assert sink.load_seen_hooks() == {"h1", "h2", "h3"}
        assert sink.load_dedup_state() == {"k1": {"frame": "f1", "n": 2}}
        assert sink.load_counters() == {"s2": 1}
        sink.apply(ExperienceBatch(second, {"s2": 1}), {("kb", 0): 6, ("kb", 2): 3})  # re-delivered: nothing changes
        assert _all(sink) == got
        sink.apply(ExperienceBatch(ExperienceChanges(), {}), {})  # no counters left: the table is emptied
        assert _rows(sink, "kb_reminder_counters") == []
        sink.apply(ExperienceBatch(ExperienceChanges(), None), {})  # counters not given: kept
        assert _rows(sink, "kb_reminder_counters") == []


def test_a_failing_batch_leaves_nothing_and_the_sink_keeps_working(tmp_path: Path) -> None:
    with ExperienceProjection(tmp_path / "kb.duckdb") as sink:
        sink.apply(ExperienceBatch(_first(), {"s1": 2}), {("kb", 0): 10})
        before = _all(sink)
        bad = ExperienceChanges(hooks=["h9"], redactions=[("e2", None, 1)])  # type: ignore[list-item]  # kind is NOT NULL
        with pytest.raises(duckdb.Error):
            sink.apply(ExperienceBatch(bad, {"s9": 9}), {("kb", 0): 20})
        assert _all(sink) == before
        sink.apply(ExperienceBatch(ExperienceChanges(hooks=["h9"]), {"s1": 2}), {("kb", 0): 20})
        assert ("h9",) in _rows(sink, "kb_hooks_seen")
        assert _rows(sink, "kb_positions") == [("kb", 0, 20)]
