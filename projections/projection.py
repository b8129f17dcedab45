"""The one shape of a DuckDB projection: its tables, its position per input, one transaction per batch.

Every projection hivestream keeps (frames, memory tool calls, KnowHub experiences, memory stubs)
is a :class:`Projection`. It is made on a connection: a file of its own
(:class:`~projections.projection_file.ProjectionFile`, opened from a path) or a connection shared
with the other projections of that file (the file's, or a cursor of it), so one process writes them
all. It creates its tables when missing (:attr:`Projection.ddl`), answers the position it holds per
input (:meth:`Projection.position`: the first offset of a topic partition, file or log not applied
yet), and applies a batch of its rows together with the next positions of the inputs they came from
in one transaction (:meth:`Projection.apply`): the rows are written by :meth:`Projection.write`, the
one method each projection supplies. Positions live in the projection's own table beside its rows,
so a crash applies a whole batch or none of it, and a batch read again from a position already
stored is skipped by whoever drives the projection. This is pyeventsourcing's ``ProcessRecorder``
(``persistence.py``: the tracking record written in the same transaction as the events), with
DuckDB for the recorder and one positions table per projection.

A projection may bind settings that give its rows their meaning (the dedup window, the match
threshold) to its file on first use and refuse others later (:meth:`Projection.check_meta`).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Generic, Self, TypeVar

import duckdb

from projections.projection_file import ProjectionFile

B = TypeVar("B")
R = TypeVar("R")

Positions = Mapping[tuple[str, int], int]
"""``(input, partition) → next offset``: a topic's partitions, or an input file or log as partition 0."""


class MetaMismatch(RuntimeError):
    """The file was built with other settings than the ones given (mixing two would make its rows meaningless)."""


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """``BEGIN`` … ``COMMIT`` on ``con``; rolled back when the body raises.

    Raises:
        whatever the body raises (a failing ``ROLLBACK`` is swallowed: after a failed ``COMMIT``, a
        full disk say, no transaction is left, and the first error is the one to tell); duckdb.Error
        when the commit fails.
    """
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


def store_positions(con: duckdb.DuckDBPyConnection, table: str, positions: Positions) -> None:
    """Upsert ``positions`` into ``table`` (columns ``input, src_partition, next_offset``); a stored
    position never moves back (``greatest``), so a batch applied late cannot undo a later one.

    Raises:
        duckdb.Error: on a database failure.
    """
    if positions:
        con.executemany(f"""INSERT INTO {table} VALUES (?, ?, ?) ON CONFLICT DO UPDATE
                            SET next_offset = greatest(next_offset, excluded.next_offset)""",
                        [[i, p, o] for (i, p), o in positions.items()])


class Projection(ABC, Generic[B, R]):
    """A projection of batches of type ``B`` into tables of one DuckDB file; :meth:`write` returns ``R``.

    Subclasses set :attr:`name`, :attr:`ddl`, :attr:`positions_table` (and :attr:`meta_table` when
    settings bind the file) and implement :meth:`write`.

    Args:
        path: the DuckDB file (opened for this projection alone when ``con`` is not given).
        con: a connection to ``path`` to use instead (the file's, or a cursor of it: the
            projections of one file share one writer process); :meth:`close` leaves it open.
        memory_limit, threads: of the file opened when ``con`` is not given (:class:`ProjectionFile`).

    Raises:
        duckdb.IOException: when the file is held by another process or is not a DuckDB file.
        duckdb.ParserException: for a bad memory limit.
    """

    name: ClassVar[str]
    """The projection's name (``frames``, ``memory-calls``, ``experiences``, ``stubs``)."""
    ddl: ClassVar[Sequence[str]]
    """Statements creating its tables and views when missing (idempotent)."""
    positions_table: ClassVar[str]
    """Its table of ``(input, src_partition, next_offset)``."""
    meta_table: ClassVar[str | None] = None
    """Its table of bound settings (``key``, ``value``), or None."""
    meta_hint: ClassVar[str] = "use a new --db file"
    """What a refused setting's message tells the user to do."""
    mismatch: ClassVar[type[MetaMismatch]] = MetaMismatch

    def __init__(self, path: str | Path, con: duckdb.DuckDBPyConnection | None = None, *, memory_limit: str | None = None,
                 threads: int | None = None) -> None:
        self.path = str(path)
        self.file: ProjectionFile | None = None
        if con is None:
            self.file = ProjectionFile(path, memory_limit=memory_limit, threads=threads)
            con = self.file.con
        self.con = con
        try:
            for stmt in self.ddl:
                con.execute(stmt)
        except BaseException:
            if self.file is not None:
                with contextlib.suppress(duckdb.Error):  # the first error is the one to tell
                    self.file.close()
            raise

    def close(self) -> None:
        """Checkpoint and close the file when this projection opened it (a shared connection stays open)."""
        if self.file is not None:
            self.file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def position(self, input_name: str, partition: int = 0) -> int:
        """The first offset of ``input_name``/``partition`` not yet applied (0 when none)."""
        row = self.con.execute(f"SELECT next_offset FROM {self.positions_table} WHERE input = ? AND src_partition = ?",
                               [input_name, partition]).fetchone()
        return int(row[0]) if row else 0

    def positions(self, input_name: str) -> dict[int, int]:
        """All stored positions of ``input_name`` as partition → next offset."""
        rows = self.con.execute(f"SELECT src_partition, next_offset FROM {self.positions_table} WHERE input = ?", [input_name]).fetchall()
        return {int(p): int(o) for p, o in rows}

    def apply(self, batch: B, positions: Positions | None = None) -> R:
        """Write ``batch`` and store ``positions`` in one transaction; returns :meth:`write`'s answer.

        Raises:
            duckdb.Error: on a database failure; the transaction is rolled back.
            whatever :meth:`write` raises for a batch it cannot write (rolled back too).
        """
        with transaction(self.con) as con:
            result = self.write(batch)
            store_positions(con, self.positions_table, positions or {})
        return result

    def advance(self, positions: Positions) -> None:
        """Store ``positions`` alone (inputs whose records hold nothing for this projection), in one transaction.

        Raises:
            duckdb.Error: on a database failure.
        """
        if positions:
            with transaction(self.con) as con:
                store_positions(con, self.positions_table, positions)

    @abstractmethod
    def write(self, batch: B) -> R:
        """Write ``batch``'s rows inside the caller's open transaction (no ``BEGIN``/``COMMIT`` of its own).

        Raises:
            duckdb.Error: on a database failure.
        """

    def check_meta(self, settings: Mapping[str, str], *, record: bool = True) -> None:
        """Require the values :attr:`meta_table` holds for ``settings``' keys; record the ones it
        does not hold yet (unless ``record`` is False: a check before anything is written).

        Raises:
            MetaMismatch: (:attr:`mismatch`) when the file was built with other values.
        """
        if self.meta_table is None:
            return
        have = self.stored_meta()
        for k, v in settings.items():
            if k in have and have[k] != v:
                raise self.mismatch(f"{self.path} was built with {k}={have[k]}, not {v}: {self.meta_hint}")
        if record:
            self.con.executemany(f"INSERT INTO {self.meta_table} VALUES (?, ?) ON CONFLICT DO NOTHING", list(settings.items()))

    def stored_meta(self) -> dict[str, str]:
        """The settings bound to the file (empty when none, or no :attr:`meta_table`)."""
        if self.meta_table is None:
            return {}
        return {str(k): str(v) for k, v in self.con.execute(f"SELECT key, value FROM {self.meta_table}").fetchall()}
