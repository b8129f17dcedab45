"""The OpenClaw handler ``hooks install openclaw`` writes, run by Node against a local stand-in
for the server: its spool drains in batches under the body limit, and an event leaves
the spool only on a 2xx or the server's verdict that it dead-lettered it whole."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivestream.hooks.openclaw_template import HANDLER_TS, render
from tests.support.hook_stand import ACCEPTED, AnswerStand, verdict

pytestmark = pytest.mark.skipif(not shutil.which("node"), reason="node not installed")

DRIVER = """
const { default: handler } = await import(process.argv[2]);
handler({ type: "message", action: "received", sessionKey: "oc-1", timestamp: 1790000000000,
          context: { channelId: "oc-1", from: "user-1", content: "live one", messageId: "m-live" } });
"""

LIMIT = 300_000


@pytest.fixture
def stand() -> Iterator[AnswerStand]:
    s = AnswerStand(lambda _p, b: (413, b"") if len(b) > LIMIT else (200, ACCEPTED))
    yield s
    s.close()


def _run(stand: AnswerStand, spool: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    mjs = tmp / "handler.mjs"
    mjs.write_text(render(HANDLER_TS, stand.url))
    drv = tmp / "driver.mjs"
    drv.write_text(DRIVER)
    env = {**os.environ, "HIVESTREAM_OPENCLAW_SPOOL_DIR": str(spool)}
    env.pop("HIVESTREAM_INGEST_URL", None)
    return subprocess.run(["node", str(drv), str(mjs)], env=env, capture_output=True, text=True, timeout=120)


def _line(i: int, pad: int) -> str:
    ev = {"type": "message", "action": "sent", "sessionKey": "oc-1", "timestamp": 1790000000000 + i,
          "context": {"channelId": "oc-1", "to": "user-1", "content": f"m{i} " + "x" * pad, "messageId": f"m{i}"}}
    return json.dumps(ev) + "\n"


def _sent_ids(stand: AnswerStand, ok_only: bool = True) -> list[str]:
    out = []
    for _p, body in stand.seen:
        if ok_only and len(body) > LIMIT:
            continue
        out += [json.loads(ln)["context"]["messageId"] for ln in body.decode().split("\n") if ln.strip()]
    return out


def test_a_large_spool_drains_in_batches_under_the_body_limit(stand: AnswerStand, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "pending.ndjson").write_text("".join(_line(i, 20_000) for i in range(40)))  # 800 KB: over the limit in one post
    r = _run(stand, spool, tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(_sent_ids(stand)) == sorted(["m-live", *(f"m{i}" for i in range(40))])  # every one, once
    assert all(len(b) <= 256 * 1024 for _p, b in stand.seen)
    assert not (spool / "pending.ndjson").exists() and not list(spool.glob("*.sending"))


def test_refusals_without_the_servers_verdict_keep_the_events(stand: AnswerStand, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "pending.ndjson").write_text("".join(_line(i, 10) for i in range(4)))
    bad = '"m2"'
    stand.answer = lambda _p, b: (200, ACCEPTED) if b'"m-live"' in b else (400, b"{}") if bad.encode() in b else (200, ACCEPTED)
    r = _run(stand, spool, tmp_path)
    assert r.returncode == 0, r.stderr
    kept = [json.loads(ln)["context"]["messageId"] for ln in (spool / "pending.ndjson").read_text().splitlines()]
    assert kept == ["m2"] and "not delivered (HTTP 400)" in r.stderr  # the others went on; m2 is kept, not deleted
    assert {"m0", "m1", "m3"} <= set(_sent_ids(stand))


def test_a_verdict_drops_the_event_and_a_truncated_one_is_set_aside(stand: AnswerStand, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "pending.ndjson").write_text(_line(0, 10) + _line(1, 10))
    stand.answer = lambda _p, b: ((200, ACCEPTED) if b'"m-live"' in b else (422, verdict(truncated=b'"m1"' in b)) if b.count(b"\n") == 1
                                  else (500, b""))
    r = _run(stand, spool, tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (spool / "pending.ndjson").exists()
    assert [json.loads(ln)["context"]["messageId"] for ln in (spool / "rejected.ndjson").read_text().splitlines()] == ["m1"]


def test_an_abandoned_claim_is_sent(stand: AnswerStand, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    dead = subprocess.run(["node", "-e", "console.log(process.pid)"], capture_output=True, text=True, check=True)
    (spool / f"pending.ndjson.{int(dead.stdout)}.1790000000000.sending").write_text(_line(7, 10))
    r = _run(stand, spool, tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(_sent_ids(stand)) == ["m-live", "m7"] and not list(spool.iterdir())


def test_a_directory_named_like_a_claim_is_left_alone_and_blocks_nothing(stand: AnswerStand, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    dead = subprocess.run(["node", "-e", "console.log(process.pid)"], capture_output=True, text=True, check=True)
    (spool / f"pending.ndjson.{int(dead.stdout)}.1.sending").mkdir()
    (spool / f"pending.ndjson.{int(dead.stdout)}.2.sending").write_text(_line(8, 10))
    (spool / "pending.ndjson").write_text(_line(9, 10))
    r = _run(stand, spool, tmp_path)
    assert r.returncode == 0 and "could not post" not in r.stderr, r.stderr
    assert sorted(_sent_ids(stand)) == ["m-live", "m8", "m9"]
    assert [p.name for p in spool.iterdir()] == [f"pending.ndjson.{int(dead.stdout)}.1.sending"]
