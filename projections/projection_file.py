"""A DuckDB projection file opened for writing: one process, one connection, every projection on it.

DuckDB lets one process open a file for writing, so the projections kept in one file (frames,
memory tool calls, KnowHub experiences, memory stubs: :class:`projections.projection.Projection`)
share the connection this opens, or cursors of it. The connection is configured once here: a
memory limit (DuckDB's default, 80 % of RAM, let its buffer cache keep every block it scanned) and
a checkpoint threshold. Byte copies of the held file (snapshots for readers) go through
:class:`~projections.file_copy.HeldFileCopy`, which keeps DuckDB's lock.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from projections.duck_file import check_duckdb_file
from projections.file_copy import HeldFileCopy

# DuckDB's memory limit per writer (its default, 80 % of RAM, let the buffer cache keep every block
# it scanned). The rows not yet checkpointed live in that memory: at 256 MB with a 256 MB WAL
# threshold they spilled to temporary files (zstd) at 2M captures, ~1 µs of CPU per capture more
# than at 200k (at 512 MB no spill, but peak RSS 888 MiB).
DEFAULT_MEMORY_LIMIT = "320MB"
# DuckDB checkpoints once its WAL passes this. At its default (16 MB) every batch of the runner
# (~25 MB of WAL per 50,000 captures) checkpointed, and each checkpoint recompressed the tables'
# partly filled last row groups again: ~14 µs of CPU per capture once the file held a few row
# groups. At 128 MB a checkpoint came every ~5 batches, and at 2M captures some cost 2.9 s where
# others cost 0.8 (10 s in all; 15.6 s at 64 MB, 7.4 s at 256 MB). With the memory limit above,
# 192 MB (a checkpoint every ~8 batches) left the runner's CPU per capture at 2M where it is at
# 200k, peak RSS 707 MiB. A restart after a crash replays at most this much WAL.
CHECKPOINT_THRESHOLD = "192MB"


class ProjectionFile:
    """One DuckDB file opened for writing.

    Args:
        path: the DuckDB file; created when missing.
        memory_limit: DuckDB's ``memory_limit`` for this connection (e.g. ``"256MB"``), else
            ``HIVESTREAM_DUCKDB_MEMORY_LIMIT``, else :data:`DEFAULT_MEMORY_LIMIT`; blocks over it
            are dropped from the cache (and read again), intermediate results spill to disk.
        threads: DuckDB's ``threads`` for this connection, else DuckDB's default (one per core).

    Attributes:
        path: the file (``str``); ``con``: the connection; ``file_copy``: its byte copier.

    Raises:
        duckdb.IOException: when another process holds the file, or it is not a DuckDB file
            (:func:`projections.duck_file.check_duckdb_file`).
        duckdb.ParserException: for a memory limit DuckDB cannot read, or a negative one (the message names it).
    """

    def __init__(self, path: str | Path, *, memory_limit: str | None = None, threads: int | None = None) -> None:
        self.path = str(path)
        limit = memory_limit or os.environ.get("HIVESTREAM_DUCKDB_MEMORY_LIMIT") or DEFAULT_MEMORY_LIMIT
        config: dict[str, str | bool | int | float | list[str]] = {"memory_limit": limit, "checkpoint_threshold": CHECKPOINT_THRESHOLD}
        if threads is not None:
            config["threads"] = threads
        if limit.strip().startswith("-"):  # DuckDB reads a negative limit as its default, 80 % of RAM
            raise duckdb.ParserException(f"memory limit {limit!r} (HIVESTREAM_DUCKDB_MEMORY_LIMIT): must not be negative")
        check_duckdb_file(self.path)
        try:
            self.con = duckdb.connect(self.path, config=config)
        except duckdb.ParserException as e:  # the memory limit is the one setting here a user writes
            raise duckdb.ParserException(f"memory limit {limit!r} (HIVESTREAM_DUCKDB_MEMORY_LIMIT): {e}") from e
        self.file_copy = HeldFileCopy(self.path)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of the connection: the same file and process, a transaction of its own."""
        return self.con.cursor()

    def close(self) -> None:
        """Checkpoint and close the file (then the copier's descriptor: closing it earlier would drop DuckDB's lock).

        Raises:
            duckdb.Error: when the checkpoint fails (the file and the descriptor are closed all the same).
        """
        try:
            try:
                self.con.execute("CHECKPOINT")
            finally:
                self.con.close()
        finally:
            self.file_copy.close()

    def __enter__(self) -> ProjectionFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
