"""The ``memory_tool_calls`` projection: its schema and its writer.

The table lives in the frames file. Rows are keyed by the hook event's id, so applying an event
twice changes nothing (``INSERT … ON CONFLICT DO NOTHING``); the embedded runner and the frames
projector write a batch's calls in the transaction that stores its positions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import duckdb
import pyarrow as pa

from projections.frames.schema import POSITIONS_DDL
from projections.projection import Projection
from streams.memory_calls.tool_calls import MemoryToolCall

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


class MemoryCallProjection(Projection[Sequence[MemoryToolCall], int]):
    """The ``memory_tool_calls`` projection (positions in the frames file's ``positions`` table).

    The embedded runner and the frames projector write its rows in the frames projection's
    transactions (:class:`projections.frames.sink.FramesProjection` holds one on its connection),
    with the positions of the inputs both were read from; made alone, it applies batches of calls
    like every :class:`~projections.projection.Projection`.
    """

    name = "memory-calls"
    ddl = (*MEMORY_DDL, POSITIONS_DDL)
    positions_table = "positions"

    def write(self, batch: Sequence[MemoryToolCall]) -> int:
        """Insert the calls (idempotent on event id) in the caller's transaction; returns the rows offered.

        Raises:
            duckdb.Error: on a database failure.
        """
        return apply_memory_calls(self.con, batch)
