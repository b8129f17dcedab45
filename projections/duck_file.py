"""A guard before a writer opens a projection file: is it a DuckDB file (or none yet)?

DuckDB opens other databases it recognises through an extension: given a SQLite file it loads
(or, with network access, downloads) ``sqlite_scanner`` and attaches it, and the writer would
create hivestream's tables inside the user's SQLite database. A DuckDB file
carries the magic bytes ``DUCK`` at offset 8 of its main header (DuckDB's storage format,
``MainHeader::MAGIC_BYTES``); a file that has 12 bytes or more and not those is refused before
DuckDB sees it. Missing, empty and shorter files are left to DuckDB (it creates, or refuses, them).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

MAGIC_OFFSET, MAGIC = 8, b"DUCK"


def check_duckdb_file(path: str | Path) -> None:
    """Refuse ``path`` when it exists, is a regular file of 12 bytes or more, and is not a DuckDB file.

    Raises:
        duckdb.IOException: ``"not a DuckDB database file (it is ...): ..."`` (one line; the CLI
            prints it after the path, as it prints DuckDB's own refusals). An unreadable file is left to DuckDB.
    """
    p = Path(path)
    try:
        if not p.is_file():
            return
        with p.open("rb") as f:
            head = f.read(16)
    except OSError:
        return  # DuckDB says why it cannot open it
    if len(head) >= MAGIC_OFFSET + len(MAGIC) and head[MAGIC_OFFSET:MAGIC_OFFSET + len(MAGIC)] != MAGIC:
        kind = "a SQLite database" if head.startswith(b"SQLite format 3") else "another kind of file"
        raise duckdb.IOException(f"not a DuckDB database file (it is {kind}): choose another --db")


def held_by_another(e: BaseException) -> bool:
    """Whether DuckDB refused to open a file because another process holds its lock (``IO Error:
    Could not set lock on file "...": Conflicting lock is held in ...``), and not for any other
    reason (a corrupt file: "... in block at location ...", a directory, a file of another kind)."""
    return isinstance(e, duckdb.IOException) and "Could not set lock on file" in str(e)


def first_line(e: BaseException) -> str:
    """DuckDB's message of ``e`` cut to its first line (DuckDB goes on with hints, a caret, a list of
    suggestions), or the exception's type name when it has none."""
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__
