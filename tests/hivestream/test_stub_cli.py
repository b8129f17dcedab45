"""``hivestream stubs``: import a stubs.db with the seed's exact schema (3072 dims), run, whatif, query; user mistakes exit 2."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import duckdb
import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from hivestream.cli.stubs import stubs_app
from streams.stubs.events import MessageEmbedded, StubUpserted, encode_embedding
from streams.stubs.log import read_log, write_log
from streams.stubs.sqlite_import import DEFAULT_MODEL
from tests.projections.test_stub_projection import db_rows, scenario
from tests.support.stub_fixtures import SCHEMA

app = typer.Typer()
app.add_typer(stubs_app, name="stubs")
runner = CliRunner()

DIM = 3072
ROWS = [  # id, title, last_matched_at, match_count, refresh_source, last_refreshed_at
    (1, "Tracking-stack", "2026-05-03T18:01:02Z", 12, '{"type":"file-watch","path":"/workspace/project/x.md"}', "2026-05-04T03:20:00Z"),
    (2, "Mätning+BigQuery", None, 0, '{"type":"scheduler-db-query","query":"SELECT 1"}', "2026-05-01T03:20:00Z"),
    (3, "BidTheatre", "2026-05-01T12:00:00Z", 3, None, None),
]


def invoke(*args: str | Path) -> tuple[int, str, str]:
    r = runner.invoke(app, ["stubs", *map(str, args)])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.stdout, r.stderr


def one_line_error(code: int, stdout: str, stderr: str) -> str:
    assert code == 2, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in stdout + stderr, stderr
    return lines[0]


@pytest.fixture
def nanoclaw(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """A stubs.db with the seed's schema, 3072-dim gemini-sized vectors, archives on disk (ceil(chars/4) tokens)."""
    vecs = np.random.default_rng(8).standard_normal((len(ROWS), DIM)).astype(np.float32)
    con = sqlite3.connect(tmp_path / "stubs.db")
    con.execute(SCHEMA)
    for (sid, title, matched, count, source, refreshed), vec in zip(ROWS, vecs, strict=True):
        archive = tmp_path / f"{sid}.md"
        archive.write_text("x" * (400 * sid), encoding="utf-8")
        con.execute("INSERT INTO stubs VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (sid, title, f"hook {title}", str(archive), vec.astype("<f4").tobytes(), "2026-04-20T10:00:00Z", matched, count, source, refreshed))
    con.commit()
    con.close()
    return tmp_path / "stubs.db", vecs


def messages(vecs: np.ndarray, path: Path) -> None:
    rng = np.random.default_rng(9)
    t0 = 1_777_950_000_000  # 2026-05-05T03:00Z
    evs = [MessageEmbedded(event_id=f"m{n}", event_time_ms=t0 + n * 1000, channel="safariresor", message_id=f"m{n}",
                           embedding_b64=encode_embedding((v + rng.normal(0, 0.05, DIM)).astype(np.float32)), model=DEFAULT_MODEL, dim=DIM)
           for n, v in enumerate([vecs[0], vecs[0], vecs[2]])]
    evs.append(MessageEmbedded(event_id="m9", event_time_ms=t0 + 9000, channel="safariresor", message_id="m9",
                               embedding_b64=encode_embedding(rng.standard_normal(DIM).astype(np.float32)), model=DEFAULT_MODEL, dim=DIM))
    write_log(path, evs)


def test_import_run_whatif_query(tmp_path: Path, nanoclaw: tuple[Path, np.ndarray]) -> None:
    stubs_db, vecs = nanoclaw
    code, out, _ = invoke("import", stubs_db, "--channel", "safariresor", "--out", tmp_path / "stubs.jsonl")
    assert code == 0 and "imported: 3 stubs of channel safariresor" in out and "rejected rows: 0" in out
    evs = [e.item for e in read_log(tmp_path / "stubs.jsonl")]
    assert all(isinstance(e, StubUpserted) for e in evs)
    assert [(e.stub_id, e.match_count, e.dim, e.archive_tokens) for e in evs] == [(1, 12, DIM, 100), (2, 0, DIM, 200), (3, 3, DIM, 300)]  # type: ignore[union-attr]

    messages(vecs, tmp_path / "messages.jsonl")
    db = tmp_path / "p.duckdb"
    code, out, _ = invoke("run", tmp_path / "stubs.jsonl", tmp_path / "messages.jsonl", "--db", db, "--threshold", "0.9")
    assert code == 0, out
    assert "4 main (+0 subagent, 0 repeated); 3 matched (hit rate 75.0%); 3 matches, 500 tokens injected" in out
    # imported telemetry is the starting state
    assert db_rows(db, "SELECT stub_id, match_count FROM stubs ORDER BY stub_id") == [(1, 14), (2, 0), (3, 4)]
    code, out, _ = invoke("run", tmp_path / "stubs.jsonl", tmp_path / "messages.jsonl", "--db", db)  # settings come from the file
    assert code == 0 and "0 log items applied, 7 already applied" in out

    code, out, _ = invoke("whatif", tmp_path / "stubs.jsonl", tmp_path / "messages.jsonl", "--threshold", "0.999", "--db", db)
    assert code == 0, out
    assert "recorded: threshold 0.9" in out and "75.0% → 0.0%" in out and "safariresor#1" in out and "-2" in out

    for name, want in [("never-matched", "Mätning+BigQuery"), ("stale", "Mätning+BigQuery"), ("top-stubs", "Tracking-stack"),
                       ("hit-rate", "0.75"), ("tokens-per-day", "500"), ("similarity-near-threshold", "at/above"), ("dead-letters", "")]:
        code, out, _ = invoke("query", name, "--db", db)
        assert code == 0 and want in out, (name, out)
    code, out, _ = invoke("query", "stale", "--db", db, "--json")
    assert [r["stub_id"] for r in json.loads(out)] == [2]  # refreshed 2026-05-01; stub 1 on 05-04 is within 24 h + grace
    code, out, _ = invoke("query")
    assert code == 0 and "never-matched" in out


def test_import_straight_into_duckdb_and_global(tmp_path: Path, nanoclaw: tuple[Path, np.ndarray]) -> None:
    stubs_db, _ = nanoclaw
    db = tmp_path / "p.duckdb"
    code, out, _ = invoke("import", stubs_db, "--global", "--db", db)
    assert code == 0 and "projected: 3 stub events" in out
    code, out, _ = invoke("import", stubs_db, "--global", "--db", db)
    assert code == 0 and "3 already applied" in out
    assert db_rows(db, "SELECT channel, stub_id, refresh_source, deleted FROM stubs ORDER BY stub_id") == [
        ("", 1, "file-watch", False), ("", 2, "scheduler-db-query", False), ("", 3, "none", False)]


def test_import_rejects_unreadable_archives_unless_defaulted(tmp_path: Path, nanoclaw: tuple[Path, np.ndarray]) -> None:
    stubs_db, _ = nanoclaw
    (tmp_path / "2.md").unlink()
    code, out, _ = invoke("import", stubs_db, "--channel", "c", "--out", tmp_path / "a.jsonl")
    assert code == 0 and "rejected rows: 1" in out and "bad_row" in out
    code, out, _ = invoke("import", stubs_db, "--channel", "c", "--out", tmp_path / "b.jsonl", "--default-tokens", "50")
    assert code == 0 and "rejected rows: 0" in out


def test_whatif_without_db_and_with_channel(tmp_path: Path) -> None:
    write_log(tmp_path / "log.jsonl", scenario(n_messages=30))
    code, out, _ = invoke("whatif", tmp_path / "log.jsonl", "--threshold", "0.5", "--recorded-threshold", "0.6", "--recorded-top-n", "2",
                          "--recorded-budget", "500", "--channel", "alpha")
    assert code == 0 and "channel: alpha" in out and "per channel: recorded → what-if" in out and "beta" not in out


def test_user_mistakes_exit_2_with_one_line(tmp_path: Path, nanoclaw: tuple[Path, np.ndarray]) -> None:
    stubs_db, _ = nanoclaw
    write_log(tmp_path / "log.jsonl", scenario(n_messages=3))
    log, db = tmp_path / "log.jsonl", tmp_path / "p.duckdb"
    assert "no such file" in one_line_error(*invoke("import", tmp_path / "missing.db", "--channel", "c", "--out", tmp_path / "x"))
    assert "exactly one of" in one_line_error(*invoke("import", stubs_db, "--out", tmp_path / "x"))
    assert "exactly one of" in one_line_error(*invoke("import", stubs_db, "--channel", "c", "--global", "--out", tmp_path / "x"))
    assert "--out" in one_line_error(*invoke("import", stubs_db, "--channel", "c"))
    assert "not a NanoClaw stubs.db" in one_line_error(*invoke("import", log, "--channel", "c", "--out", tmp_path / "x"))
    assert "no such file" in one_line_error(*invoke("run", tmp_path / "nope.jsonl", "--db", db))
    assert "threshold" in one_line_error(*invoke("run", log, "--db", db, "--threshold", "2"))
    assert "top_n" in one_line_error(*invoke("whatif", log, "--threshold", "0.5", "--top-n", "-1"))
    assert invoke("run", log, "--db", db, "--threshold", "0.6")[0] == 0
    assert "was built with threshold=0.6" in one_line_error(*invoke("run", log, "--db", db, "--threshold", "0.7"))
    assert "unknown stub query" in one_line_error(*invoke("query", "nope", "--db", db))
    assert "no such DuckDB file" in one_line_error(*invoke("query", "stale", "--db", tmp_path / "none.duckdb"))
    duckdb.connect(str(tmp_path / "empty.duckdb")).close()
    assert "holds no stub projection" in one_line_error(*invoke("query", "stale", "--db", tmp_path / "empty.duckdb"))
    assert "holds no stub run" in one_line_error(*invoke("whatif", log, "--threshold", "0.5", "--db", tmp_path / "empty.duckdb"))


def test_import_says_a_bad_row_in_one_line_and_counts_a_repeated_id_once(tmp_path: Path) -> None:
    vec = np.random.default_rng(3).standard_normal(DIM).astype("<f4").tobytes()
    (tmp_path / "a.md").write_text("x" * 40)
    con = sqlite3.connect(tmp_path / "stubs.db")
    con.execute(SCHEMA.replace("INTEGER PRIMARY KEY", "INTEGER"))  # a table without its key: an id can repeat
    for sid, title, count in [(1, "first", 1), (2, "second", 2), (1, "first again", 3), (3, "negative", -4)]:
        con.execute("INSERT INTO stubs VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (sid, title, "hook", str(tmp_path / "a.md"), vec, "2026-04-20T10:00:00Z", None, count, None, None))
    con.commit()
    con.close()
    db = tmp_path / "p.duckdb"
    code, out, _ = invoke("import", tmp_path / "stubs.db", "--channel", "c", "--db", db, "--out", tmp_path / "s.jsonl")
    assert code == 0, out
    bad = [line for line in out.splitlines() if "stub 3" in line]
    assert bad == ["  bad_row: stub 3: match_count: Input should be greater than or equal to 0"], out  # no URL, no second line
    assert "http" not in out and "validation error" not in out
    assert "imported: 2 stubs of channel c" in out and "rejected rows: 1" in out and "1 row repeated a stub id" in out
    assert db_rows(db, "SELECT stub_id, title FROM stubs ORDER BY stub_id") == [(1, "first again"), (2, "second")]


def test_import_streams_the_rows(tmp_path: Path, nanoclaw: tuple[Path, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    import hivestream.cli.stubs as cli
    from streams.stubs.sqlite_import import iter_stub_rows

    stubs_db, _ = nanoclaw
    out_path = tmp_path / "s.jsonl"
    written_before_last: list[int] = []

    def watched(*args: object, **kw: object) -> object:
        rows = list(iter_stub_rows(*args, **kw))  # type: ignore[arg-type]
        for n, row in enumerate(rows):
            if n == len(rows) - 1:  # each row is written as it comes, not after the whole file was read
                written_before_last.append(out_path.read_text().count("\n") if out_path.exists() else -1)
            yield row

    monkeypatch.setattr(cli, "iter_stub_rows", watched)
    code, out, _ = invoke("import", stubs_db, "--channel", "c", "--out", out_path, "--db", tmp_path / "p.duckdb")
    assert code == 0 and "imported: 3 stubs" in out, out
    assert out_path.read_text().count("\n") == 3
    assert written_before_last and written_before_last[0] >= 1  # (a buffered file may hold the last line or two)


def test_query_list_lists_the_named_queries_of_stubs_and_kb() -> None:
    from hivestream.cli.app import app as cli

    for group, one in (("stubs", "hit-rate"), ("kb", "approval-rate")):
        listed = runner.invoke(cli, [group, "query", "--list"])
        bare = runner.invoke(cli, [group, "query"])
        assert listed.exit_code == 0, listed.output
        assert listed.output == bare.output
        assert one in listed.output
