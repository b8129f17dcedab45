"""A named analytics query over a projection file (``hivestream query NAME``) and how it is run;
each pipeline's ``queries`` module holds its own (frames, experiences, stubs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb


@dataclass(frozen=True)
class NamedQuery:
    """A named SQL query and what it answers.

    ``compute``, when set, answers instead of ``sql`` (a computation SQL cannot express, e.g. the
    window what-if): it takes the connection and returns (column names, rows).
    """

    name: str
    description: str
    sql: str
    compute: Callable[[duckdb.DuckDBPyConnection], tuple[list[str], list[tuple[object, ...]]]] | None = None


def run_query(
    con: duckdb.DuckDBPyConnection, name: str, queries: dict[str, NamedQuery]
) -> tuple[list[str], list[tuple[object, ...]]]:
    """Run the named query of ``queries`` (a pipeline's ``*_QUERIES``, e.g. :data:`projections.frames.queries.QUERIES`) on ``con``.

    Returns:
        (column names, rows).

    Raises:
        KeyError: for an unknown name (the message lists the known ones).
        duckdb.Error: when the file lacks the tables the query reads.
    """
    if name not in queries:
        raise KeyError(f"unknown query {name!r}; known: {', '.join(sorted(queries))}")
    compute = queries[name].compute
    if compute is not None:
        return compute(con)
    cur = con.execute(queries[name].sql)
    cols = [d[0] for d in cur.description or []]
    return cols, cur.fetchall()
