"""Where a stub event made on the command line goes, and the stubs a command reads (``stubs archive|refresh``).

When a ``hivestream serve`` holds ``<db>``, the command line sends the events through it
(:mod:`hivestream.cli.stubs_lifecycle`). Otherwise they are appended to the projection file's own stub event log
``<db>.stub-events.jsonl`` (one JSON line, fsynced; a torn last line left by a crash stays a line of
its own and is dead-lettered) and applied to ``<db>`` by the stub runner from that log, exactly as
``hivestream stubs run <db>.stub-events.jsonl --db <db>`` applies it (positions kept, so nothing
applies twice); when another process holds the file the events stay durable in the log and the
answer says how to apply them. The stubs are read from the file, or from serve's published
snapshot while serve holds it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from projections.stubs.schema import GLOBAL
from streams.stubs.events import RefreshSource
from streams.stubs.log import StubEventT, read_log


class StubEventsError(Exception):
    """The stubs could not be read or the events not recorded; one line, naming what was written."""


@dataclass(frozen=True)
class StubRow:
    """A stub as the projection holds it (``channel`` ``None`` = global; times in epoch ms; the vector only when asked for)."""

    channel: str | None
    stub_id: int
    title: str
    stub_text: str
    archive_path: str
    model: str
    dim: int
    refresh_source: RefreshSource
    refresh_spec: str | None
    created_at_ms: int
    last_refreshed_at_ms: int | None
    deleted: bool
    embedding_b64: str = ""


Emit = Callable[[Path, Sequence[StubEventT]], str]
"""Where a command's stub events go: ``(db, events) -> where they went`` (one phrase); raises :class:`StubEventsError`."""


def event_log(db: Path) -> Path:
    """The stub event log beside ``db``: ``<db>.stub-events.jsonl``."""
    return db.with_name(db.name + ".stub-events.jsonl")


def stub_rows(db: Path, *, with_vectors: bool = False) -> list[StubRow]:
    """Every stub of ``db`` (deleted ones too), by channel and id; ``[]`` when the file or its stub tables do not exist.

    Raises:
        StubEventsError: the file cannot be opened (held by another process, not a DuckDB file).
    """
    if not db.exists():
        return []
    from projections.reading import open_for_reading

    try:
        con, _fresh = open_for_reading(db)
    except FileNotFoundError as e:
        raise StubEventsError(f"cannot read the stubs of {db}: {e}") from None
    except duckdb.Error as e:
        raise StubEventsError(f"cannot open {db}: {str(e).splitlines()[0]}") from None
    try:
        vec = "v.embedding_b64" if with_vectors else "''"
        rows = con.execute(f"""SELECT s.channel, s.stub_id, s.title, s.stub_text, s.archive_path, s.model, s.dim, s.refresh_source,
                                      s.refresh_spec, s.created_at_ms, s.last_refreshed_at_ms, s.deleted, coalesce({vec}, '')
                               FROM stubs s LEFT JOIN stub_vectors v USING (channel, stub_id) ORDER BY s.channel, s.stub_id""").fetchall()
    except duckdb.CatalogException:
        return []
    except duckdb.Error as e:
        raise StubEventsError(f"cannot read the stubs of {db}: {str(e).splitlines()[0]}") from None
    finally:
        con.close()
    return [StubRow(None if c == GLOBAL else c, int(i), t or "", st or "", p, m, int(d), rs, spec, int(cr), None if lr is None else int(lr), bool(dl), b)
            for c, i, t, st, p, m, d, rs, spec, cr, lr, dl, b in rows]


def _append(log: Path, lines: Sequence[bytes]) -> None:
    with log.open("ab") as fh:
        if fh.tell():
            with log.open("rb") as rd:
                rd.seek(-1, os.SEEK_END)
                if rd.read(1) != b"\n":
                    fh.write(b"\n")  # a torn last line stays a line of its own
        fh.write(b"".join(line + b"\n" for line in lines))
        fh.flush()
        os.fsync(fh.fileno())


def emit_stub_events(db: Path, events: Sequence[StubEventT]) -> str:
    """Append ``events`` to ``db``'s stub event log and apply the log to ``db``; returns where they went (one phrase).
    (The command line sends them through the serve holding ``db`` instead, when there is one: :mod:`hivestream.cli.stubs_lifecycle`.)

    Raises:
        StubEventsError: the log cannot be written (nothing was recorded).
    """
    from hivestream.embedded.stubs import run_stub_logs

    log = event_log(db)
    try:
        _append(log, [ev.model_dump_json().encode() for ev in events])
    except OSError as e:
        raise StubEventsError(f"cannot append to {log}: {e.strerror or e}; nothing was recorded") from None
    try:
        report = run_stub_logs([read_log(log)], db, bind_settings=False)
    except (duckdb.Error, OSError) as e:
        return (f"{log} (durable; not applied to {db}: {str(e).splitlines()[0]}; "
                f"`hivestream stubs run {log} --db {db}` applies it)")
    if report.dead_letters:
        return f"{log}, applied to {db} with {sum(report.dead_letters.values())} refused ({', '.join(report.dead_letters)}; see stub_dead_letters)"
    return f"{log}, applied to {db}"
