"""The command hook's delivery rule: a payload leaves its spool only on a 2xx or the
server's verdict that it dead-lettered it whole; failing payloads do not block the others; the
fallback spool is forwarded; concurrent flushes post each payload once; the spool's own
temporary, in-flight and odd entries are left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivestream.hooks.delivery import Verdict, verdict_of
from hivestream.hooks.hook_spool import spool_write
from tests.support.hook_stand import ACCEPTED, AnswerStand, hook, verdict
from tests.support.ingest_harness import REPO_ROOT


@pytest.fixture
def stand() -> Iterator[AnswerStand]:
    s = AnswerStand()
    yield s
    s.close()


def _prompt(i: int) -> str:
    return json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": f"p{i}", "event_time_ms": 1_790_000_000_000 + i})


def _files(d: Path) -> list[Path]:
    return sorted(p for p in d.glob("[0-9]*.hook") if p.is_file())


@pytest.mark.parametrize(("status", "body", "want"), [
    (200, ACCEPTED, Verdict.DELIVERED), (202, ACCEPTED.replace(b'"broker"', b'"log"'), Verdict.DELIVERED),
    # a 2xx that is not the server's answer proves nothing (another web server behind a wrong URL)
    (200, b"", Verdict.RETRY), (204, b"", Verdict.RETRY), (200, b"{}", Verdict.RETRY), (200, b"<html>ok</html>", Verdict.RETRY),
    (200, b'{"ok": true}', Verdict.RETRY), (200, b'{"accepted": 1, "durable": "disk"}', Verdict.RETRY),
    # a dead-letter verdict must say truncated false, exactly
    (422, b'{"dead_lettered": 1}', Verdict.RETRY), (400, b'{"dead_lettered": 1, "truncated": "false"}', Verdict.RETRY),
    (422, verdict(), Verdict.DEAD_LETTERED), (400, verdict(), Verdict.DEAD_LETTERED),
    (422, verdict(truncated=True), Verdict.SET_ASIDE), (413, b"", Verdict.SET_ASIDE),
    (400, b"{}", Verdict.RETRY), (422, b"<html>", Verdict.RETRY), (422, verdict(0), Verdict.RETRY),
    (404, verdict(), Verdict.RETRY), (404, b"not found", Verdict.RETRY), (500, b"", Verdict.RETRY),
    (0, b"", Verdict.STOP), (401, b"", Verdict.STOP), (503, b"", Verdict.STOP),
])
def test_the_delivery_rule(status: int, body: bytes, want: Verdict) -> None:
    assert verdict_of(status, body) is want


@pytest.mark.parametrize("answer", [(404, b"404 page not found"), (400, b"{}"), (422, b"bad"), (500, b"oops")])
def test_a_404_or_an_answer_without_the_servers_verdict_keeps_the_payload(stand: AnswerStand, tmp_path: Path,
                                                                           answer: tuple[int, bytes]) -> None:
    stand.answer = lambda _p, _b: answer
    env = {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path)}
    r = hook(["claude-code"], env, _prompt(0))
    assert r.returncode == 0 and r.stdout == "" and f"HTTP {answer[0]}" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert len(_files(tmp_path)) == 1
    r = hook(["flush"], env)
    assert r.returncode == 1 and "forwarded 0, 1 left" in r.stderr
    assert len(_files(tmp_path / "retry")) == 1


def test_the_servers_verdict_drops_a_payload_and_a_truncated_one_is_set_aside(stand: AnswerStand, tmp_path: Path) -> None:
    env = {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path)}
    stand.answer = lambda _p, _b: (422, verdict())
    assert hook(["claude-code"], env, _prompt(0)).returncode == 0
    assert not list(tmp_path.rglob("*.hook"))
    stand.answer = lambda _p, _b: (422, verdict(truncated=True))
    r = hook(["claude-code"], env, _prompt(1))
    assert r.returncode == 0 and "rejected" in r.stderr
    assert len(_files(tmp_path / "rejected")) == 1 and not _files(tmp_path)


def test_a_payload_that_keeps_failing_does_not_block_the_ones_behind_it(stand: AnswerStand, tmp_path: Path) -> None:
    for i in range(6):
        spool_write(tmp_path, "claude-code", _prompt(i).encode())
    bad = _prompt(0).encode()
    stand.answer = lambda _p, b: (500, b"") if b == bad else (200, ACCEPTED)
    env = {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path)}
    r = hook(["flush"], env)
    assert r.returncode == 1 and "forwarded 5, 1 left" in r.stderr and "1 failed" in r.stderr
    assert [b for _p, b in stand.seen].count(bad) == 1  # tried once per flush, not in a loop
    assert not _files(tmp_path) and len(_files(tmp_path / "retry")) == 1
    stand.answer = lambda _p, _b: (200, ACCEPTED)
    r = hook(["flush"], env)  # retried later
    assert r.returncode == 0 and "forwarded 1, 0 left" in r.stderr and not list(tmp_path.rglob("*.hook"))


def test_a_server_that_is_away_stops_the_flush_and_keeps_everything(stand: AnswerStand, tmp_path: Path) -> None:
    for i in range(3):
        spool_write(tmp_path, "codex", _prompt(i).encode())
    stand.answer = lambda _p, _b: (503, b"")
    r = hook(["flush"], {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path)})
    assert r.returncode == 1 and "3 left" in r.stderr and len(stand.seen) == 1 and len(_files(tmp_path)) == 3


def test_flush_forwards_the_fallback_spool_too(stand: AnswerStand, tmp_path: Path) -> None:
    blocked = tmp_path / "spool"
    blocked.write_text("not a directory")
    (tmp_path / "tmp").mkdir()
    fallback = tmp_path / "tmp" / f"hivestream-hook-spool-{os.getuid()}"
    env = {"HIVESTREAM_INGEST_URL": "http://127.0.0.1:9", "HIVESTREAM_SPOOL_DIR": str(blocked), "TMPDIR": str(tmp_path / "tmp")}
    assert hook(["claude-code", "--timeout", "1"], env, _prompt(0)).returncode == 0
    assert len(_files(fallback)) == 1
    r = hook(["flush"], {**env, "HIVESTREAM_INGEST_URL": stand.url})
    assert r.returncode == 0 and "forwarded 1, 0 left" in r.stderr
    assert [json.loads(b)["prompt"] for _p, b in stand.seen] == ["p0"] and not _files(fallback)


def test_flush_ignores_temporary_in_flight_and_odd_entries(stand: AnswerStand, tmp_path: Path) -> None:
    real = spool_write(tmp_path, "codex", _prompt(0).encode())
    other = spool_write(tmp_path, "codex", _prompt(1).encode())
    os.rename(other, tmp_path / f".inflight-{os.getpid()}-{other.name}")  # a live process's claim (this test's)
    (tmp_path / f".tmp-{real.name[:-5]}1.hook").write_bytes(b"half a rec")  # another hook still writing
    (tmp_path / "00000000000000000001-1-abcdef.hook").mkdir()  # a directory named like a spool file
    r = hook(["flush"], {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path)})
    assert r.returncode == 0 and "Error" not in r.stderr and "forwarded 1, 0 left" in r.stderr
    assert [json.loads(b)["prompt"] for _p, b in stand.seen] == ["p0"]
    assert (tmp_path / f".inflight-{os.getpid()}-{other.name}").exists() and not (tmp_path / "corrupt").exists()


def test_an_abandoned_claim_is_put_back_and_forwarded(stand: AnswerStand, tmp_path: Path) -> None:
    p = spool_write(tmp_path, "codex", _prompt(0).encode())
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    os.rename(p, tmp_path / f".inflight-{int(dead.stdout)}-{p.name}")
    r = hook(["flush"], {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path)})
    assert r.returncode == 0 and "forwarded 1, 0 left" in r.stderr and len(stand.seen) == 1


def test_ten_concurrent_flushes_post_every_payload_once(stand: AnswerStand, tmp_path: Path) -> None:
    n = 80
    for i in range(n):
        p = spool_write(tmp_path, "codex", _prompt(i).encode())
        os.utime(p, (1_000_000, 1_000_000))  # spooled long ago
    env = {**os.environ, "HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-m", "hivestream", "hook", "flush"], env=env, cwd=REPO_ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(10)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert all("Error" not in e for e in errs), errs
    prompts = sorted(json.loads(b)["prompt"] for _p, b in stand.seen)
    assert prompts == sorted(f"p{i}" for i in range(n))  # every one, none twice
    assert not list(tmp_path.rglob("*.hook"))
