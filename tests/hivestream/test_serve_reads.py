"""Reads while ``hivestream serve`` holds the file: ``query``, ``kb query``, ``stubs query`` and
``report`` in another process ask serve (its read listener named in ``<db>.serve``) and see what
its dedup loop committed, with no snapshot at all; the read token; a serve gone (kill -9) or a note
that is not its serve's: the file or the snapshot answers, and the line says why."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import httpx

from hivestream.serve.read_marker import marker_path, read_marker
from tests.support.serve_harness import ServeProc, hivestream, prompt

TOK = "serve-reads-gateway-token-0123456789"


def _captures(db: Path) -> tuple[int, str]:
    """(captures of ``hivestream query totals``, its stderr); the command must succeed."""
    q = hivestream("query", "totals", "--db", str(db), "--format", "json")
    assert q.returncode == 0, q.stderr
    return int(json.loads(q.stdout)[0]["captures"]), q.stderr


def _snapshot_captures(db: Path) -> int:
    """Captures in the snapshot ``<db>.snapshot`` (0 while there is none)."""
    import duckdb

    try:
        con = duckdb.connect(f"{db}.snapshot", read_only=True)
    except duckdb.Error:
        return 0
    try:
        row = con.execute("SELECT count(*) FROM frame_captures").fetchone()
        return int(row[0]) if row else 0
    finally:
        con.close()


def test_a_query_while_serve_runs_sees_the_frame_posted_just_before(tmp_path: Path) -> None:
    db = tmp_path / "memory.duckdb"
    proc = ServeProc(db, "--snapshot-every", "0", "--no-report")  # no snapshot: only serve itself can answer
    try:
        m = read_marker(db)
        assert m is not None and m.pid == proc.proc.pid
        assert stat.S_IMODE(marker_path(db).stat().st_mode) == 0o600
        for i in range(3):
            r = httpx.post(proc.url + "/v1/hooks/claude-code", json=prompt("reads", i), timeout=30)
            assert r.status_code == 200, r.text
            proc.wait_applied()
            n, err = _captures(db)
            assert n == i + 1, err
            assert err.strip().startswith(f"answered by hivestream serve (pid {proc.proc.pid}) from {db} itself") and "\n" not in err.strip()
        assert not Path(f"{db}.snapshot").exists()
        rows = hivestream("query", "top-frames", "--db", str(db), "--format", "csv")
        assert rows.returncode == 0 and "session:serve-reads-2 " in rows.stdout and rows.stdout.count("\n") == 4, rows.stderr
        kb = hivestream("kb", "query", "submissions-per-agent", "--db", str(db), "--json")
        assert kb.returncode == 0 and "answered by hivestream serve" in kb.stderr, kb.stderr
        stubs = hivestream("stubs", "query", "hit-rate", "--db", str(db))  # serve's file holds the stub tables (no stub posted: no rows)
        assert stubs.returncode == 0 and "answered by hivestream serve" in stubs.stderr, stubs.stderr
        page = tmp_path / "report.html"
        rep = hivestream("report", "--db", str(db), "--out", str(page))
        assert rep.returncode == 0 and "answered by" in rep.stderr, rep.stderr
        assert 'data-chart="captures-per-day" data-state="plot"' in page.read_text()
        assert m.token not in rep.stderr + rep.stdout + kb.stderr + rows.stderr + proc.text()
    finally:
        assert proc.stop() == 0, proc.text()[-2000:]
    assert not marker_path(db).exists()  # a clean stop takes its note away
    n, err = _captures(db)
    assert n == 3 and "no writer holds it" in err and "hivestream serve" not in err


def test_reads_need_the_read_token_and_a_note_that_is_not_its_serves_falls_back_to_the_snapshot(tmp_path: Path) -> None:
    db, tokens = tmp_path / "memory.duckdb", tmp_path / "tokens"
    tokens.write_text(f"gw-a {TOK}\n")
    proc = ServeProc(db, "--tokens-file", str(tokens), "--snapshot-every", "0.2", "--no-report")
    try:
        r = httpx.post(proc.url + "/v1/hooks/claude-code", json=prompt("tok", 0), headers={"Authorization": f"Bearer {TOK}"}, timeout=30)
        assert r.status_code == 200, r.text
        proc.wait_applied()
        m = read_marker(db)
        assert m is not None
        url = f"http://127.0.0.1:{m.port}"
        body = {"set": "frames", "name": "totals"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {TOK}"}):  # a gateway may post, not read
            bad = httpx.post(url + "/v1/query", json=body, headers=headers, timeout=30)
            assert bad.status_code == 401 and bad.json()["error"] == "unauthorized" and m.token not in bad.text
        assert httpx.get(url + "/v1/report", timeout=30).status_code == 401
        good = httpx.post(url + "/v1/query", json=body, headers={"Authorization": f"Bearer {m.token}"}, timeout=30)
        assert good.status_code == 200 and good.json()["rows"][0][0] == 1, good.text
        for bad_body in ({"set": "frames", "name": "nope"}, {"set": "nope", "name": "totals"}, {"name": 3}):
            r = httpx.post(url + "/v1/query", json=bad_body, headers={"Authorization": f"Bearer {m.token}"}, timeout=30)
            assert r.status_code == 400 and r.json()["error"] == "bad_request"
        with httpx.Client() as c:  # the ingest port does not serve reads
            assert c.post(proc.url + "/v1/query", json=body, headers={"Authorization": f"Bearer {m.token}"}).status_code == 404
        # a note with another token (not this serve's): the reader falls back to the snapshot and says why
        note = json.loads(marker_path(db).read_text())
        marker_path(db).write_text(json.dumps({**note, "token": "not-the-token"}))
        assert stat.S_IMODE(marker_path(db).stat().st_mode) == 0o600
        deadline = time.monotonic() + 60  # the snapshot is published on a low-priority thread: wait until it holds the capture
        while True:
            q = hivestream("query", "totals", "--db", str(db), "--format", "json")
            if (q.returncode == 0 and json.loads(q.stdout)[0]["captures"] == 1) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        n, err = _captures(db)
        assert n == 1 and "did not prove itself" in err and "answered from the snapshot" in err, err
        assert len(err.strip().splitlines()) == 1 and "not-the-token" not in err
    finally:
        assert proc.stop() == 0, proc.text()[-2000:]
    assert TOK not in proc.text()


def test_serve_gone_the_file_answers_and_the_line_says_so(tmp_path: Path) -> None:
    db = tmp_path / "memory.duckdb"
    proc = ServeProc(db, "--snapshot-every", "0", "--no-report")
    r = httpx.post(proc.url + "/v1/hooks/claude-code", json=prompt("gone", 0), timeout=30)
    assert r.status_code == 200
    proc.wait_applied()
    proc.kill()  # kill -9: the note stays
    assert marker_path(db).exists()
    n, err = _captures(db)
    assert n == 1, err
    line = err.strip()
    assert line.startswith(f"the hivestream serve (pid {proc.proc.pid}) named in {marker_path(db).name}") or \
        line.startswith(f"the hivestream serve (pid {proc.proc.pid}) named in {marker_path(db)}"), line
    assert ("is gone" in line or "did not answer" in line) and "no writer holds it" in line and "\n" not in line
    rep = hivestream("report", "--db", str(db), "--out", str(tmp_path / "r.html"))
    assert rep.returncode == 0 and ("is gone" in rep.stderr or "did not answer" in rep.stderr), rep.stderr
    # a note of another user or writable by others is not followed
    os.chmod(marker_path(db), 0o666)
    n, err = _captures(db)
    assert n == 1 and "hivestream serve" not in err and "no writer holds it" in err


def test_a_stale_note_and_another_process_on_its_port_neither_forge_rows_nor_get_the_token(tmp_path: Path) -> None:
    import http.server
    import threading

    db = tmp_path / "memory.duckdb"
    proc = ServeProc(db, "--snapshot-every", "0", "--no-report")
    r = httpx.post(proc.url + "/v1/hooks/claude-code", json=prompt("stale", 0), timeout=30)
    assert r.status_code == 200
    proc.wait_applied()
    proc.kill()  # kill -9: the note stays, naming serve's read port
    m = read_marker(db)
    assert m is not None
    received: list[str] = []

    class Forger(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            received.append(self.requestline + "\n" + str(self.headers))
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            html = self.path.startswith("/v1/report")
            body = (b"<html><script>forged()</script></html>" if html else
                    json.dumps({"columns": ["captures"], "rows": [[999]], "applied": 1, "log_records": 1, "pid": m.pid}).encode())
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if html else "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *_args: object) -> None:
            pass

    impostor = http.server.ThreadingHTTPServer(("127.0.0.1", m.port), Forger)  # another local process takes the port
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    try:
        note = json.loads(marker_path(db).read_text())
        marker_path(db).write_text(json.dumps({**note, "pid": os.getpid()}))  # its process id reused by a live process
        n, err = _captures(db)
        assert n == 1 and "did not prove itself" in err and "no writer holds it" in err, err
        page = tmp_path / "r.html"
        rep = hivestream("report", "--db", str(db), "--out", str(page))
        assert rep.returncode == 0 and "did not prove itself" in rep.stderr, rep.stderr
        assert "forged()" not in page.read_text()
    finally:
        impostor.shutdown()
        impostor.server_close()
    assert len(received) >= 2 and not any(m.token in seen for seen in received)


def test_a_stopped_serve_is_given_up_within_seconds_and_the_snapshot_answers(tmp_path: Path) -> None:
    import signal

    db = tmp_path / "memory.duckdb"
    proc = ServeProc(db, "--snapshot-every", "0.2", "--no-report")
    try:
        r = httpx.post(proc.url + "/v1/hooks/claude-code", json=prompt("stopped", 0), timeout=30)
        assert r.status_code == 200
        proc.wait_applied()
        deadline = time.monotonic() + 60  # the snapshot is published on a low-priority thread: wait until it holds the capture
        while not _snapshot_captures(db):
            assert time.monotonic() < deadline
            time.sleep(0.3)
        proc.proc.send_signal(signal.SIGSTOP)  # Ctrl-Z: its port still accepts connections, nothing answers
        try:
            q = hivestream("query", "totals", "--db", str(db), "--format", "json", timeout=90)  # the wait for an answer is 300 s
            assert q.returncode == 0 and json.loads(q.stdout)[0]["captures"] == 1, q.stderr
            assert "did not answer a liveness check" in q.stderr and "answered from the snapshot" in q.stderr, q.stderr
        finally:
            proc.proc.send_signal(signal.SIGCONT)
        n, err = _captures(db)  # serve answers again once it runs
        assert n == 1 and err.startswith("answered by hivestream serve"), err
    finally:
        assert proc.stop() == 0, proc.text()[-2000:]
