"""Serve's read listener in process (hivestream/serve/read_api.py, read_proof.py, read_client.py):
the reader proves the token without sending it and trusts only answers that prove serve holds it;
a read whose client went away, or that runs past the deadline, is cancelled on serve's side so it
does not hold the read pool."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import socket
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest

from hivestream.serve import read_api
from hivestream.serve.progress import Progress
from hivestream.serve.read_api import ReadApp, start_reads
from hivestream.serve.read_client import ServeUnreachable, ask
from hivestream.serve.read_gate import ReadGate
from hivestream.serve.read_marker import ReadMarker, write_marker
from hivestream.serve.read_proof import PROOF_HEADER, answer_proven, authorization, new_nonce
from projections.named_query import NamedQuery

ENDLESS = "SELECT count(*) FROM range(1000000000000) t(x) WHERE x % 7 = 3"
"""A query that runs for hours unless interrupted."""


@pytest.fixture
async def listener(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[ReadApp, int]]:
    """A read listener over an in-memory database, with a query set ``test`` holding ``endless`` and ``one``;
    at teardown every read still running is interrupted (so a failing test ends rather than hangs)."""
    jobs: list[read_api.ReadJob] = []

    class Recorded(read_api.ReadJob):
        def __init__(self) -> None:
            super().__init__()
            jobs.append(self)

    monkeypatch.setattr(read_api, "ReadJob", Recorded)
    monkeypatch.setitem(read_api.QUERY_SETS, "test", {"endless": NamedQuery("endless", "never ends", ENDLESS),
                                                      "one": NamedQuery("one", "one row", "SELECT 1 AS one")})
    gate = ReadGate()
    gate.set(duckdb.connect(), Path("mem.duckdb"))
    reads = ReadApp(gate, Progress(), SimpleNamespace(next_offset=0), "the-read-token")  # type: ignore[arg-type]
    runner, port = await start_reads(reads)
    try:
        yield reads, port
    finally:
        await runner.cleanup()
        stopped = asyncio.ensure_future(asyncio.to_thread(reads.pool.shutdown, True))
        while not stopped.done():
            for j in jobs:
                j.cancel()
            await asyncio.sleep(0.05)
        gate.set(None)


def _post(port: int, name: str, token: str = "the-read-token", timeout: float = 60) -> tuple[int, bytes, str | None, str]:
    """(status, body, proof header, nonce) of a proven ``POST /v1/query`` of the ``test`` set."""
    body = json.dumps({"set": "test", "name": name}).encode()
    nonce = new_nonce()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/query", body=body, headers=authorization(token, nonce, "POST", "/v1/query", body))
        r = conn.getresponse()
        return r.status, r.read(), r.getheader(PROOF_HEADER), nonce
    finally:
        conn.close()


def _abandon(port: int, name: str) -> None:
    """Send a proven query and close the connection without waiting for its answer."""
    body = json.dumps({"set": "test", "name": name}).encode()
    with socket.create_connection(("127.0.0.1", port)) as s:
        head = "".join(f"{k}: {v}\r\n" for k, v in authorization("the-read-token", new_nonce(), "POST", "/v1/query", body).items())
        s.sendall(f"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode() + body)


async def test_a_proven_request_gets_a_proven_answer_and_the_token_never_travels(listener: tuple[ReadApp, int]) -> None:
    _reads, port = listener
    status, body, proof, nonce = await asyncio.to_thread(_post, port, "one")
    assert status == 200 and json.loads(body)["rows"] == [[1]]
    assert answer_proven("the-read-token", nonce, status, body, proof)
    assert not answer_proven("another-token", nonce, status, body, proof)
    assert not answer_proven("the-read-token", new_nonce(), status, body, proof)  # bound to this request's nonce
    assert not answer_proven("the-read-token", nonce, status, body + b" ", proof)  # and to the answer
    wrong, _b, _p, _n = await asyncio.to_thread(_post, port, "one", "another-token")
    assert wrong == 401


async def test_a_read_whose_client_went_away_is_interrupted_and_frees_the_pool(listener: tuple[ReadApp, int]) -> None:
    reads, port = listener
    for _ in range(read_api.READ_THREADS + 1):  # every read thread taken, and one more queued
        await asyncio.to_thread(_abandon, port, "endless")
    await asyncio.sleep(0.5)
    # without cancellation both threads would stay in the endless query for hours: this would not return
    status, body, _proof, _nonce = await asyncio.wait_for(asyncio.to_thread(_post, port, "one"), 120)
    assert status == 200 and json.loads(body)["rows"] == [[1]]
    for _ in range(600):  # every abandoned read ends (interrupted), within a minute at most
        if not reads._reapers:
            break
        await asyncio.sleep(0.1)
    assert not reads._reapers


async def test_a_read_past_the_deadline_is_cancelled_and_answered_503(listener: tuple[ReadApp, int]) -> None:
    reads, port = listener
    reads.deadline_s = 0.5
    answers = await asyncio.wait_for(asyncio.gather(*(asyncio.to_thread(_post, port, "endless") for _ in range(read_api.READ_THREADS))), 120)
    for status, body, proof, nonce in answers:  # every read thread ran an endless query
        assert status == 503 and json.loads(body)["error"] == "overdue"
        assert answer_proven("the-read-token", nonce, status, body, proof)
    reads.deadline_s = 60
    ok, _b, _p, _n = await asyncio.wait_for(asyncio.to_thread(_post, port, "one"), 120)  # a thread is free again
    assert ok == 200


class _Impostor:
    """A local process's HTTP listener that answers every request with forged rows and records what it received."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.received = bytearray()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        forged = json.dumps({"columns": ["captures"], "rows": [[999]], "applied": 1, "log_records": 1, "pid": 1}).encode()
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    self.received += conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Hivestream-Proof: 00\r\n"
                                 b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(forged), forged))
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def test_an_impostor_on_the_note_s_port_is_not_believed_and_never_sees_the_token(tmp_path: Path) -> None:
    db = tmp_path / "f.duckdb"
    imp = _Impostor()
    try:
        write_marker(db, ReadMarker(os.getpid(), imp.port, "the-read-token"))  # a live pid: the note's process id reused
        with pytest.raises(ServeUnreachable) as e:
            ask(db, "POST", "/v1/query", json.dumps({"set": "frames", "name": "totals"}).encode(), timeout_s=30)
        assert "did not prove itself" in str(e.value) and "\n" not in str(e.value)
        assert imp.received.startswith(b"POST /v1/query") and b"the-read-token" not in imp.received
    finally:
        imp.close()


def test_a_listener_that_never_answers_is_given_up_within_seconds(tmp_path: Path) -> None:
    db = tmp_path / "f.duckdb"
    with socket.socket() as s:  # listens (the kernel accepts connections) but never reads: a stopped serve
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        write_marker(db, ReadMarker(os.getpid(), s.getsockname()[1], "the-read-token"))
        with pytest.raises(ServeUnreachable) as e:
            ask(db, "GET", "/v1/report")  # the default wait for an answer is minutes; the liveness check gives up in seconds
    assert "did not answer a liveness check" in str(e.value) and "the-read-token" not in str(e.value)


def test_kb_approve_through_a_stale_note_sends_nothing_to_the_impostor(tmp_path: Path) -> None:
    from hivestream.serve.event_client import NotSent, send
    from hivestream.serve.read_marker import IngestNote, read_marker

    db = tmp_path / "f.duckdb"
    reads, ingest = _Impostor(), _Impostor()  # another process on each port the stale note names
    try:
        write_marker(db, ReadMarker(os.getpid(), reads.port, "the-read-token", IngestNote("127.0.0.1", ingest.port, "the-review-token")))
        m = read_marker(db)
        assert m is not None and m.ingest is not None
        with pytest.raises(NotSent) as e:
            send(db, m, b'{"type": "experience-reviewed"}', review=True)
        assert "did not prove itself" in str(e.value) and "nothing was sent" in str(e.value)
        assert ingest.received == b"" and b"the-review-token" not in reads.received and b"the-read-token" not in reads.received
    finally:
        reads.close()
        ingest.close()
