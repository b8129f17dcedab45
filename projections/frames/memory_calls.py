"""The ``memory_tool_calls`` projection: schema and the writer pass the embedded runner calls.

The table can live in any projection file (the frames file by default). Rows are keyed by the
hook event's id, so applying an event twice changes nothing (``INSERT … ON CONFLICT DO NOTHING``).
The embedded runner feeds every hook event to :meth:`MemoryCallPass.observe` and calls
:meth:`MemoryCallPass.flush` *before* it commits the batch's positions: a crash between the two
re-reads those events on the next run and the re-insert is a no-op, so nothing is lost or doubled.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import duckdb
import pyarrow as pa

from streams.memory_calls import MemoryToolCall, ToolRule, configured_rules, memory_call
from streams.model.events import HookEvent

MEMORY_DDL = [
    """CREATE TABLE IF NOT EXISTS memory_tool_calls (
        event_id VARCHAR PRIMARY KEY,        -- the hook event's id
        tool VARCHAR NOT NULL,               -- tool name as called, e.g. mcp__hive-mind__recall_memory
        system VARCHAR NOT NULL,             -- hive-mind | knowhub | mem0 | letta | mcp-memory | claude-mem | openclaw-memory
        op VARCHAR NOT NULL,                 -- read | write
        agent VARCHAR NOT NULL,              -- OpenClaw agentId, <source>:<agent_id> for a subagent, else the source
        session VARCHAR NOT NULL,
        source VARCHAR NOT NULL,             -- runtime: claude-code | codex | openclaw
        event_time_ms BIGINT NOT NULL,
        results INTEGER,                     -- items the response returned, when its shape shows it
        error VARCHAR,                       -- redacted failure text; NULL = success
        arguments VARCHAR                    -- redacted arguments (JSON), at most 4,000 characters
    )""",
]


_COLUMNS = ("event_id", "tool", "system", "op", "agent", "session", "source", "event_time_ms", "results", "error", "arguments")
_TYPES = (pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.int64(), pa.int32(), pa.string(),
          pa.string())


def ensure_memory_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create ``memory_tool_calls`` when missing (idempotent)."""
    for stmt in MEMORY_DDL:
        con.execute(stmt)


def apply_memory_calls(con: duckdb.DuckDBPyConnection, calls: Iterable[MemoryToolCall]) -> int:
    """Insert ``calls`` (idempotent on event id) in the caller's transaction, or in its own.

    Returns:
        Rows offered (already present ones included).

    Raises:
        duckdb.Error: on a database failure.
    """
    rows = [c.row() for c in calls]
    if rows:  # one Arrow table per batch: DuckDB's executemany costs milliseconds per row
        cols = list(zip(*rows, strict=True))
        batch = pa.table({name: pa.array(list(col), type=t) for name, t, col in zip(_COLUMNS, _TYPES, cols, strict=True)})
        con.register("_memory_calls", batch)
        try:
            con.execute("""INSERT INTO memory_tool_calls SELECT * FROM _memory_calls
                           QUALIFY row_number() OVER (PARTITION BY event_id) = 1 ON CONFLICT DO NOTHING""")
        finally:
            con.unregister("_memory_calls")
    return len(rows)


class MemoryCallPass:
    """Collects the memory tool calls of a stream of hook events and writes them in batches.

    Args:
        con: the open projection connection (the runner's sink connection); the table is created.
        rules: the tool-name classification table (default: :func:`configured_rules`).

    Raises:
        ValueError, OSError: from :func:`configured_rules`.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, rules: Sequence[ToolRule] | None = None) -> None:
        self.con = con
        self.rules = configured_rules() if rules is None else rules
        self.pending: list[MemoryToolCall] = []
        self.written = 0
        ensure_memory_schema(con)

    def observe(self, event: object) -> None:
        """Note ``event`` when it is a :class:`HookEvent` recording a memory tool call (else nothing)."""
        if isinstance(event, HookEvent):
            call = memory_call(event, self.rules)
            if call is not None:
                self.pending.append(call)

    def flush(self) -> None:
        """Write the pending calls in one transaction.

        Raises:
            duckdb.Error: on a database failure (the pending calls are kept for the next flush).
        """
        if not self.pending:
            return
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.written += apply_memory_calls(self.con, self.pending)
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.pending = []
