"""Rich output helpers shared by the CLI modules."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb
from rich.console import Console
from rich.table import Table
from rich.text import Text

from projections.named_query import NamedQuery


def table(title: str, cols: list[str], rows: list[tuple[object, ...]]) -> Table:
    """A rich table of ``rows``; cells are plain text (``[hm …]`` is never read as markup)."""
    t = Table(title=title, title_justify="left")
    for c in cols:
        t.add_column(c)
    for r in rows:
        t.add_row(*(Text("" if v is None else str(v)) for v in r))
    return t


def print_named_query(kind: str, set_name: str, queries: dict[str, NamedQuery], name: str | None, db: Path, as_json: bool,
                      out: Console, err: Console) -> str | None:
    """List ``queries`` (``name`` None) or run one on ``db`` and print it as a table or JSON rows;
    the serve holding ``db`` answers it when one does (``set_name``: its name for ``queries``,
    :data:`hivestream.serve.read_api.QUERY_SETS`), else the file or its snapshot
    (:func:`hivestream.serve.read_client.read_named`).

    Returns:
        ``None`` on success, else the one-line error the caller prints before exiting 2 (an
        unknown name, a missing file, a file without the ``kind`` tables).
    """
    from hivestream.serve.read_client import ServedQueryFailed, read_named

    if name is None:
        out.print(table(f"{kind} queries", ["name", "answers"], [(q.name, q.description) for q in queries.values()]))
        return None
    if name not in queries:
        return f"unknown {kind} query {name!r}; known: {', '.join(sorted(queries))}"
    try:
        cols, rows, freshness = read_named(db, set_name, queries, name)
    except FileNotFoundError as e:
        return str(e)
    except ServedQueryFailed as e:
        return f"{db} holds no {kind} projection ({e})"
    except duckdb.Error as e:
        return f"{db} holds no {kind} projection ({type(e).__name__}: {str(e).splitlines()[0]})"
    err.print(freshness, soft_wrap=True)
    if as_json:
        json.dump([dict(zip(cols, r, strict=True)) for r in rows], sys.stdout, default=str, indent=1)
        sys.stdout.write("\n")
    else:
        out.print(table(f"{name}: {queries[name].description}", cols, rows))
    return None
