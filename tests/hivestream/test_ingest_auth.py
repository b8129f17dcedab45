"""Authentication fails closed: strict tokens files, an empty one refuses to start,
event ids a gateway cannot choose, and ``/metrics`` optionally behind a token."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hivestream.ingest.server import ConfigError, IngestConfig, check_bind
from streams.ingest.auth import TokenTable, load_tokens, parse_tokens
from tests.support.ingest_harness import REPO_ROOT
from tests.support.memory_sink import MemorySink, requests

TOK = "a-gateway-token-0123456789"
HEX = hashlib.sha256(TOK.encode()).hexdigest()


@pytest.mark.parametrize("text", [
    f"gw-a {TOK[:5]}#{TOK[5:]}",  # '#' inside a token: not a comment, an error
    "gw-a sha256:" + HEX[:40],  # a short digest is not a plain token
    "gw-a SHA256:" + HEX + "0",
    "gw-a sha256:" + "z" * 64,
    f"gw-a {TOK} extra",
])
def test_token_lines_are_parsed_strictly(text: str) -> None:
    with pytest.raises(ValueError, match="line 1") as e:
        parse_tokens(text)
    assert TOK not in str(e.value) and HEX not in str(e.value)


def test_the_sha256_prefix_and_digest_are_case_insensitive_and_comments_are_fields_of_their_own() -> None:
    table = TokenTable(parse_tokens(f"# gateways\n  # indented\ngw-a SHA256:{HEX.upper()}   # laptop\ngw-b {TOK}-b #x\n"))
    assert table.gateway_for(f"Bearer {TOK}") == "gw-a"
    assert table.gateway_for(f"Bearer {TOK}-b") == "gw-b"
    assert table.gateway_for(f"Bearer sha256:{HEX}") is None  # the digest text is no credential


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_a_tokens_file_without_a_token_refuses_to_start(tmp_path: Path, text: str) -> None:
    with pytest.raises(ValueError, match="no token"):
        load_tokens(text)
    f = tmp_path / "tokens"
    f.write_text(text)
    r = subprocess.run([sys.executable, "-m", "hivestream", "ingest", "--tokens-file", str(f), "--port", "0",
                        "--spool-dir", str(tmp_path / "spool")], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert r.returncode == 2 and "no token" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_gateway_cannot_choose_event_ids(tmp_path: Path) -> None:
    cfg = IngestConfig(spool_dir=tmp_path / "spool")
    body = "\n".join(json.dumps({"content": f"[user] message {i}", "event_id": "chosen-id", "event_time_ms": 1_790_000_000_000})
                     for i in range(2)).encode()
    [(status, got)] = requests(cfg, MemorySink(), [("POST", "/v1/hooks/prefixed", body, {})])
    assert status == 200 and got["accepted"] == 2
    ids = [r["event_id"] for r in got["results"]]
    assert len(set(ids)) == 2 and "chosen-id" not in ids


def test_metrics_can_require_a_token(tmp_path: Path) -> None:
    tokens = TokenTable(parse_tokens(f"gw-a {TOK}\n"))
    cfg = IngestConfig(spool_dir=tmp_path / "spool", tokens=tokens, metrics_auth=True)
    out = requests(cfg, MemorySink(), [("GET", "/metrics", b"", {}), ("GET", "/metrics", b"", {"Authorization": f"Bearer {TOK}"})])
    assert out[0][0] == 401 and out[1][0] == 200 and "hivestream_ingest" in out[1][1]
    open_cfg = IngestConfig(spool_dir=tmp_path / "spool", tokens=tokens)
    assert requests(open_cfg, MemorySink(), [("GET", "/metrics", b"", {})])[0][0] == 200  # off by default
    with pytest.raises(ConfigError, match="metrics-auth"):
        check_bind(IngestConfig(spool_dir=tmp_path / "spool", metrics_auth=True))
