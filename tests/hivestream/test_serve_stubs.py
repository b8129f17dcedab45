"""Memory-stub events through ``hivestream serve``: posted to its stub route (beside hook traffic)
and sent by ``hivestream stubs run|import --db FILE`` through it, folded into its file by the stub
projection equal, row for row, to ``stubs run`` over the same events; across SIGTERM and kill -9
nothing acknowledged is lost; bad payloads are one dead letter each, never a 500; ``hivestream run``
over serve's log gives the same tables."""

from __future__ import annotations

import base64
import json
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx
import numpy as np

from hivestream.serve.read_marker import read_marker
from streams.produce.encode import MAX_EVENT_BYTES
from streams.stubs.log import write_log
from tests.support.serve_harness import ServeProc, all_tables, hivestream, prompt
from tests.support.stub_fixtures import SCHEMA
from tests.support.stub_kafka_scenario import embedded, stub_scenario, stub_tables

ROUTE = "/v1/stub-events"
POLICY_FLAGS = ["--threshold", "0.6", "--top-n", "2", "--budget", "500"]  # tests.projections.test_stub_projection.POLICY


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bind_policy(db: Path, tmp_path: Path) -> None:
    """Record the match settings in ``db`` (a ``stubs run`` of no events), as a user does before serve starts."""
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    r = hivestream("stubs", "run", str(empty), "--db", str(db), *POLICY_FLAGS)
    assert r.returncode == 0, r.stderr


def _headers(db: Path) -> dict[str, str]:
    """The review token of the note of the serve holding ``db`` (stub writes need it)."""
    m = read_marker(db)
    assert m is not None and m.ingest is not None and m.ingest.review_token
    return {"Authorization": f"Bearer {m.ingest.review_token}", "Content-Type": "application/json"}


def _lines(path: Path) -> list[bytes]:
    return [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]


def _frames_traffic(url: str, stop: threading.Event, sent: list[int]) -> None:
    """Hook posts until ``stop`` (the frames pipeline's share of the log)."""
    i = 0
    with httpx.Client(timeout=30) as http:
        while not stop.is_set():
            r = http.post(url + "/v1/hooks/claude-code", json=[prompt("stubs", i + k) for k in range(5)])
            assert r.status_code == 200, r.text
            i += 5
    sent.append(i)


def _reference(tmp_path: Path, events_file: Path) -> dict[str, list[tuple[object, ...]]]:
    ref = tmp_path / "reference.duckdb"
    embedded(events_file, ref)  # stubs run over the same events, with the same settings
    return stub_tables(ref)


def test_stub_events_through_serve_equal_stubs_run_and_run_over_its_log(tmp_path: Path) -> None:
    db = tmp_path / "memory.duckdb"
    events = stub_scenario(seed=5, n_messages=300)
    whole = tmp_path / "events.jsonl"
    write_log(whole, events)
    want = _reference(tmp_path, whole)
    assert want["stub_matches"] and want["stubs"] and want["stub_messages"]
    lines = _lines(whole)
    cut = len(lines) * 3 // 5
    rest = tmp_path / "rest.jsonl"
    rest.write_bytes(b"".join(ln + b"\n" for ln in lines[cut:]))
    _bind_policy(db, tmp_path)
    proc = ServeProc(db, "--no-report", "--snapshot-every", "0")
    stop, sent = threading.Event(), list[int]()
    traffic = threading.Thread(target=_frames_traffic, args=(proc.url, stop, sent))
    try:
        traffic.start()
        headers = _headers(db)
        for i in range(0, cut, 40):  # in order, NDJSON bodies of 40 events, beside the hook posts
            body = b"\n".join(lines[i:min(i + 40, cut)])
            r = httpx.post(proc.url + ROUTE, content=body, headers=headers, timeout=30)
            assert r.status_code == 200, r.text
            assert r.json()["accepted"] == body.count(b"\n") + 1
        # the rest through `stubs run --db FILE`: serve holds the file, so the command goes through it
        cli = hivestream("stubs", "run", str(rest), "--db", str(db))
        assert cli.returncode == 0, cli.stderr
        assert f"{len(lines) - cut} lines through hivestream serve" in cli.stdout and "applied" in cli.stdout
        refused = hivestream("stubs", "run", str(rest), "--db", str(db), "--threshold", "0.9")
        assert refused.returncode == 2 and "settings its file holds" in refused.stderr
        stop.set()
        traffic.join(60)
        proc.wait_applied()
    finally:
        stop.set()
        assert proc.stop() == 0, proc.text()[-2000:]
    assert sent and sent[0] > 0
    got = stub_tables(db)
    for table in want:
        assert got[table] == want[table], table
    served = all_tables(db)
    assert len(served["frame_captures"]) >= sent[0]
    # `hivestream run` over serve's log (with the same settings bound): the same file, table for table
    rebuilt = tmp_path / "rebuilt.duckdb"
    _bind_policy(rebuilt, tmp_path)
    ran = hivestream("run", f"{db}.hook-events", "--db", str(rebuilt))
    assert ran.returncode == 0, ran.stderr
    again = all_tables(rebuilt)
    assert again.keys() == served.keys()
    for table in served:
        assert again[table] == served[table], table


def test_restarts_mid_stream_lose_no_acknowledged_stub_event(tmp_path: Path) -> None:
    db = tmp_path / "memory.duckdb"
    events = stub_scenario(seed=9, n_messages=400)
    whole = tmp_path / "events.jsonl"
    write_log(whole, events)
    want = _reference(tmp_path, whole)
    lines = _lines(whole)
    _bind_policy(db, tmp_path)
    port = _free_port()
    extra = ["--port", str(port), "--no-report", "--snapshot-every", "0"]
    proc = [ServeProc(db, *extra, port=port)]
    acked = [0]
    failures = [0]
    restarts: list[str] = []
    done = threading.Event()

    def restarter() -> None:
        for target, how in ((len(lines) // 4, "kill"), (len(lines) // 2, "term"), (3 * len(lines) // 4, "kill")):
            while acked[0] < target:
                if done.wait(0.005):
                    return
            if how == "kill":
                proc[0].kill()
            else:
                assert proc[0].stop() == 0
            restarts.append(how)
            proc[0] = ServeProc(db, *extra, port=port)

    t = threading.Thread(target=restarter, daemon=True)
    t.start()
    try:
        with httpx.Client(timeout=30) as http:
            for i in range(0, len(lines), 10):  # each body retried until answered 200 (as a spool would)
                body = b"\n".join(lines[i:i + 10])
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    try:
                        m = read_marker(db)
                        if m is not None and m.ingest is not None and m.ingest.review_token:
                            r = http.post(f"http://127.0.0.1:{port}{ROUTE}", content=body,
                                          headers={"Authorization": f"Bearer {m.ingest.review_token}"})
                            if r.status_code == 200:
                                assert r.json()["accepted"] == body.count(b"\n") + 1, r.text
                                break
                            assert r.status_code in (401, 403, 503), r.text  # 401/403: the review token of the serve just killed
                    except httpx.TransportError:
                        pass
                    failures[0] += 1
                    time.sleep(0.02)
                else:
                    raise AssertionError(f"no 200 for events {i}.. within 120 s")
                acked[0] += body.count(b"\n") + 1
        t.join(300)
        assert restarts == ["kill", "term", "kill"]
        proc[0].wait_applied()
    finally:
        done.set()
        t.join(300)
        assert proc[0].stop() == 0, proc[0].text()[-2000:]
    assert failures[0] > 0  # the restarts did cut requests off
    got = stub_tables(db)
    for table in want:
        assert got[table] == want[table], table


def _b64(v: np.ndarray) -> str:
    return base64.b64encode(v.astype("<f4").tobytes()).decode()


def _stub(sid: int, dim: int = 8, **kw: Any) -> dict[str, Any]:
    v = np.arange(1, dim + 1, dtype=np.float32)
    return {"type": "stub-upserted", "schema_version": 1, "event_id": f"bad-case-{sid}", "event_time_ms": 1_790_000_000_000,
            "stub_id": sid, "channel": "c", "title": "t", "stub_text": "s", "archive_path": "/a.md", "archive_tokens": 10,
            "embedding_b64": _b64(v), "model": "m", "dim": dim, **kw}


def test_bad_stub_payloads_are_one_dead_letter_each_never_a_500(tmp_path: Path) -> None:
    db = tmp_path / "memory.duckdb"
    proc = ServeProc(db, "--no-report", "--snapshot-every", "0")
    try:
        h = _headers(db)
        url = proc.url + ROUTE
        good = _stub(1)
        cases: dict[str, tuple[bytes, int, str]] = {  # name: body, status, reason of its dead letter
            "wrong shape": (json.dumps({"type": "stub-upserted", "schema_version": 9}).encode(), 422, "wrong_shape"),
            "unknown type": (json.dumps({"type": "stub-exploded"}).encode(), 422, "wrong_shape"),
            "bad dims": (json.dumps(_stub(2, dim=8) | {"embedding_b64": _b64(np.ones(5))}).encode(), 422, "wrong_shape"),
            "not base64": (json.dumps(_stub(3) | {"embedding_b64": "%%%"}).encode(), 422, "wrong_shape"),
            "non finite": (json.dumps(_stub(4) | {"embedding_b64": _b64(np.full(8, np.nan))}).encode(), 422, "wrong_shape"),
            "not utf8": (b'{"type": "stub-deleted", "stub_id": 1, "x": "\xff\xfe"}', 400, "not_utf8"),
            "not json": (b'{"type": "message-embedded", "oops"', 400, "malformed_json"),
            "oversized": (json.dumps(_stub(5, stub_text="x" * (MAX_EVENT_BYTES + 10))).encode(), 422, "body_too_large"),
        }
        for name, (body, status, _reason) in cases.items():
            r = httpx.post(url, content=body, headers=h, timeout=30)
            assert r.status_code == status, (name, r.status_code, r.text)
        mixed = httpx.post(url, json=[good, {"type": "stub-deleted"}], headers=h, timeout=30)
        assert mixed.status_code == 200 and mixed.json()["accepted"] == 1 and mixed.json()["rejected"] == 1, mixed.text
        too_big = httpx.post(url, content=b"[" + b" " * (1 << 21) + b"]", headers=h, timeout=30)
        assert too_big.status_code == 413, too_big.text  # over the body limit: refused unread, nothing written
        hooks_only = httpx.post(url, json=good, timeout=30)  # no review token: a stub write is refused whole
        assert hooks_only.status_code == 403, hooks_only.text
        # a well-formed message whose dimensions differ from its channel's stubs: the stub projection's dead letter
        msg = {"type": "message-embedded", "schema_version": 1, "event_id": "bad-case-msg", "event_time_ms": 1_790_000_001_000,
               "channel": "c", "message_id": "m1", "embedding_b64": _b64(np.ones(4)), "model": "m", "dim": 4}
        assert httpx.post(url, json=msg, headers=h, timeout=30).status_code == 200
        proc.wait_applied()
    finally:
        assert proc.stop() == 0, proc.text()[-2000:]
    con = duckdb.connect(str(db), read_only=True)
    try:
        dls = con.execute("SELECT input, src_offset, reason, detail FROM dead_letters WHERE input LIKE 'ingest:%:stub-events:%'").fetchall()
        stub_dls = con.execute("SELECT reason, detail FROM stub_dead_letters").fetchall()
        stubs = con.execute("SELECT channel, stub_id FROM stubs").fetchall()
    finally:
        con.close()
    reasons = sorted(r[2] for r in dls)
    assert reasons == sorted([c[2] for c in cases.values()] + ["wrong_shape"]), dls  # one each, the mixed body's bad one too
    assert len({(r[0], r[1]) for r in dls}) == len(dls)
    details = " ".join(r[3] for r in dls)
    for code in ("dimension_mismatch", "bad_base64", "non_finite"):
        assert code in details
    assert len(stub_dls) == 1 and "dimension_mismatch" in stub_dls[0][1], stub_dls
    assert stubs == [("c", 1)]


def test_stubs_import_goes_through_the_serve_holding_the_file_once(tmp_path: Path) -> None:
    stubs_db = tmp_path / "stubs.db"
    con = sqlite3.connect(stubs_db)
    con.execute(SCHEMA)
    for sid in (1, 2, 3):
        (tmp_path / f"{sid}.md").write_text("archived " * 40 * sid, encoding="utf-8")
        con.execute("INSERT INTO stubs VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (sid, f"title {sid}", f"hook {sid}", str(tmp_path / f"{sid}.md"), np.arange(sid, sid + 8, dtype="<f4").tobytes(),
                     "2026-04-20T10:00:00Z", None, sid, None, None))
    con.commit()
    con.close()
    direct = tmp_path / "direct.duckdb"
    r = hivestream("stubs", "import", str(stubs_db), "--channel", "ops", "--db", str(direct))
    assert r.returncode == 0, r.stderr
    db = tmp_path / "memory.duckdb"
    proc = ServeProc(db, "--no-report", "--snapshot-every", "0")
    try:
        for _ in range(2):  # the second import repeats the same event ids: applied once
            r = hivestream("stubs", "import", str(stubs_db), "--channel", "ops", "--db", str(db))
            assert r.returncode == 0, r.stderr
            assert "projected: 3 stub events through hivestream serve" in r.stdout, r.stdout
        proc.wait_applied()
    finally:
        assert proc.stop() == 0, proc.text()[-2000:]
    query = "SELECT * FROM stubs ORDER BY ALL"
    a, b = duckdb.connect(str(direct), read_only=True), duckdb.connect(str(db), read_only=True)
    try:
        assert len(a.execute(query).fetchall()) == 3
        assert b.execute(query).fetchall() == a.execute(query).fetchall()
    finally:
        a.close()
        b.close()
