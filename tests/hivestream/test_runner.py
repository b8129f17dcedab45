"""The embedded runner and CLI: demo samples, the session files (the main job), idempotent re-runs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from hivestream.cli.app import SAMPLES, app
from hivestream.embedded.frames import EmbeddedRunner, run_files
from projections.frames.projection import MetaMismatch
from projections.frames.queries import QUERIES
from streams.importers.files import import_file
from streams.settings import Settings
from tests.support.dedup_reference import db_tables, expected_tables, log_captures, reference_dedup
from tests.support.session_sets import SessionSet

SAMPLE_FILES = sorted(SAMPLES.glob("*.jsonl"))


def tables(db: Path) -> dict[str, list[tuple[object, ...]]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            "frames": con.execute("SELECT frame_id, body_hash, content, source, access_count, sources, first_seen_ms, "
                                  "last_accessed_ms FROM frames ORDER BY frame_id").fetchall(),
            "captures": con.execute("SELECT * FROM frame_captures ORDER BY event_id").fetchall(),
            "dead": con.execute("SELECT input, src_offset, reason FROM dead_letters ORDER BY ALL").fetchall(),
        }
    finally:
        con.close()


def test_demo_samples(tmp_path: Path) -> None:
    report = run_files(SAMPLE_FILES, tmp_path / "d.duckdb", gateway=True)
    # 4 turns per backend session (2 prompts, 2 replies) each captured twice with the gateway,
    # + 6 already-captured events in the hook log (3 bad lines, and an empty body: valid, not a turn)
    assert report.captures == 22
    assert report.frames_created == 10 and report.duplicates == 12
    assert report.dead_letters == Counter({"bad_timestamp": 2, "malformed_json": 1})
    assert report.not_turns["empty_body"] == 1
    con = duckdb.connect(str(tmp_path / "d.duckdb"), read_only=True)
    pairs = dict(((a, b), n) for a, b, n, _ in con.execute(QUERIES["dedup-summary"].sql).fetchall())
    assert pairs[("openclaw", "claude-code")] == 3  # gateway received before each Claude prompt, + telegram
    assert pairs[("claude-code", "codex")] == 1  # "All 12 tests pass." from both backends within W
    top = con.execute("SELECT access_count, sources FROM frames ORDER BY access_count DESC LIMIT 1").fetchone()
    assert top == (4, ["claude-code", "codex", "openclaw"])


def test_rerun_applies_nothing_twice(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    run_files(SAMPLE_FILES, db, gateway=True)
    before = tables(db)
    again = run_files(SAMPLE_FILES, db, gateway=True)
    assert again.frames_created == 0 and again.duplicates == 0 and again.skipped > 0
    assert tables(db) == before


def test_killed_run_resumes_to_the_same_tables(tmp_path: Path) -> None:
    files = SAMPLE_FILES
    full = tmp_path / "full.duckdb"
    run_files(files, full, gateway=True, settings=Settings(batch_size=1))
    part = tmp_path / "part.duckdb"
    r = EmbeddedRunner(part, Settings(batch_size=1))
    for p in files[:1]:
        r.run_file(p, gateway=True)
    _, items = import_file(files[1], gateway=True)
    stop_after = 9
    r.run_items(f"file:{files[1].resolve()}", (x for i, x in enumerate(items) if i < stop_after))  # dies mid-file
    r.sink.con.close()  # no checkpoint, as after kill -9
    run_files(files, part, gateway=True, settings=Settings(batch_size=1))
    assert tables(part)["frames"] == tables(full)["frames"]
    assert [c[:7] for c in tables(part)["captures"]] == [c[:7] for c in tables(full)["captures"]]


def test_settings_are_bound_to_the_file(tmp_path: Path) -> None:
    db = tmp_path / "m.duckdb"
    run_files(SAMPLE_FILES[:1], db)
    with pytest.raises(MetaMismatch):
        EmbeddedRunner(db, Settings(window_ms=5))


def test_main_job_on_the_sessions(sessions: SessionSet, tmp_path: Path) -> None:
    """`hivestream run` on every session file with the gateway double capture (the main job), against
    the brute-force reference of the dedup (``tests/support/dedup_reference.py``)."""
    db = tmp_path / "sessions.duckdb"
    res = CliRunner().invoke(app, ["run", *map(str, sessions.dirs()), "--gateway", "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "frames out" in res.output
    paths = sorted((sessions.root / "claude-code").rglob("*.jsonl")) + sorted((sessions.root / "codex").rglob("*.jsonl"))
    assert paths == sessions.claude_files() + sessions.codex_files()
    settings = Settings()
    want = expected_tables(reference_dedup(log_captures(paths, gateway=True), settings.window_ms, settings.allowed_lateness_ms))
    assert db_tables(db) == want
    con = duckdb.connect(str(db), read_only=True)
    captures, frames, dupes = con.execute(QUERIES["totals"].sql).fetchone()[:3]  # type: ignore[index]
    by_pair = dict(((a, b), n) for a, b, n, _ in con.execute(QUERIES["dedup-summary"].sql).fetchall())
    con.close()
    assert (captures, frames) == (len(want["captures"]), len(want["frames"]))
    assert captures == frames + dupes and dupes > 0
    # every gateway capture of a backend turn collapses into the backend's frame (or vice versa)
    gw = sum(n for (a, b), n in by_pair.items() if "openclaw" in (a, b) and a != b)
    assert gw > 100
    for name in QUERIES:
        res = CliRunner().invoke(app, ["query", name, "--db", str(db), "--format", "json"])
        assert res.exit_code == 0, res.output


def test_query_cli_errors(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["query", "no-such-query", "--db", str(tmp_path / "x.duckdb")])
    assert res.exit_code == 2
    res = CliRunner().invoke(app, ["query", "totals", "--db", str(tmp_path / "missing.duckdb")])
    assert res.exit_code == 2
    res = CliRunner().invoke(app, ["query", "--list"])
    assert res.exit_code == 0 and "dedup-summary" in res.output


def test_odd_shapes_never_crash_a_run(tmp_path: Path) -> None:
    f = tmp_path / "odd.jsonl"
    f.write_bytes(b'{"type": ["x"]}\n' + b"[" * 100_000 + b"\n"
                  + b'{"type": "message", "action": ["sent"], "timestamp": 1, "context": {"content": "x"}}\n'
                  + b'{"content": "a good one", "timestamp": 1}\n')
    report = run_files([f], tmp_path / "o.duckdb")
    assert report.frames_created == 1
    assert sum(report.dead_letters.values()) == 3
    con = duckdb.connect(str(tmp_path / "o.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM dead_letters").fetchone() == (3,)


def test_odd_shapes_in_a_transcript_are_dead_lettered(tmp_path: Path) -> None:
    good = next(p for p in SAMPLE_FILES if "claude" in p.name).read_bytes().splitlines()
    bad = b'{"type": "assistant", "sessionId": "s", "uuid": "u9", "timestamp": "2026-11-02T10:00:05Z", ' \
          b'"message": {"id": "m9", "role": "assistant", "content": [{"type": "text", "text": 5}]}}'
    f = tmp_path / "t.jsonl"
    f.write_bytes(b"\n".join([*good[:5], bad, *good[5:]]) + b"\n")
    report = run_files([f], tmp_path / "t.duckdb")
    assert report.dead_letters == Counter({"wrong_shape": 1})
    assert report.frames_created == 4


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (["run", "{sample}", "--batch-size", "0", "--db", "{db}"], {}, "invalid setting batch_size"),
        (["run", "{sample}", "--window-ms", "-5", "--db", "{db}"], {}, "invalid setting window_ms"),
        (["run", "{sample}", "--db", "{db}"], {"HIVESTREAM_WINDOW_MS": "abc"}, "invalid setting window_ms"),
        (["run", "{empty}", "--db", "{db}"], {}, "no .jsonl files"),
        (["query", "totals", "--db", "{sample}"], {}, "cannot read"),
        (["query", "totals", "--db", "{empty}"], {}, "Is a directory"),
    ],
)
def test_user_mistakes_give_one_clear_line(tmp_path: Path, args: list[str], env: dict[str, str], needle: str) -> None:
    import subprocess
    import sys

    (tmp_path / "empty").mkdir()
    fill = {"sample": str(SAMPLE_FILES[0]), "db": str(tmp_path / "x.duckdb"), "empty": str(tmp_path / "empty")}
    res = subprocess.run([sys.executable, "-m", "hivestream", *(a.format(**fill) for a in args)],
                         capture_output=True, text=True, env={**__import__("os").environ, **env}, timeout=120)
    assert res.returncode == 2, res.stderr
    assert needle in " ".join(res.stderr.split())  # rich wraps long paths
    assert "Traceback" not in res.stderr


def test_a_directory_expands_to_its_jsonl_files_and_names_the_others(tmp_path: Path) -> None:
    from hivestream.cli.inputs import expand_jsonl

    d = tmp_path / "in"
    (d / "sub.jsonl").mkdir(parents=True)  # a directory named like a file: walked, never read
    (d / "sub.jsonl" / "b.JSONL").write_text("{}\n")
    (d / "a.jsonl").write_text("{}\n")
    (d / "notes.json").write_text("{}\n")
    given = tmp_path / "given.txt"
    given.write_text("{}\n")
    paths, skipped = expand_jsonl([d, given])
    assert paths == [d / "a.jsonl", d / "sub.jsonl" / "b.JSONL", given]
    assert skipped == [d / "notes.json"]
