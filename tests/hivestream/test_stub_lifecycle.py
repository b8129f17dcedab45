"""The stub lifecycle: a section archived behind a stub (memory.md cut atomically with a backup, the archive appended to),
stubs refreshed per refresh_source (file-watch, script, scheduler-db-query; manual and NULL skipped)."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from hivestream.cli.app import app
from hivestream.services.stub_events import event_log, stub_rows
from hivestream.services.stub_lifecycle import LifecycleError, archive_section, refresh_stubs
from streams.stubs.sections import SectionError, cut_section
from tests.support.embeddings_fake import BowEmbedder, EmbeddingsFake

T0 = 4_000_000_000_000  # 2096: after the test files' own modification times
T1 = T0 + 86_400_000
MEMORY = """# Memory

Intro line.

## Trello API
Board id 5f2a.

### Lists
Mon..Fri.

```
## not a heading (code)
```

## BigQuery
Dataset ads_prod.

## Tone
Short answers.
"""


def test_cut_section() -> None:
    cut = cut_section(MEMORY, "## Trello API")
    assert cut.title == "Trello API"
    assert cut.section.startswith("## Trello API\nBoard id 5f2a.\n\n### Lists\n") and "## not a heading (code)" in cut.section
    assert cut.section.endswith("```\n\n") and "BigQuery" not in cut.section
    assert cut.rest == MEMORY.replace(cut.section, "")
    assert cut_section(MEMORY, "## Tone  ").section == "## Tone\nShort answers.\n"
    with pytest.raises(SectionError, match="no heading"):
        cut_section(MEMORY, "## not a heading (code)")
    with pytest.raises(SectionError, match="occurs 2 times"):
        cut_section(MEMORY + "\n## Tone\nagain\n", "## Tone")
    with pytest.raises(SectionError, match="not a Markdown heading"):
        cut_section(MEMORY, "Tone")


def test_archive_section(tmp_path: Path) -> None:
    memory, db, adir = tmp_path / "memory.md", tmp_path / "s.duckdb", tmp_path / "archived"
    memory.write_text(MEMORY, encoding="utf-8")
    emb = BowEmbedder()
    ticks = iter([1_800_000_000_000, 1_800_000_060_000])
    done = archive_section(db, memory, "## Trello API", adir, "trello boards cards lists", emb, channel="shop", clock=lambda: next(ticks))
    assert done.stub_id == 1 and done.title == "Trello API" and done.archive == (adir / "trello-api.md").resolve()
    assert "Trello" not in memory.read_text(encoding="utf-8") and "## BigQuery" in memory.read_text(encoding="utf-8")
    assert done.backup.read_text(encoding="utf-8") == MEMORY
    first = done.archive.read_text(encoding="utf-8")
    assert first.startswith("## Trello API\nBoard id 5f2a.")
    # the same title again: appended to the archive, never overwritten; the next id of the channel
    memory.write_text("## Trello API\nNew token rules.\n", encoding="utf-8")
    again = archive_section(db, memory, "## Trello API", adir, "trello tokens", emb, channel="shop", clock=lambda: next(ticks))
    assert again.stub_id == 2 and again.archive == done.archive
    assert first.endswith("\n\n") and again.archive.read_text(encoding="utf-8") == first + "## Trello API\nNew token rules.\n"
    assert memory.read_text(encoding="utf-8") == ""
    rows = stub_rows(db, with_vectors=True)
    assert [(r.channel, r.stub_id, r.model, r.dim, r.refresh_source) for r in rows] == [("shop", 1, "fake-bow", 64, "file-watch"),
                                                                                        ("shop", 2, "fake-bow", 64, "file-watch")]
    assert json.loads(rows[0].refresh_spec or "") == {"type": "file-watch", "path": str(done.archive)}
    assert len(event_log(db).read_text(encoding="utf-8").splitlines()) == 2


def test_archive_failures_leave_memory_untouched(tmp_path: Path) -> None:
    memory, db = tmp_path / "memory.md", tmp_path / "s.duckdb"
    memory.write_text(MEMORY, encoding="utf-8")
    with pytest.raises(LifecycleError, match="could not be embedded, nothing was changed"):
        archive_section(db, memory, "## Tone", tmp_path / "a", "tone", BowEmbedder(fail=True))
    with pytest.raises(LifecycleError, match="no heading '## Missing'"):
        archive_section(db, memory, "## Missing", tmp_path / "a", "x", BowEmbedder())
    for bad in ('{"type": "cron"}', '{bad json', '{"type": "script"}'):
        with pytest.raises(LifecycleError, match=r"--refresh-source.*nothing was changed"):
            archive_section(db, memory, "## Tone", tmp_path / "b", "x", BowEmbedder(), refresh_spec=bad)
    assert memory.read_text(encoding="utf-8") == MEMORY and not db.exists()
    assert not (tmp_path / "b").exists()  # no archive appended to by a refused archive


def _stub(db: Path, tmp_path: Path, title: str, spec: str | None, channel: str | None = None) -> int:
    memory = tmp_path / f"{title}.memory.md"
    memory.write_text(f"## {title}\nold content of {title}\n", encoding="utf-8")
    return archive_section(db, memory, f"## {title}", tmp_path / "archived", f"{title} stub", BowEmbedder(), channel=channel,
                           refresh_spec=spec, clock=lambda: T0).stub_id


def test_refresh_per_source(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    sched = tmp_path / "scheduler.db"
    con = sqlite3.connect(sched)
    con.execute("CREATE TABLE jobs (name TEXT, cron TEXT)")
    con.executemany("INSERT INTO jobs VALUES (?, ?)", [("backup", "0 3 * * *"), ("report|weekly", "0 8 * * 1")])
    con.commit()
    con.close()
    archived = tmp_path / "archived"
    _stub(db, tmp_path, "watched", None)  # file-watch of its own archive
    _stub(db, tmp_path, "untouched", None)
    _stub(db, tmp_path, "manual", '{"type": "manual"}')
    _stub(db, tmp_path, "script", json.dumps({"type": "script", "command": [sys.executable, "-c", "print('fresh from script')"]}))
    _stub(db, tmp_path, "query", json.dumps({"type": "scheduler-db-query", "db": str(sched), "query": "SELECT name, cron FROM jobs ORDER BY name"}))
    _stub(db, tmp_path, "writer", json.dumps({"type": "scheduler-db-query", "db": str(sched), "query": "DELETE FROM jobs"}))
    _stub(db, tmp_path, "failing", json.dumps({"type": "script", "command": [sys.executable, "-c", "import sys; sys.exit('boom')"]}))
    _stub(db, tmp_path, "slow", json.dumps({"type": "script", "command": [sys.executable, "-c", "import time; time.sleep(5)"], "timeout_s": 0.3}))
    _stub(db, tmp_path, "other", None, channel="elsewhere")
    (archived / "watched.md").write_text("## watched\nedited by hand\n", encoding="utf-8")
    os.utime(archived / "watched.md", (T0 / 1000 + 60, T0 / 1000 + 60))  # edited after the stub was made
    outcomes, where = refresh_stubs(db, BowEmbedder(), all_channels=True, clock=lambda: T1)
    got = {o.stub: (o.status, o.detail) for o in outcomes}
    assert got["(global)#1"][0] == "refreshed"
    assert got["(global)#2"] == ("unchanged", "content unchanged since the last refresh")
    assert got["(global)#3"] == ("skipped", "refresh_source is manual")
    assert got["(global)#4"][0] == "refreshed" and (archived / "script.md").read_text(encoding="utf-8") == "fresh from script\n"
    assert (archived / "script.md.bak").read_text(encoding="utf-8") == "## script\nold content of script\n"
    assert got["(global)#5"][0] == "refreshed"
    assert (archived / "query.md").read_text(encoding="utf-8") == "| name | cron |\n|---|---|\n| backup | 0 3 * * * |\n| report\\|weekly | 0 8 * * 1 |\n"
    assert got["(global)#6"][0] == "failed" and "readonly" in got["(global)#6"][1]
    assert got["(global)#7"] == ("failed", f"script {sys.executable!r} exited 1: boom")
    assert got["(global)#8"][0] == "failed" and "ran past 0.3 s" in got["(global)#8"][1]
    assert got["elsewhere#1"][0] == "unchanged"
    assert where is not None and "applied" in where
    rows = {(r.channel, r.stub_id): r for r in stub_rows(db)}
    assert rows[(None, 1)].last_refreshed_at_ms == T1 and rows[(None, 2)].last_refreshed_at_ms == T1 and rows[(None, 3)].last_refreshed_at_ms == T0
    assert rows[(None, 7)].last_refreshed_at_ms == T0
    tokens = dict(duckdb.connect(str(db), read_only=True).execute("SELECT title, archive_tokens FROM stubs").fetchall())
    assert tokens["script"] == 5  # ceil(len("fresh from script\n") / 4)


def test_refresh_refuses_another_model_and_unknown_ids(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    _stub(db, tmp_path, "a", None, channel="shop")

    class Other(BowEmbedder):
        model_name = "other-model"

    outcomes, where = refresh_stubs(db, Other(), [1], channel="shop")
    assert outcomes[0].status == "failed" and "embedded with fake-bow, the embedder is other-model" in outcomes[0].detail and where is None
    with pytest.raises(LifecycleError, match="no live stub 7 in channel 'shop'"):
        refresh_stubs(db, BowEmbedder(), [1, 7], channel="shop")


def test_cli_archive_and_refresh_through_an_embeddings_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory, db = tmp_path / "memory.md", tmp_path / "s.duckdb"
    memory.write_text(MEMORY, encoding="utf-8")
    runner = CliRunner()
    with EmbeddingsFake(dim=16) as fake:
        monkeypatch.setenv("HIVESTREAM_EMBED_URL", fake.base_url)
        monkeypatch.setenv("HIVESTREAM_EMBED_MODEL", "fake-endpoint-model")
        monkeypatch.setenv("HIVESTREAM_EMBED_API_KEY", "sk-secret-value")
        r = runner.invoke(app, ["stubs", "archive", "--db", str(db), "--memory-file", str(memory), "--section", "## BigQuery",
                                "--archive-dir", str(tmp_path / "arch"), "--stub-text", "BigQuery datasets and ad tables", "--channel", "shop"])
        assert r.exit_code == 0, r.output
        assert "archived 'BigQuery' as stub 1 of channel shop (embedded with fake-endpoint-model at http://127.0.0.1:" in r.output
        assert "sk-secret-value" not in r.output
        os.utime(tmp_path / "arch" / "bigquery.md", (2e9, 2e9))
        r = runner.invoke(app, ["stubs", "refresh", "--db", str(db), "--channel", "shop", "1"])
        assert r.exit_code == 0, r.output
        assert "1 refreshed, 0 unchanged, 0 skipped, 0 failed" in r.output
        r = runner.invoke(app, ["stubs", "refresh", "--db", str(db)])
        assert r.exit_code == 2 and "give stub ids or --all" in r.output
    assert [q["body"]["input"] for q in fake.requests] == [["BigQuery datasets and ad tables"]] * 2
    assert stub_rows(db)[0].model == "fake-endpoint-model"
    monkeypatch.setenv("HIVESTREAM_EMBED_MODEL", "")
    r = runner.invoke(app, ["stubs", "refresh", "--db", str(db), "--all"])
    assert r.exit_code == 2 and "HIVESTREAM_EMBED_MODEL is not" in r.output
