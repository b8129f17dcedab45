"""Replacing a projection file: refused while a writer (a projector) holds it, then an atomic rename
with the old file's WAL, snapshot and heartbeat removed (``hivestream replay``)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from projections.reading import heartbeat_path, snapshot_path


class HeldByWriter(Exception):
    """A running writer holds the file; one line."""


def ensure_not_held(db: Path) -> None:
    """Return when no writer holds ``db`` (or it does not exist).

    Raises:
        HeldByWriter: a running writer (a projector) holds it: a replay must not swap a file under it.
    """
    if not db.exists():
        return
    try:
        duckdb.connect(str(db)).close()
    except duckdb.IOException as e:
        raise HeldByWriter(f"{db} is held by a running writer (stop the projector first): {e}") from e


def swap_in(new: Path, db: Path) -> None:
    """Atomically replace ``db`` by ``new``; drop the old file's WAL, stale snapshot and heartbeat.

    Raises:
        HeldByWriter: as :func:`ensure_not_held`.
        OSError: the rename failed (``db`` is unchanged).
    """
    ensure_not_held(db)
    Path(f"{db}.wal").unlink(missing_ok=True)
    snapshot_path(db).unlink(missing_ok=True)
    heartbeat_path(db).unlink(missing_ok=True)
    new.replace(db)
