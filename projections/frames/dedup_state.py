"""The dedup core's state beside the projection: table ``dedup_state``, one row per key (embedded runner).

The embedded runner stores the entries its batch changed in the batch's transaction (the role a
faust table's changelog topic plays on Kafka, :mod:`streams.frames.changelog`), so a restart
resumes with the state that matches the committed rows and positions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import duckdb
import orjson
import pyarrow as pa


def state_json(value: Any) -> str:
    """The ``dedup_state.frames`` text of one key's dedup entry (compact JSON; read back with ``json.loads``).

    orjson writes it (a fifth of ``json.dumps``'s time: one entry per key a batch changed);
    a value orjson refuses (an int beyond 64 bits) is written by ``json.dumps`` instead, so no
    entry fails a batch.

    Raises:
        TypeError, ValueError: for a value neither can write (not JSON data).
    """
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def load_state(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Every stored entry: dedup key → its :class:`streams.frames.dedup.DedupFold` entry (parsed JSON).

    Raises:
        duckdb.Error: on a database failure; json.JSONDecodeError: for a row that is not JSON.
    """
    return {k: json.loads(v) for k, v in con.execute("SELECT dedup_key, frames FROM dedup_state").fetchall()}


SINCE_SWEEP_KEY = "dedup_since_sweep"  # the ``meta`` row of the dedup core's sweep counter


def load_since_sweep(con: duckdb.DuckDBPyConnection) -> int:
    """The dedup core's captures since its last sweep as the last committed batch left it (0 when
    never stored: a new file, or one written before the counter was kept).

    Raises:
        duckdb.Error: on a database failure.
    """
    row = con.execute("SELECT value FROM meta WHERE key = ?", [SINCE_SWEEP_KEY]).fetchone()
    try:
        return max(0, int(row[0])) if row and row[0] is not None else 0
    except ValueError:  # not a number: counting starts again at 0 (it changes only when closed frames are dropped, no answer)
        return 0


def write_since_sweep(con: duckdb.DuckDBPyConnection, since_sweep: int) -> None:
    """Store the dedup core's sweep counter (:attr:`streams.frames.dedup.DedupFold.since_sweep`)
    inside the caller's open transaction, with the state rows of the same batch.

    Raises:
        duckdb.Error: on a database failure (the caller rolls back).
    """
    con.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT DO UPDATE SET value = excluded.value",
                [SINCE_SWEEP_KEY, str(int(since_sweep))])


def write_state(con: duckdb.DuckDBPyConnection, upserts: Mapping[str, Any], deletes: Iterable[str]) -> None:
    """Replace the rows of the keys set (``upserts``: key → entry) and delete those of ``deletes``,
    inside the caller's open transaction.

    The table has no index (files created by older versions have a primary key, which this statement
    pair keeps valid): deleting the keys' rows and appending cost 0.16 µs per capture of a 200k run
    where ``INSERT OR REPLACE`` through the index cost 0.6, and the commit 0.35 µs less.
    The sweeps keep the table at the keys of the window, so the delete's scan stays small; with an
    unbounded window it grows with the keys.

    Raises:
        duckdb.Error: on a database failure (the caller rolls back); TypeError, ValueError: for an
            entry that is not JSON data (:func:`state_json`).
    """
    keys = [*upserts, *deletes]
    if not keys:
        return
    con.register("_keys", pa.table({"k": pa.array(keys, type=pa.string())}))
    con.execute("DELETE FROM dedup_state WHERE dedup_key IN (SELECT k FROM _keys)")
    con.unregister("_keys")  # after a failure the batch's own error goes on (an aborted transaction refuses this)
    if upserts:
        con.register("_state", pa.table({"k": pa.array(list(upserts), type=pa.string()),
                                         "v": pa.array([state_json(v) for v in upserts.values()], type=pa.string())}))
        con.execute("INSERT INTO dedup_state SELECT k, v FROM _state")
        con.unregister("_state")
