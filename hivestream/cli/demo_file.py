"""The file ``hivestream demo`` writes: replaced only when an earlier demo wrote it.

``demo --db FILE`` used to delete ``FILE`` whatever it was, so ``--db memory.duckdb`` threw away a
projection. The demo now records itself in the file's ``meta`` table (:data:`DEMO_META`) and
replaces a file only when that record is there (or the file is the default demo file an earlier
version wrote, :data:`DEFAULT_DEMO_DB`).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from projections.duck_file import check_duckdb_file

DEFAULT_DEMO_DB = Path("hivestream-demo.duckdb")
DEMO_META = ("written_by", "hivestream demo")
"""The ``meta`` row (key, value) a demo file carries."""


def refusal(db: Path) -> str | None:
    """Why ``demo`` must not replace ``db``, as one line, or ``None`` when it may (no file yet, a file
    an earlier demo wrote, or the default demo file name). Reads ``db`` read-only; raises nothing."""
    if not db.exists() and not db.is_symlink():
        return None
    if db.is_dir():
        return f"{db} is a directory: choose a file for --db"
    if db.name == DEFAULT_DEMO_DB.name:
        return None
    try:
        check_duckdb_file(db)
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error:
        return f"{db} exists and is not a DuckDB file the demo wrote (or another process holds it): choose another --db or remove it"
    try:
        row = con.execute("SELECT value FROM meta WHERE key = ?", [DEMO_META[0]]).fetchone()
    except duckdb.Error:
        row = None
    finally:
        con.close()
    if row is None or row[0] != DEMO_META[1]:
        return f"{db} exists and was not written by hivestream demo: choose another --db or remove it"
    return None


def mark(db: Path) -> None:
    """Record in ``db``'s ``meta`` table that the demo wrote it (after the run made the table).

    Raises:
        duckdb.Error: when the file cannot be written.
    """
    con = duckdb.connect(str(db))
    try:
        con.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT DO UPDATE SET value = excluded.value", list(DEMO_META))
    finally:
        con.close()
