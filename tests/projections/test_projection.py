"""The projection interface (:mod:`projections.projection`, :mod:`projections.projection_file`) on a
toy projection: rows and positions in one transaction (a failing batch leaves neither), positions
never move back, settings bound once, several projections on one file's connection."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import duckdb
import pytest

from projections.projection import MetaMismatch, Projection
from projections.projection_file import ProjectionFile


class Notes(Projection[Sequence[tuple[str, int]], int]):
    """A toy projection: ``(text, n)`` rows; a row with ``n < 0`` fails the batch after the rows before it were written."""

    name = "notes"
    ddl: ClassVar[Sequence[str]] = ("CREATE TABLE IF NOT EXISTS notes (text VARCHAR, n INTEGER)",
           "CREATE TABLE IF NOT EXISTS note_positions (input VARCHAR, src_partition INTEGER, next_offset BIGINT, "
           "PRIMARY KEY (input, src_partition))",
           "CREATE TABLE IF NOT EXISTS note_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    positions_table = "note_positions"
    meta_table = "note_meta"

    def write(self, batch: Sequence[tuple[str, int]]) -> int:
        for text, n in batch:
            self.con.execute("INSERT INTO notes VALUES (?, ?)", [text, n])
            if n < 0:
                raise ValueError(f"bad note {text!r}")
        return len(batch)


class Tallies(Notes):
    """A second toy projection with tables of its own, to share a file with :class:`Notes`."""

    name = "tallies"
    ddl = tuple(s.replace("notes", "tallies").replace("note_", "tally_") for s in Notes.ddl)
    positions_table = "tally_positions"
    meta_table = "tally_meta"

    def write(self, batch: Sequence[tuple[str, int]]) -> int:
        self.con.executemany("INSERT INTO tallies VALUES (?, ?)", [list(r) for r in batch])
        return len(batch)


def _rows(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[object, ...]]:
    return con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()


def test_a_batch_and_its_positions_commit_together_or_not_at_all(tmp_path: Path) -> None:
    with Notes(tmp_path / "p.duckdb") as p:
        assert p.position("log:a") == 0
        assert p.apply([("x", 1), ("y", 2)], {("log:a", 0): 2}) == 2
        with pytest.raises(ValueError, match="bad note"):
            p.apply([("z", 3), ("bad", -1)], {("log:a", 0): 4})
        assert _rows(p.con, "notes") == [("x", 1), ("y", 2)]  # the failed batch's first row rolled back too
        assert p.position("log:a") == 2
        p.apply([], {("log:a", 0): 1, ("topic", 3): 7})  # a late, lower position never moves one back
        p.advance({("topic", 1): 5})
        assert p.position("log:a") == 2 and p.positions("topic") == {1: 5, 3: 7}
    with Notes(tmp_path / "p.duckdb") as again:  # durable across a reopen
        assert again.position("log:a") == 2 and len(_rows(again.con, "notes")) == 2


def test_settings_bind_on_first_use_and_refuse_others(tmp_path: Path) -> None:
    with Notes(tmp_path / "p.duckdb") as p:
        p.check_meta({"window": "5s"}, record=False)  # a check alone records nothing
        assert p.stored_meta() == {}
        p.check_meta({"window": "5s"})
        p.check_meta({"window": "5s", "keys": "body"})
        with pytest.raises(MetaMismatch, match="window=5s, not 10s"):
            p.check_meta({"window": "10s"})
        assert p.stored_meta() == {"window": "5s", "keys": "body"}


def test_projections_share_one_files_connection(tmp_path: Path) -> None:
    path = tmp_path / "shared.duckdb"
    with ProjectionFile(path, threads=1) as f:
        notes, tallies = Notes(path, f.cursor()), Tallies(path, f.cursor())
        notes.apply([("a", 1)], {("log:a", 0): 1})
        tallies.apply([("b", 2), ("c", 3)], {("log:a", 0): 2})
        notes.close()  # on a shared connection: leaves it open
        assert tallies.position("log:a") == 2 and notes.position("log:a") == 1
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert _rows(con, "notes") == [("a", 1)] and _rows(con, "tallies") == [("b", 2), ("c", 3)]
    finally:
        con.close()


def test_a_negative_memory_limit_is_refused_with_its_name(tmp_path: Path) -> None:
    with pytest.raises(duckdb.ParserException, match="HIVESTREAM_DUCKDB_MEMORY_LIMIT"):
        ProjectionFile(tmp_path / "p.duckdb", memory_limit="-1GB")
