"""Strict mode keeps every sensitive substring of the redaction cases out of every KnowHub table, dead
letter, event log and log line; relaxed mode keeps them."""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
import pytest

from hivestream.embedded.experiences import run_kb_files
from streams.experiences.extract import ChatClient
from streams.experiences.settings import ExperienceSettings
from streams.redaction.redact import RedactionMode
from tests.streams.test_redact import CASES
from tests.support.kb_fixtures import write_lines
from tests.support.kb_privacy import leaks, privacy_lines, secrets
from tests.support.openai_stub_server import OpenAIStubServer, Reply

TABLES = ("experiences", "experience_submissions", "experience_redactions", "experience_reviews", "kb_telemetry", "kb_dead_letters")


def dump(db: Path) -> bytes:
    """Every row of every KnowHub table as text (DuckDB compresses strings, so the file's bytes prove nothing)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return b"\n".join(repr(con.execute(f"SELECT * FROM {t}").fetchall()).encode() + b"\n" +
                          b"".join(v for r in con.execute(f"SELECT * FROM {t}").fetchall() for v in r if isinstance(v, bytes)) for t in TABLES)
    finally:
        con.close()


def test_the_case_set_is_large_enough() -> None:
    assert len(CASES) >= 50 and len(secrets()) >= 50


@pytest.mark.parametrize("mode", [RedactionMode.STRICT, RedactionMode.RELAXED])
def test_strict_mode_keeps_secrets_out_of_every_table_and_log(tmp_path: Path, mode: RedactionMode, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    log = write_lines(tmp_path / "hooks.jsonl", privacy_lines())
    db = tmp_path / "kb.duckdb"
    with OpenAIStubServer(lambda _r: Reply.items([])) as server:
        settings = ExperienceSettings(privacy_mode=mode, extraction_enabled=True, extraction_base_url=server.base_url)
        with ChatClient(server.base_url, "stub-model") as client:
            rep = run_kb_files([log], db, settings, completer=client)
        sent = b"".join(r.body for r in server.requests)
    assert rep.events["experience-submitted"] == len(CASES) + 1 and rep.dead_letters["missing_field"] == len(CASES)
    assert len(sent) > 1000
    stored = dump(db)
    logged = "\n".join(r.getMessage() for r in caplog.records).encode()
    if mode is RedactionMode.STRICT:
        assert leaks(stored) == [] and leaks(sent) == [] and leaks(logged) == []
        con = duckdb.connect(str(db), read_only=True)
        kinds = dict(con.execute("SELECT kind, sum(n) FROM experience_redactions GROUP BY kind").fetchall())
        con.close()
        want: dict[str, int] = {}
        for c in CASES:
            for k, n in c.counts.items():
                want[k] = want.get(k, 0) + n
        assert set(kinds) == set(want) and all(kinds[k] >= want[k] for k in want)  # each case's text is in task, resource and result
    else:
        assert leaks(stored) == sorted(secrets()) and leaks(sent) != []
