"""The memory-stub projection: stub state, matches and messages, one transaction per batch.

A :class:`~projections.projection.Projection`: each batch holds its rows, the stub state it changed
(``stubs``, ``stub_vectors``) and the positions it consumed (``stub_positions``) in one transaction,
so a crash applies a whole batch or nothing; a batch is cut from the runner's state
(:func:`stub_batch`) before the runner goes on, so it can be written while the next one is made.
The runner's state is restored from the tables (:meth:`StubProjection.load_runner`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from projections.duck_file import check_duckdb_file
from projections.projection import MetaMismatch, Projection
from projections.stubs.schema import GLOBAL, STUB_DDL
from streams.model.clock import Clock
from streams.model.deadletter import DeadLetter
from streams.stubs.records import StubRecord
from streams.stubs.replay import StubDelta, StubFold, StubKey, Vector
from streams.stubs.settings import MatchPolicy, MatchSettings

_STUB_COLS = ["channel", "stub_id", "title", "stub_text", "archive_path", "archive_tokens", "model", "dim", "refresh_source", "refresh_spec",
              "created_at_ms", "last_matched_at_ms", "last_refreshed_at_ms", "match_count", "deleted"]


class StubMetaMismatch(MetaMismatch):
    """The projection was built with other match settings (mixing two would make it meaningless)."""


def _scope(channel: str | None) -> str:
    return GLOBAL if channel is None else channel


def _unscope(channel: str) -> str | None:
    return None if channel == GLOBAL else channel


def match_meta(settings: MatchSettings) -> dict[str, str]:
    """The match settings a stub projection file is bound to (``stub_meta``; :meth:`StubProjection.check_meta`)."""
    return {"threshold": repr(settings.threshold), "top_n": str(settings.top_n), "token_budget": str(settings.token_budget)}


@dataclass(frozen=True)
class StubBatch:
    """One batch of the stub projection: rows taken from the runner's state when the batch was cut.

    Attributes:
        stubs: ``stubs`` rows of the touched stubs (their state at the cut, deleted ones included).
        vectors: ``stub_vectors`` rows of the touched live stubs; ``gone``: ``[channel, stub_id]``
            of the touched stubs without a vector (deleted), whose vector rows go.
        matches, messages: ``stub_matches`` and ``stub_messages`` rows (``None``: none).
        dead_letters: rejected items for ``stub_dead_letters`` (idempotent on input/offset/event id).
        applied_event_ids: stub state events applied (the Kafka projector's once-only record).
    """

    stubs: pa.Table
    vectors: pa.Table
    gone: list[list[object]] = field(default_factory=list)
    matches: pa.Table | None = None
    messages: pa.Table | None = None
    dead_letters: list[DeadLetter] = field(default_factory=list)
    applied_event_ids: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Whether the batch writes no row (only its positions move)."""
        return not (self.stubs.num_rows or self.gone or self.matches is not None or self.messages is not None or self.dead_letters
                    or self.applied_event_ids)


def stub_batch(runner: StubFold, delta: StubDelta, clock: Clock, applied_event_ids: Iterable[str] = ()) -> StubBatch:
    """The batch of one drained ``delta``: the touched stubs as ``runner`` holds them now (take it
    right after the drain, before the runner goes on), the delta's matches, messages and rejections
    (dead letters stamped with ``clock()``, read only when there are rejections)."""
    stubs, live, gone = _stub_tables(runner, delta.touched)
    dls: list[DeadLetter] = []
    if delta.rejections:
        now = clock()
        dls = [DeadLetter.of(r.error, r.raw, r.source, 0, r.offset, now, r.event_id) for r in delta.rejections]
    return StubBatch(stubs, live, gone, _matches_table(delta) if delta.matches else None,
                     _messages_table(delta) if delta.messages else None, dls, sorted(set(applied_event_ids)))


class StubProjection(Projection[StubBatch, None]):
    """The memory-stub projection (``stubs``, ``stub_vectors``, ``stub_matches``, ``stub_messages``,
    ``stub_dead_letters``, ``stub_applied_events``; positions in ``stub_positions``, match settings in
    ``stub_meta``: :func:`match_meta`), made as :class:`projections.projection.Projection` is.

    Raises:
        duckdb.IOException: when another process holds the file.
    """

    name = "stubs"
    ddl = STUB_DDL
    positions_table = "stub_positions"
    meta_table = "stub_meta"
    mismatch = StubMetaMismatch

    def applied_event_ids(self) -> set[str]:
        """Ids of the stub state events the Kafka projector (or a serve log) has applied (see :mod:`streams.stubs.output_fold`)."""
        return {r[0] for r in self.con.execute("SELECT event_id FROM stub_applied_events").fetchall()}

    def match_keys(self) -> set[tuple[str, str, str | None, int]]:
        """``(message_id, channel, stub channel, stub id)`` of every stored match (stub channel ``None`` = global)."""
        rows = self.con.execute("SELECT message_id, channel, stub_channel, stub_id FROM stub_matches").fetchall()
        return {(m, c, _unscope(sc), int(i)) for m, c, sc, i in rows}

    def seen_messages(self) -> set[tuple[str, str]]:
        """``(channel, message_id)`` of every stored message."""
        return {(str(c), str(m)) for c, m in self.con.execute("SELECT channel, message_id FROM stub_messages").fetchall()}

    def load_runner(self, policy: MatchPolicy) -> StubFold:
        """A :class:`StubFold` holding the stored stub state and the processed message keys."""
        runner = StubFold(policy, self.seen_messages())
        rows = self.con.execute(f"SELECT {', '.join(_STUB_COLS)} FROM stubs ORDER BY channel, stub_id").fetchall()
        recs = [(_record(r), bool(r[-1])) for r in rows]
        vecs = {(_unscope(c), int(i)): Vector(m, int(d), b) for c, i, m, d, b in
                self.con.execute("SELECT channel, stub_id, model, dim, embedding_b64 FROM stub_vectors").fetchall()}
        runner.restore([r for r, gone in recs if not gone], vecs, [r for r, gone in recs if gone])
        return runner

    def write(self, batch: StubBatch) -> None:
        """Write one batch's rows inside the caller's transaction.

        Raises:
            duckdb.Error: on a database failure.
        """
        con = self.con
        if batch.stubs.num_rows:
            _load(con, "_stubs", batch.stubs, "INSERT OR REPLACE INTO stubs SELECT * FROM _stubs")
        if batch.gone:
            con.executemany("DELETE FROM stub_vectors WHERE channel = ? AND stub_id = ?", batch.gone)
        if batch.vectors.num_rows:
            _load(con, "_vec", batch.vectors, "INSERT OR REPLACE INTO stub_vectors SELECT * FROM _vec")
        if batch.matches is not None:
            _load(con, "_m", batch.matches, """INSERT INTO stub_matches SELECT * FROM _m
                                               QUALIFY row_number() OVER (PARTITION BY message_id, channel, stub_channel, stub_id) = 1
                                               ON CONFLICT DO NOTHING""")
        if batch.messages is not None:
            _load(con, "_msg", batch.messages, """INSERT INTO stub_messages SELECT * FROM _msg
                                                  QUALIFY row_number() OVER (PARTITION BY channel, message_id) = 1 ON CONFLICT DO NOTHING""")
        if batch.dead_letters:
            con.executemany("INSERT INTO stub_dead_letters VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                            [[d.source, d.offset, d.event_id, str(d.reason), d.detail, d.original(), d.time_ms] for d in batch.dead_letters])
        if batch.applied_event_ids:
            con.executemany("INSERT INTO stub_applied_events VALUES (?) ON CONFLICT DO NOTHING", [[e] for e in batch.applied_event_ids])


"""The stub projection's earlier name."""


def _load(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table, sql: str) -> None:
    con.register(name, table)
    try:
        con.execute(sql)
    finally:
        con.unregister(name)


def _record(r: tuple[Any, ...]) -> StubRecord:
    (channel, sid, title, text, path, tokens, model, dim, source, spec, created, matched, refreshed, count, _deleted) = r
    return StubRecord(stub_id=int(sid), channel=_unscope(str(channel)), title=title or "", stub_text=text or "", archive_path=str(path),
                      archive_tokens=int(tokens), model=str(model), dim=int(dim), refresh_source=source, refresh_spec=spec,
                      created_at_ms=int(created), match_count=int(count),
                      last_matched_at_ms=None if matched is None else int(matched),
                      last_refreshed_at_ms=None if refreshed is None else int(refreshed))


def _stub_tables(runner: StubFold, touched: Iterable[StubKey]) -> tuple[pa.Table, pa.Table, list[list[object]]]:
    cols: dict[str, list[object]] = {c: [] for c in _STUB_COLS}
    vec: dict[str, list[object]] = {c: [] for c in ("channel", "stub_id", "model", "dim", "embedding_b64")}
    gone: list[list[object]] = []
    for key in sorted(touched, key=lambda k: (_scope(k[0]), k[1])):
        state = runner.stub_state(key)
        if state is None:
            continue
        r, deleted = state
        for c, v in zip(_STUB_COLS, [_scope(r.channel), r.stub_id, r.title, r.stub_text, r.archive_path, r.archive_tokens, r.model, r.dim,
                                      r.refresh_source, r.refresh_spec, r.created_at_ms, r.last_matched_at_ms, r.last_refreshed_at_ms,
                                      r.match_count, deleted], strict=True):
            cols[c].append(v)
        v_ = runner.vectors.get(key)
        if deleted or v_ is None:
            gone.append([_scope(key[0]), key[1]])
        else:
            for c, x in zip(vec, [_scope(key[0]), key[1], v_.model, v_.dim, v_.embedding_b64], strict=True):
                vec[c].append(x)
    schema = pa.schema([("channel", pa.string()), ("stub_id", pa.int64()), ("title", pa.string()), ("stub_text", pa.string()),
                        ("archive_path", pa.string()), ("archive_tokens", pa.int64()), ("model", pa.string()), ("dim", pa.int32()),
                        ("refresh_source", pa.string()), ("refresh_spec", pa.string()), ("created_at_ms", pa.int64()),
                        ("last_matched_at_ms", pa.int64()), ("last_refreshed_at_ms", pa.int64()), ("match_count", pa.int64()),
                        ("deleted", pa.bool_())])
    vschema = pa.schema([("channel", pa.string()), ("stub_id", pa.int64()), ("model", pa.string()), ("dim", pa.int32()),
                         ("embedding_b64", pa.string())])
    return pa.table(cols, schema=schema), pa.table(vec, schema=vschema), gone


def _matches_table(delta: StubDelta) -> pa.Table:
    ms = delta.matches
    return pa.table({
        "message_id": [m.message_id for m in ms], "channel": [m.channel for m in ms],
        "stub_channel": [_scope(m.stub_channel) for m in ms], "stub_id": pa.array([m.stub_id for m in ms], pa.int64()),
        "similarity": pa.array([m.similarity for m in ms], pa.float64()), "rank": pa.array([m.rank for m in ms], pa.int32()),
        "tokens_injected": pa.array([m.tokens_injected for m in ms], pa.int64()),
        "event_time_ms": pa.array([m.event_time_ms for m in ms], pa.int64()), "event_id": [m.event_id for m in ms],
    })


def _messages_table(delta: StubDelta) -> pa.Table:
    ms = delta.messages
    return pa.table({
        "channel": [m.channel for m in ms], "message_id": [m.message_id for m in ms], "event_id": [m.event_id for m in ms],
        "event_time_ms": pa.array([m.event_time_ms for m in ms], pa.int64()), "origin": [m.origin for m in ms],
        "matched": pa.array([m.matched for m in ms], pa.bool_()), "match_count": pa.array([m.match_count for m in ms], pa.int32()),
        "tokens_injected": pa.array([m.tokens_injected for m in ms], pa.int64()),
        "best_similarity": pa.array([m.best_similarity for m in ms], pa.float64()),
    })


def settings_of(meta: dict[str, str]) -> MatchSettings | None:
    """The match settings of ``stub_meta`` rows (:func:`match_meta`'s), or ``None`` when they are not all there."""
    if not {"threshold", "top_n", "token_budget"} <= meta.keys():
        return None
    return MatchSettings(threshold=float(meta["threshold"]), top_n=int(meta["top_n"]), token_budget=int(meta["token_budget"]))


def stored_settings(db: str | Path) -> MatchSettings | None:
    """The match settings a projection file was built with, or ``None`` (no file, no stub tables, or no run yet).

    Raises:
        duckdb.IOException: when another process holds ``db``.
    """
    if not Path(db).exists():
        return None
    check_duckdb_file(db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = dict(con.execute("SELECT key, value FROM stub_meta").fetchall())
    except duckdb.CatalogException:
        return None
    finally:
        con.close()
    return settings_of(rows)
