"""The memory-stub projection: DuckDB sink and the embedded stub runner (log files → matches → DuckDB).

Like :mod:`projections.frames.sink`, each batch is one transaction holding its rows, the stub state it
changed (``stubs``, ``stub_vectors``) and the positions it consumed (``stub_positions``), so a
crash applies a whole batch or nothing, and running a file again applies nothing twice: items
below the stored position are skipped and the runner's state is restored from the tables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from projections.duck_file import check_duckdb_file
from projections.stubs.schema import GLOBAL, STUB_DDL
from streams.model.clock import Clock, wall_clock_ms
from streams.model.deadletter import DeadLetter
from streams.stubs.errors import code_of
from streams.stubs.events import StubDeleted, StubRefreshed, StubUpserted
from streams.stubs.log import LogEntry
from streams.stubs.records import StubRecord
from streams.stubs.replay import StubDelta, StubKey, StubRunner, Vector
from streams.stubs.settings import MatchPolicy, MatchSettings

_STUB_COLS = ["channel", "stub_id", "title", "stub_text", "archive_path", "archive_tokens", "model", "dim", "refresh_source", "refresh_spec",
              "created_at_ms", "last_matched_at_ms", "last_refreshed_at_ms", "match_count", "deleted"]


class StubMetaMismatch(RuntimeError):
    """The projection was built with other match settings (mixing two would make it meaningless)."""


def _scope(channel: str | None) -> str:
    return GLOBAL if channel is None else channel


def _unscope(channel: str) -> str | None:
    return None if channel == GLOBAL else channel


class StubSink:
    """Writer of the stub tables in one DuckDB file (created with :data:`STUB_DDL` when missing).

    Raises:
        duckdb.IOException: when another process holds the file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        check_duckdb_file(self.path)
        self.con = duckdb.connect(self.path)
        for stmt in STUB_DDL:
            self.con.execute(stmt)

    def close(self) -> None:
        """Checkpoint and close the file."""
        self.con.execute("CHECKPOINT")
        self.con.close()

    def __enter__(self) -> StubSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_meta(self, settings: MatchSettings) -> None:
        """Record ``settings`` on first use; afterwards require the same values.

        Raises:
            StubMetaMismatch: when the file was built with other settings.
        """
        want = {"threshold": repr(settings.threshold), "top_n": str(settings.top_n), "token_budget": str(settings.token_budget)}
        have = dict(self.con.execute("SELECT key, value FROM stub_meta").fetchall())
        for k, v in want.items():
            if k in have and have[k] != v:
                raise StubMetaMismatch(f"{self.path} was built with {k}={have[k]}, not {v}: use a new --db file")
        self.con.executemany("INSERT INTO stub_meta VALUES (?, ?) ON CONFLICT DO NOTHING", list(want.items()))

    def position(self, input_name: str, partition: int = 0) -> int:
        """The first offset of ``input_name`` (a file, or a topic with its ``partition``) not yet applied (0 when none)."""
        row = self.con.execute("SELECT next_offset FROM stub_positions WHERE input = ? AND src_partition = ?", [input_name, partition]).fetchone()
        return int(row[0]) if row else 0

    def applied_event_ids(self) -> set[str]:
        """Ids of the stub state events the Kafka projector has applied (see :mod:`streams.stubs.output_fold`)."""
        return {r[0] for r in self.con.execute("SELECT event_id FROM stub_applied_events").fetchall()}

    def match_keys(self) -> set[tuple[str, str, str | None, int]]:
        """``(message_id, channel, stub channel, stub id)`` of every stored match (stub channel ``None`` = global)."""
        rows = self.con.execute("SELECT message_id, channel, stub_channel, stub_id FROM stub_matches").fetchall()
        return {(m, c, _unscope(sc), int(i)) for m, c, sc, i in rows}

    def load_runner(self, policy: MatchPolicy) -> StubRunner:
        """A :class:`StubRunner` holding the stored stub state and the processed message keys."""
        seen = self.con.execute("SELECT channel, message_id FROM stub_messages").fetchall()
        runner = StubRunner(policy, seen)
        rows = self.con.execute(f"SELECT {', '.join(_STUB_COLS)} FROM stubs ORDER BY channel, stub_id").fetchall()
        recs = [(_record(r), bool(r[-1])) for r in rows]
        vecs = {(_unscope(c), int(i)): Vector(m, int(d), b) for c, i, m, d, b in
                self.con.execute("SELECT channel, stub_id, model, dim, embedding_b64 FROM stub_vectors").fetchall()}
        runner.restore([r for r, gone in recs if not gone], vecs, [r for r, gone in recs if gone])
        return runner

    def apply_batch(self, runner: StubRunner, delta: StubDelta, positions: Mapping[str, int] | Mapping[tuple[str, int], int], clock: Clock,
                    applied_event_ids: Iterable[str] = ()) -> None:
        """Write one drained ``delta`` (with ``runner``'s current state of the touched stubs) and ``positions`` in one transaction.

        ``positions`` maps an input (a file: partition 0) or an ``(input, partition)`` pair to its
        next offset; ``applied_event_ids`` are stub state events applied in this batch (Kafka path).

        Raises:
            duckdb.Error: on a database failure; the transaction is rolled back.
        """
        stubs, live, gone = _stub_tables(runner, delta.touched)
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            if stubs.num_rows:
                con.register("_stubs", stubs)
                con.execute("INSERT OR REPLACE INTO stubs SELECT * FROM _stubs")
                con.unregister("_stubs")
            if gone:
                con.executemany("DELETE FROM stub_vectors WHERE channel = ? AND stub_id = ?", gone)
            if live.num_rows:
                con.register("_vec", live)
                con.execute("INSERT OR REPLACE INTO stub_vectors SELECT * FROM _vec")
                con.unregister("_vec")
            if delta.matches:
                con.register("_m", _matches_table(delta))
                con.execute("""INSERT INTO stub_matches SELECT * FROM _m
                               QUALIFY row_number() OVER (PARTITION BY message_id, channel, stub_channel, stub_id) = 1
                               ON CONFLICT DO NOTHING""")
                con.unregister("_m")
            if delta.messages:
                con.register("_msg", _messages_table(delta))
                con.execute("""INSERT INTO stub_messages SELECT * FROM _msg
                               QUALIFY row_number() OVER (PARTITION BY channel, message_id) = 1 ON CONFLICT DO NOTHING""")
                con.unregister("_msg")
            if delta.rejections:
                now = clock()
                dls = [DeadLetter.of(r.error, r.raw, r.source, 0, r.offset, now, r.event_id) for r in delta.rejections]
                con.executemany("INSERT INTO stub_dead_letters VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                                [[d.source, d.offset, d.event_id, str(d.reason), d.detail, d.original(), d.time_ms] for d in dls])
            applied = sorted(set(applied_event_ids))
            if applied:
                con.executemany("INSERT INTO stub_applied_events VALUES (?) ON CONFLICT DO NOTHING", [[e] for e in applied])
            if positions:
                rows = [[*(k if isinstance(k, tuple) else (k, 0)), o] for k, o in positions.items()]
                con.executemany("""INSERT INTO stub_positions VALUES (?, ?, ?) ON CONFLICT DO UPDATE
                                   SET next_offset = greatest(next_offset, excluded.next_offset)""", rows)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise


def _record(r: tuple[Any, ...]) -> StubRecord:
    (channel, sid, title, text, path, tokens, model, dim, source, spec, created, matched, refreshed, count, _deleted) = r
    return StubRecord(stub_id=int(sid), channel=_unscope(str(channel)), title=title or "", stub_text=text or "", archive_path=str(path),
                      archive_tokens=int(tokens), model=str(model), dim=int(dim), refresh_source=source, refresh_spec=spec,
                      created_at_ms=int(created), match_count=int(count),
                      last_matched_at_ms=None if matched is None else int(matched),
                      last_refreshed_at_ms=None if refreshed is None else int(refreshed))


def _stub_tables(runner: StubRunner, touched: Iterable[StubKey]) -> tuple[pa.Table, pa.Table, list[list[object]]]:
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
    if not {"threshold", "top_n", "token_budget"} <= rows.keys():
        return None
    return MatchSettings(threshold=float(rows["threshold"]), top_n=int(rows["top_n"]), token_budget=int(rows["token_budget"]))


@dataclass
class StubRunReport:
    """What a stub run read and wrote.

    Attributes:
        db: the DuckDB file.
        inputs: input names, in order.
        items: log items applied (not counting skipped ones); ``skipped``: items below the stored position.
        stub_events, messages, subagent_messages, matched_messages, matches, tokens: counts
            over the applied items (``tokens`` in tokens).
        repeated: messages already processed (same channel and message id).
        logged: runtime-recorded matches read from the logs (kept for what-if, not applied).
        dead_letters: rejection code (or reason) → count.
    """

    db: str
    inputs: list[str] = field(default_factory=list)
    items: int = 0
    skipped: int = 0
    stub_events: int = 0
    messages: int = 0
    subagent_messages: int = 0
    matched_messages: int = 0
    matches: int = 0
    tokens: int = 0
    repeated: int = 0
    logged: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)

    def add(self, d: StubDelta) -> None:
        """Count one drained delta."""
        self.messages += sum(1 for m in d.messages if m.origin == "main")
        self.subagent_messages += sum(1 for m in d.messages if m.origin != "main")
        self.matched_messages += sum(1 for m in d.messages if m.matched)
        self.matches += len(d.matches)
        self.tokens += sum(m.tokens_injected for m in d.matches)
        self.repeated += d.repeated
        self.logged += len(d.logged)
        for r in d.rejections:
            self.dead_letters[code_of(r.error) or str(r.error.reason)] += 1


def run_stub_logs(
    logs: Iterable[Iterable[LogEntry]],
    db: str | Path,
    policy: MatchPolicy | None = None,
    *,
    batch_size: int = 1000,
    clock: Clock = wall_clock_ms,
    bind_settings: bool = True,
) -> StubRunReport:
    """Run stub logs in order into ``db`` (one transaction per ``batch_size`` items, with positions).

    Each log is an iterable of :class:`LogEntry` (e.g. :func:`streams.stubs.log.read_log`); the
    position of each entry's ``source`` is stored with the batch that applied it. With
    ``bind_settings`` the file records ``policy.defaults`` on first use and refuses other
    settings later (pass False for logs without messages, e.g. a ``stubs.db`` import).

    Raises:
        StubMetaMismatch: when ``db`` was built with other match settings.
        duckdb.IOException: when another process holds ``db``.
        OSError: when a log cannot be read.
    """
    policy = policy or MatchPolicy()
    report = StubRunReport(db=str(db))
    with StubSink(db) as sink:
        if bind_settings:
            sink.check_meta(policy.defaults)
        runner = sink.load_runner(policy)
        pending: dict[str, int] = {}
        n = 0
        for log in logs:
            start: dict[str, int] = {}
            for e in log:
                if e.source not in start:
                    start[e.source] = sink.position(e.source)
                    if e.source not in report.inputs:
                        report.inputs.append(e.source)
                if e.offset < start[e.source]:
                    report.skipped += 1
                    continue
                runner.feed(e)
                report.items += 1
                report.stub_events += isinstance(e.item, StubUpserted | StubRefreshed | StubDeleted)
                pending[e.source] = e.offset + 1
                n += 1
                if n >= batch_size:
                    _flush(sink, runner, pending, clock, report)
                    pending, n = {}, 0
        _flush(sink, runner, pending, clock, report)
    return report


def _flush(sink: StubSink, runner: StubRunner, pending: dict[str, int], clock: Clock, report: StubRunReport) -> None:
    delta = runner.drain()
    report.add(delta)
    if pending or delta.touched or delta.rejections:
        sink.apply_batch(runner, delta, pending, clock)
