"""The ``dedup_state`` text the embedded runner stores (:func:`projections.frames.dedup_state.state_json`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.frames.dedup_state import state_json

ENTRY = st.fixed_dictionaries({
    "f": st.lists(st.tuples(st.text(), st.integers(-(2**62), 2**62), st.none() | st.integers(0, 2**62), st.booleans(),
                            st.lists(st.text()), st.lists(st.text()), st.lists(st.none() | st.integers(0, 2**62))).map(list), max_size=3),
    "g": st.integers(-(2**63), 2**63 - 1),
    "p": st.tuples(st.integers(0, 2**31), st.integers(0, 2**62)).map(list),
})


@given(ENTRY)
def test_reads_back_as_the_entry(entry: dict[str, Any]) -> None:
    """Any dedup entry (odd text included) reads back equal with ``json.loads``, as ``load_dedup_state`` reads it."""
    assert json.loads(state_json(entry)) == entry


@pytest.mark.parametrize("big", [2**64, -(2**63) - 1, 10**30])
def test_an_int_beyond_64_bits_is_written_by_json(big: int) -> None:
    """orjson refuses ints beyond 64 bits; the entry is written all the same (a batch never fails on it)."""
    entry = {"f": [], "g": big, "p": [0, 1]}
    assert state_json(entry) == json.dumps(entry)
    assert json.loads(state_json(entry)) == entry


def test_not_json_data_raises() -> None:
    with pytest.raises(TypeError):
        state_json({"g": object()})


@pytest.mark.parametrize("old_file", [False, True])
def test_state_rows_follow_the_changes_batch_after_batch(tmp_path: Path, old_file: bool) -> None:
    """``dedup_state`` has no index; each batch deletes its keys' rows and appends the
    set ones. After every batch the stored state equals the changes applied to a dict, one row per
    key, in a new file and in one created with the primary key older versions gave it."""
    import random

    from projections.frames.projection import FramesBatch, FramesProjection

    db = tmp_path / "s.duckdb"
    if old_file:
        import duckdb

        con = duckdb.connect(str(db))
        con.execute("CREATE TABLE dedup_state (dedup_key VARCHAR PRIMARY KEY, frames VARCHAR NOT NULL)")
        con.close()
    rng = random.Random(3)
    model: dict[str, Any] = {}
    with FramesProjection(db) as sink:
        pk = sink.con.execute("SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'dedup_state' "
                              "AND constraint_type = 'PRIMARY KEY'").fetchall()
        assert pk == [(1 if old_file else 0,)]
        for batch in range(30):
            keys = rng.sample(range(400), 60)
            upserts = {f"k{k}": {"f": [], "g": batch, "p": [0, k]} for k in keys[:45]}
            deletes = [f"k{k}" for k in keys[45:] if f"k{k}" in model] + ["never-set"]
            sink.apply(FramesBatch(state_changes=(upserts, deletes)), {("in", 0): batch + 1})
            model.update(upserts)
            for k in deletes:
                model.pop(k, None)
            assert sink.load_dedup_state() == model
            ((rows, keys_n),) = sink.con.execute("SELECT count(*), count(DISTINCT dedup_key) FROM dedup_state").fetchall()
            assert rows == keys_n == len(model)
    with FramesProjection(db) as sink:  # reopened
        assert sink.load_dedup_state() == model
