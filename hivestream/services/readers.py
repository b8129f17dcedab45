"""Where the services read a projection from: one protocol, three places.

* **serve**: a cursor on the dedup loop's own connection, lent by its
  :class:`~hivestream.serve.read_gate.ReadGate` (:class:`CursorReader`); the file as of its last
  committed batch, and a marker (the log offset applied) that moves with every batch.
* **the Kafka path** (``hivestream ingest --db FILE``): the snapshot ``<FILE>.snapshot`` the
  projector publishes (:class:`SnapshotReader`), never the file a projector holds; an answer is at
  most ``max_staleness_s`` old (the snapshot's publication, or the projector's heartbeat saying it
  had nothing newer), else :class:`Stale`.
* **the CLI** without a running serve: the file itself or its snapshot, read once
  (:class:`SnapshotReader` without a bound); with a running serve the CLI asks serve's read
  listener for named queries instead (:mod:`hivestream.serve.read_client`).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import duckdb

from projections.duck_file import check_duckdb_file, first_line, held_by_another
from projections.reading import heartbeat_path, snapshot_path

T = TypeVar("T")


class ReadUnavailable(Exception):
    """The projection cannot be read now (being reopened, not published yet, not a projection file); one line."""


class Stale(ReadUnavailable):
    """The freshest copy the reader has is older than its bound (the projector is behind or stopped); one line."""


class ProjectionReader(Protocol):
    """Runs read-only work on a cursor of a projection file."""

    def read(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """``fn(cursor)``, on a consistent view of the file.

        Raises:
            ReadUnavailable: the file cannot be read now.
            duckdb.Error: from ``fn`` (a table missing, say).
        """
        ...

    def marker(self) -> object:
        """A value that changes whenever the projection may have changed (``None``: unknown, check every time)."""
        ...

    def freshness(self) -> str:
        """One line saying how fresh an answer is."""
        ...


class CursorReader:
    """Reads on cursors another component lends (serve's read gate).

    Args:
        cursor: enters to ``(cursor, path)``; raises when none can be lent.
        applied: the log offset applied (the marker).
    """

    def __init__(self, cursor: Callable[[], AbstractContextManager[tuple[duckdb.DuckDBPyConnection, Path]]],
                 applied: Callable[[], int]) -> None:
        self._cursor = cursor
        self._applied = applied

    def read(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """See :meth:`ProjectionReader.read`."""
        try:
            cm = self._cursor()
            cur, _path = cm.__enter__()
        except Exception as e:  # the gate's Unavailable: reopening after a failed batch, or stopping
            raise ReadUnavailable(str(e) or type(e).__name__) from None
        try:
            return fn(cur)
        finally:
            cm.__exit__(None, None, None)

    def marker(self) -> object:
        """The applied log offset."""
        return self._applied()

    def freshness(self) -> str:
        """The file itself, as of serve's last batch."""
        return f"hivestream serve's file as of its last batch ({self._applied():,} log records applied)"


class SnapshotReader:
    """Reads the published snapshot of ``db`` (or ``db`` itself when no writer holds it and no snapshot exists).

    Args:
        db: the projection file.
        max_staleness_s: refuse (:class:`Stale`) a snapshot whose freshness is older (``None``: no bound).
        prefer_file: read ``db`` itself when no writer holds it (the CLI); else only the snapshot
            when there is one (a server must never hold the file a projector is about to open).
        clock: epoch seconds.
    """

    def __init__(self, db: Path, max_staleness_s: float | None = None, *, prefer_file: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.max_staleness_s = max_staleness_s
        self.prefer_file = prefer_file
        self.clock = clock
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._stamp: tuple[int, int] | None = None  # (inode, mtime ns) of the snapshot open
        self._as_of_s = 0.0
        self._line = ""

    def _snapshot_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(snapshot_path(self.db))
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns

    def _heartbeat_s(self) -> float:
        try:
            return int(json.loads(heartbeat_path(self.db).read_text())["checked_at_ms"]) / 1000
        except (OSError, ValueError, KeyError, TypeError):
            return 0.0

    def _open_snapshot(self, stamp: tuple[int, int]) -> None:
        snap = snapshot_path(self.db)
        if self._con is not None:
            with contextlib.suppress(duckdb.Error):
                self._con.close()
            self._con = None
        try:
            con = duckdb.connect(str(snap), read_only=True)
            row = con.execute("SELECT published_at_ms FROM snapshot_info").fetchone()
        except duckdb.Error as e:
            raise ReadUnavailable(f"cannot read the snapshot {snap}: {first_line(e)}") from None
        self._con, self._stamp = con, stamp
        self._as_of_s = int(row[0]) / 1000 if row else 0.0

    def _file(self) -> duckdb.DuckDBPyConnection | None:
        """``db`` itself, read-only, when it exists and no writer holds it."""
        if not self.db.exists():
            return None
        try:
            check_duckdb_file(self.db)
            return duckdb.connect(str(self.db), read_only=True)
        except duckdb.Error as e:
            if held_by_another(e):
                return None
            raise ReadUnavailable(f"cannot read {self.db} as a DuckDB file: {first_line(e)}") from None

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        stamp = self._snapshot_stamp()
        if self.prefer_file or stamp is None:
            con = self._file()
            if con is not None:
                self._line = f"answered from {self.db} (no writer holds it: up to date)"
                try:
                    yield con
                finally:
                    con.close()
                return
            if stamp is None:
                raise ReadUnavailable(f"{self.db} is held by a writer and no snapshot {snapshot_path(self.db)} was published yet"
                                      if self.db.exists() else f"no such DuckDB file: {self.db}")
        if stamp != self._stamp or self._con is None:
            self._open_snapshot(stamp)
        assert self._con is not None
        cur = self._con.cursor()
        as_of = max(self._as_of_s, self._heartbeat_s())
        age = max(0.0, self.clock() - as_of)
        if self.max_staleness_s is not None and age > self.max_staleness_s:
            cur.close()
            raise Stale(f"the projector's last snapshot of {self.db} is {age:.0f} s old, over the {self.max_staleness_s:g}-s bound "
                        "(is `hivestream project` running and caught up?)")
        self._line = f"answered from the snapshot {snapshot_path(self.db)} as of {age:.1f} s ago"
        try:
            yield cur
        finally:
            cur.close()

    def read(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """See :meth:`ProjectionReader.read` (one read at a time: a newer snapshot replaces the connection between two)."""
        with self._lock, self._cursor() as cur:
            return fn(cur)

    def marker(self) -> object:
        """The snapshot's identity (a new publication changes it); ``None`` while the file itself is read."""
        return None if self.prefer_file else self._snapshot_stamp()

    def freshness(self) -> str:
        """The last answer's freshness line."""
        return self._line or f"reads {self.db} or its snapshot"

    def close(self) -> None:
        """Close the snapshot connection held."""
        with self._lock:
            if self._con is not None:
                with contextlib.suppress(duckdb.Error):
                    self._con.close()
                self._con = None


def rows(reader: ProjectionReader, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` through ``reader``.

    Raises:
        ReadUnavailable, duckdb.Error: see :meth:`ProjectionReader.read`.
    """
    return reader.read(lambda cur: cur.execute(sql, params or []).fetchall())
