"""A run resumed after a crash ends with the dedup state of an uninterrupted run.

The dedup core sweeps closed frames every ``sweep_every`` captures; the embedded runner stores the
count since the last sweep with the state of each batch, so a resumed run sweeps at the same
captures as an uninterrupted one and ``dedup_state`` is the same, not only the answers.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from bench.backlog import BacklogSpec, write_backlog
from hivestream.embedded.frames import EmbeddedRunner, file_id_of, origin_of, run_files
from projections.frames.dedup_state import SINCE_SWEEP_KEY
from streams.frames.capture_import import hook_outcomes
from streams.importers.files import read_lines
from streams.settings import Settings


def _state(db: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        state = con.execute("SELECT dedup_key, frames FROM dedup_state ORDER BY dedup_key").fetchall()
        meta = con.execute("SELECT key, value FROM meta ORDER BY key").fetchall()
        return state, meta
    finally:
        con.close()


def test_a_resumed_run_keeps_the_state_of_an_uninterrupted_one(tmp_path: Path) -> None:
    """12,000 turns (48,000 captures: two sweeps), batches of 3,000; the crash after the batch that
    ends at line 25,000 (a sweep at 20,000 captures behind it, the next ahead)."""
    log = tmp_path / "backlog.jsonl"
    write_backlog(log, BacklogSpec(turns=12_000, days=4))
    settings = Settings(batch_size=3_000)
    full = tmp_path / "full.duckdb"
    report = run_files([log], full, settings=settings)
    assert report.captures > 40_000
    part = tmp_path / "part.duckdb"
    r = EmbeddedRunner(part, settings)
    origin = origin_of(log)
    r.run_outcomes(origin, (o for o in hook_outcomes(read_lines(log), 0, r.options(), file_id_of(origin)) if o[0] < 25_000))
    r._wait()
    r.sink.con.close()  # no checkpoint, as after kill -9
    r._writer.shutdown(wait=True)
    ((stored,),) = duckdb.connect(str(part), read_only=True).execute(
        "SELECT value FROM meta WHERE key = ?", [SINCE_SWEEP_KEY]).fetchall()
    assert 0 < int(stored) < 20_000
    run_files([log], part, settings=settings)
    got, want = _state(part), _state(full)
    assert got == want
    assert 0 < len(want[0]) < report.captures // 10  # swept: the window's keys, not every key
