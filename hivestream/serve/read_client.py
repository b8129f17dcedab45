"""The reader's side of serve's read routes (:mod:`hivestream.serve.read_api`): ``hivestream query``,
``kb query``, ``stubs query`` and ``report`` with ``--db FILE`` ask the serve that holds ``FILE``
(its note ``<db>.serve``, :mod:`hivestream.serve.read_marker`), so the answer is the file as of
serve's last committed batch, whatever the file's size; without a running serve they read the file
or its snapshot (:func:`projections.reading.open_for_reading`), and say why in the freshness line.

Only ``http.client`` to 127.0.0.1. The note may outlive its serve (kill -9, a reboot, its process
id reused) and another local process may then hold its port, so the token is never sent: each
request proves it with a MAC over a fresh nonce, and an answer is used only when it carries serve's
proof over that nonce and the answer (:mod:`hivestream.serve.read_proof`). While waiting for an
answer the reader checks every ``ALIVE_EVERY_S`` that serve still answers ``GET /v1/alive``
(itself proven), so a stopped serve (SIGSTOP, Ctrl-Z) or a hung one is given up within seconds,
not after ``TIMEOUT_S``; closing the connection then cancels the read on serve's side. Every
failure is one line without the token.
"""

from __future__ import annotations

import http.client
import json
import select
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hivestream.serve.read_marker import ReadMarker, marker_path, process_alive, read_marker
from hivestream.serve.read_proof import PROOF_HEADER, answer_proven, authorization, new_nonce
from projections.named_query import NamedQuery, run_query
from projections.reading import open_for_reading

TIMEOUT_S = 300.0
"""How long a reader waits for serve's answer while serve is alive (seconds; a report of a large file takes a while)."""
CONNECT_TIMEOUT_S = 5.0
"""How long a reader waits to connect and send its request (seconds)."""
ALIVE_EVERY_S = 2.0
"""While no answer has come, how often the reader checks that serve is alive (seconds)."""
ALIVE_TIMEOUT_S = 5.0
"""How long serve has to answer that check (seconds): a stopped serve is given up after about
``ALIVE_EVERY_S + ALIVE_TIMEOUT_S``."""
BODY_TIMEOUT_S = 30.0
"""Longest pause while an answer's body arrives (seconds; serve writes it at once)."""


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


class _Unproven(Exception):
    """The answer lacks serve's proof: whoever answered does not hold the note's token."""


class _NotAlive(Exception):
    """Serve did not answer the liveness check in time."""


def _exchange(m: ReadMarker, method: str, path: str, body: bytes | None, timeout_s: float, check_alive: bool) -> tuple[int, bytes]:
    """Send one request proving the token and return its proven ``(status, body)``.

    Raises:
        _Unproven: the answer lacks serve's proof; _NotAlive: the liveness check failed;
        TimeoutError: no answer within ``timeout_s``; OSError, http.client.HTTPException,
        ValueError: no answer at all.
    """
    nonce = new_nonce()
    headers = {**authorization(m.token, nonce, method, path, body or b""), "Content-Type": "application/json"}
    deadline = time.monotonic() + timeout_s
    conn = http.client.HTTPConnection("127.0.0.1", m.port, timeout=min(CONNECT_TIMEOUT_S, timeout_s))
    try:
        conn.request(method, path, body=body, headers=headers)
        while True:  # until the answer's first byte: checking every ALIVE_EVERY_S that serve is alive
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer within {timeout_s:g} s")
            ready, _, _ = select.select([conn.sock], [], [], min(ALIVE_EVERY_S, left) if check_alive else left)
            if ready:
                break
            if check_alive:
                _check_alive(m)
        conn.sock.settimeout(BODY_TIMEOUT_S)
        resp = conn.getresponse()
        status, answer, proof = resp.status, resp.read(), resp.getheader(PROOF_HEADER)
    finally:
        conn.close()  # also when given up: serve then cancels the read
    if not answer_proven(m.token, nonce, status, answer, proof):
        raise _Unproven
    return status, answer


def _check_alive(m: ReadMarker) -> None:
    try:
        status, _ = _exchange(m, "GET", "/v1/alive", None, ALIVE_TIMEOUT_S, check_alive=False)
    except (OSError, http.client.HTTPException) as e:
        raise _NotAlive from e
    if status != 200:
        raise _NotAlive


def ask(db: Path, method: str, path: str, body: bytes | None = None, timeout_s: float = TIMEOUT_S) -> tuple[int, bytes] | None:
    """``(status, body)`` of serve's answer to ``method path`` for ``db``, proven to come from the
    serve that wrote the note; ``None`` when no note names a serve.

    Raises:
        ServeUnreachable: the serve named is gone, stopped, gave no answer, or whoever answered
            could not prove it holds the note's token (why, in one line).
    """
    m = read_marker(db)
    if m is None:
        return None
    where = f"the hivestream serve (pid {m.pid}) named in {marker_path(db)}"
    if not process_alive(m.pid):
        raise ServeUnreachable(f"{where} is gone")
    try:
        status, answer = _exchange(m, method, path, body, timeout_s, check_alive=True)
    except _Unproven:
        raise ServeUnreachable(f"{where} did not prove itself on port {m.port}: the answer lacks the proof of the note's read token "
                               "(a stale note, and another process on that port?), so it was not used") from None
    except _NotAlive:
        raise ServeUnreachable(f"{where} did not answer a liveness check within {ALIVE_TIMEOUT_S:g} s "
                               "(stopped, e.g. by SIGSTOP or Ctrl-Z, or hung)") from None
    except TimeoutError as e:
        raise ServeUnreachable(f"{where} did not answer ({type(e).__name__}: {e})") from None
    except (OSError, http.client.HTTPException, ValueError) as e:  # ValueError: a request http.client refuses to send
        raise ServeUnreachable(f"{where} did not answer ({type(e).__name__})") from None
    if status == 401:
        raise ServeUnreachable(f"{where} refused its read token (HTTP 401)")
    if status == 503:
        raise ServeUnreachable(f"{where} cannot read the file right now (HTTP 503: {_detail(answer) or 'unavailable'})")
    return status, answer


def prove(db: Path) -> None:
    """Make sure the serve the note of ``db`` names is what runs there (its read listener answers
    ``GET /v1/alive`` with the proof of the note's read token), before anything is sent to the
    addresses the note gives (the review token to its ingest port: :mod:`hivestream.serve.event_client`).

    Raises:
        ServeUnreachable: no note, or see :func:`ask` (one line).
    """
    got = ask(db, "GET", "/v1/alive", timeout_s=ALIVE_TIMEOUT_S)
    if got is None:
        raise ServeUnreachable(f"no hivestream serve is named in {marker_path(db)}")
    if got[0] != 200:
        raise ServeUnreachable(f"the hivestream serve named in {marker_path(db)} gave no answer to use (HTTP {got[0]})")


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

