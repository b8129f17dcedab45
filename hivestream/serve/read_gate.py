"""Reads beside the writer inside ``hivestream serve``: the dedup loop's DuckDB connection lent out
for cursors (the read routes, the snapshot and report thread), and taken back only when no cursor
is open.

DuckDB isolates each cursor's transaction from the loop's commits (MVCC), so a reader sees the
file as of its own start and never blocks a batch; what it must not see is the connection closed
under it (a failed batch reopens the file, stop closes it): :meth:`ReadGate.set` waits until the
cursors lent are closed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import duckdb

log = logging.getLogger("hivestream.serve")


class Unavailable(Exception):
    """The file is not open for reading right now (being reopened after a failed batch, or closing)."""


class ReadGate:
    """Lends cursors on the connection the dedup loop writes with.

    Args:
        wait_s: how long :meth:`set` waits for lent cursors before it replaces the connection
            anyway (seconds; a reader then gets a DuckDB error, never a crash).
    """

    def __init__(self, wait_s: float = 30.0) -> None:
        self.wait_s = wait_s
        self._cond = threading.Condition()
        self._base: duckdb.DuckDBPyConnection | None = None
        self._path: Path | None = None
        self._lent = 0

    def set(self, con: duckdb.DuckDBPyConnection | None, path: Path | None = None) -> None:
        """Lend cursors on ``con`` (the file ``path``) from now on, or none (``None``); first waits
        (at most ``wait_s``) until every cursor lent on the previous connection is closed.

        Raises:
            duckdb.Error: when a cursor cannot be made on ``con``.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._lent == 0, timeout=self.wait_s):
                log.warning("serve: %d readers still open after %.0f s; the file is reopened under them", self._lent, self.wait_s)
            if self._base is not None:
                with contextlib.suppress(duckdb.Error):
                    self._base.close()
            # the cursors are made from one cursor of their own, which only this gate uses (made under its lock)
            self._base = con.cursor() if con is not None else None
            self._path = path

    @property
    def path(self) -> Path | None:
        """The file whose connection is lent now (``None`` while none is)."""
        return self._path

    @contextlib.contextmanager
    def cursor(self) -> Iterator[tuple[duckdb.DuckDBPyConnection, Path]]:
        """A cursor of its own (closed on exit) and the file's path.

        Raises:
            Unavailable: no connection is lent right now.
        """
        with self._cond:
            if self._base is None or self._path is None:
                raise Unavailable("the DuckDB file is being reopened after a failed batch, or serve is stopping")
            cur = self._base.cursor()
            path = self._path
            self._lent += 1
        try:
            yield cur, path
        finally:
            with contextlib.suppress(duckdb.Error):
                cur.close()
            with self._cond:
                self._lent -= 1
                self._cond.notify_all()
