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
from tests.serve_harness import ServeProc, hivestream, prompt

TOK = "serve-reads-gateway-token-0123456789"


def _captures(db: Path) -> tuple[int, str]:
    """(captures of ``hivestream query totals``, its stderr); the command must succeed."""
    q = hivestream("query", "totals", "--db", str(db), "--format", "json")
    assert q.returncode == 0, q.stderr
    return int(json.loads(q.stdout)[0]["captures"]), q.stderr


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
        stubs = hivestream("stubs", "query", "hit-rate", "--db", str(db))  # serve's file has no stub tables: one line, exit 2
        assert stubs.returncode == 2 and "holds no stub projection" in stubs.stderr and len(stubs.stderr.strip().splitlines()) == 1
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
        assert n == 1 and "refused its read token (HTTP 401" in err and "answered from the snapshot" in err, err
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
