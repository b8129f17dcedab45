"""The reader's side of serve's read routes (:mod:`hivestream.serve.read_api`): ``hivestream query``,
``kb query``, ``stubs query`` and ``report`` with ``--db FILE`` ask the serve that holds ``FILE``
(its note ``<db>.serve``, :mod:`hivestream.serve.read_marker`), so the answer is the file as of
serve's last committed batch, whatever the file's size; without a running serve they read the file
or its snapshot (:func:`projections.reading.open_for_reading`), and say why in the freshness line.

Only ``http.client`` to 127.0.0.1 (the token never leaves the machine); every failure is one line
without the token.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hivestream.serve.read_marker import ReadMarker, marker_path, process_alive, read_marker
from projections.named_query import NamedQuery, run_query
from projections.reading import open_for_reading

TIMEOUT_S = 300.0
"""How long a reader waits for serve's answer (seconds; a report of a large file takes a while)."""


class ServeUnreachable(Exception):
    """A note ``<db>.serve`` exists but its serve gave no answer to use (gone, refused the token,
    busy reopening the file): the caller reads the file or its snapshot instead. One line."""


class ServedQueryFailed(Exception):
    """Serve ran the query and it failed (the file lacks its tables): ``"Type: first line"`` of DuckDB's error."""


@dataclass(frozen=True)
class Served:
    """An answer of serve: its body and the freshness line to print."""

    body: bytes
    freshness: str


def _freshness(db: Path, state: dict[str, Any]) -> str:
    return (f"answered by hivestream serve (pid {state.get('pid')}) from {db} itself: {state.get('applied', 0):,} of the "
            f"{state.get('log_records', 0):,} records of its log applied")


def _request(m: ReadMarker, method: str, path: str, body: bytes | None, timeout_s: float) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", m.port, timeout=timeout_s)
    try:
        headers = {"Authorization": f"Bearer {m.token}", "Content-Type": "application/json"}
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def ask(db: Path, method: str, path: str, body: bytes | None = None, timeout_s: float = TIMEOUT_S) -> tuple[int, bytes] | None:
    """``(status, body)`` of serve's answer to ``method path`` for ``db``; ``None`` when no note names a serve.

    Raises:
        ServeUnreachable: the serve named is gone or gave no answer (why, in one line).
    """
    m = read_marker(db)
    if m is None:
        return None
    where = f"the hivestream serve (pid {m.pid}) named in {marker_path(db)}"
    if not process_alive(m.pid):
        raise ServeUnreachable(f"{where} is gone")
    try:
        status, answer = _request(m, method, path, body, timeout_s)
    except (OSError, http.client.HTTPException, ValueError) as e:  # ValueError: a request http.client refuses to send
        raise ServeUnreachable(f"{where} did not answer ({type(e).__name__})") from None
    if status == 401:
        raise ServeUnreachable(f"{where} refused its read token (HTTP 401: the note is not that serve's)")
    if status == 503:
        raise ServeUnreachable(f"{where} cannot read the file right now (HTTP 503)")
    return status, answer


def _detail(answer: bytes) -> str:
    try:
        obj = json.loads(answer)
        return str(obj.get("detail") or obj.get("error") or "")[:500] if isinstance(obj, dict) else ""
    except ValueError:
        return ""


def served_query(db: Path, set_name: str, name: str) -> tuple[list[str], list[tuple[Any, ...]], str] | None:
    """``(columns, rows, freshness)`` of the named query of ``set_name`` answered by serve; ``None`` without a note.

    Raises:
        ServeUnreachable: see :func:`ask`, also for an answer that is not one.
        ServedQueryFailed: the query failed on the file.
    """
    got = ask(db, "POST", "/v1/query", json.dumps({"set": set_name, "name": name}).encode())
    if got is None:
        return None
    status, answer = got
    if status in (422, 500):
        raise ServedQueryFailed(_detail(answer) or f"HTTP {status}")
    try:
        if status != 200:
            raise ValueError(f"HTTP {status}")
        obj = json.loads(answer)
        cols, rows = [str(c) for c in obj["columns"]], [tuple(r) for r in obj["rows"]]
    except (ValueError, KeyError, TypeError) as e:
        raise ServeUnreachable(f"the hivestream serve named in {marker_path(db)} gave no answer to use ({e}: {_detail(answer)})") from None
    return cols, rows, _freshness(db, obj)


def read_named(db: Path, set_name: str, queries: dict[str, NamedQuery], name: str) -> tuple[list[str], list[tuple[Any, ...]], str]:
    """``(columns, rows, freshness)`` of the named query: from the serve holding ``db`` when one
    does, else from the file or its snapshot (the freshness line then says why serve did not answer).

    Raises:
        FileNotFoundError: neither serve, the file nor a snapshot can answer (see :func:`open_for_reading`).
        ServedQueryFailed, duckdb.Error: the query failed (the file lacks the tables it reads).
        KeyError: ``name`` is not one of ``queries``.
    """
    note = ""
    try:
        got = served_query(db, set_name, name)
        if got is not None:
            return got
    except ServeUnreachable as e:
        note = f"{e}; "
    con, freshness = open_for_reading(db)
    try:
        cols, rows = run_query(con, name, queries)
    finally:
        con.close()
    return cols, rows, note + freshness


def served_report(db: Path) -> Served | None:
    """The HTML report of ``db`` rendered by the serve holding it; ``None`` without a note.

    Raises:
        ServeUnreachable: see :func:`ask`.
        ServedQueryFailed: the report failed on the file.
    """
    got = ask(db, "GET", "/v1/report")
    if got is None:
        return None
    status, answer = got
    if status in (422, 500):
        raise ServedQueryFailed(_detail(answer) or f"HTTP {status}")
    if status != 200:
        raise ServeUnreachable(f"the hivestream serve named in {marker_path(db)} gave no report (HTTP {status})")
    return Served(answer, f"answered by the hivestream serve named in {marker_path(db)}")

