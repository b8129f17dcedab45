"""``hivestream report`` without a browser: the page is self-contained, shows "no data yet" on
an empty file, reads the demo file, all three projections, and a Kafka-path file's snapshot while
its writer holds it; ``hivestream demo`` ends by writing it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from hivestream.cli.app import app
from hivestream.report import CHARTS
from projections.frames.projection import FramesBatch, FramesProjection
from projections.frames.schema import DDL
from projections.frames.snapshot import publish_snapshot
from streams.frames.capture import to_capture
from streams.frames.dedup import DedupFold
from streams.model.events import HookEvent
from tests.support.report_fixtures import full_projection

N_CHARTS = len(CHARTS)


def states(page: str) -> dict[str, str]:
    return dict(re.findall(r'<section[^>]*data-chart="([^"]+)" data-state="([^"]+)"', page))


def external_references(page: str) -> list[str]:
    """``src=`` / ``href=`` attributes and CSS ``url(`` in the markup (script bodies left out: the browser
    test watches what the scripts request); the page must have none."""
    markup = re.sub(r"<script>.*?</script>", "<script></script>", page, flags=re.S)
    return re.findall(r'(?:src|href)\s*=\s*["\'][^"\']+|url\(', markup)


def test_every_chart_listed_in_the_issue_is_there() -> None:
    assert N_CHARTS == 10
    keys = {c.__name__ for c in CHARTS}
    assert {"captures_chart", "dup_share_chart", "lag_chart", "whatif_chart", "one_sided_chart", "memory_chart", "stub_hit_chart",
            "stub_similarity_chart", "kb_chart", "dead_letter_chart"} == keys


def test_empty_file_says_no_data_yet(tmp_path: Path) -> None:
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()  # a DuckDB file without any table
    res = CliRunner().invoke(app, ["report", "--db", str(empty), "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "r.html").read_text()
    assert 'id="no-data"' in page and page.count("no data yet") >= N_CHARTS + 2
    assert set(states(page).values()) == {"empty"} and len(states(page)) == N_CHARTS + 2
    # an empty schema (a projector that has not applied anything yet) reads the same
    con = duckdb.connect(str(tmp_path / "schema.duckdb"))
    for stmt in DDL:
        con.execute(stmt)
    con.close()
    assert CliRunner().invoke(app, ["report", "--db", str(tmp_path / "schema.duckdb"), "--out", str(tmp_path / "s.html")]).exit_code == 0
    assert set(states((tmp_path / "s.html").read_text()).values()) == {"empty"}


def test_full_report_is_self_contained(tmp_path: Path) -> None:
    frames, kb, stubs = full_projection(tmp_path)
    out = tmp_path / "full.html"
    res = CliRunner().invoke(app, ["report", "--db", str(frames), "--kb-db", str(kb), "--stubs-db", str(stubs), "--out", str(out)])
    assert res.exit_code == 0, res.output
    page = out.read_text()
    tables = {"top-frames", "memory-use"}
    assert states(page) == {**{k: "plot" for k in states(page) if k not in tables}, **dict.fromkeys(tables, "table")}
    assert len(states(page)) == N_CHARTS + 2
    assert external_references(page) == []
    assert page.count("<script") == 1 + N_CHARTS  # the inlined plotly bundle, then one script per chart, no <script src>
    assert "no data yet" not in page


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["report", "--db", str(tmp_path / "nope.duckdb"), "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "no such DuckDB file" in res.output
    assert not (tmp_path / "r.html").exists()


def test_top_frames_text_is_escaped(tmp_path: Path) -> None:
    log = tmp_path / "x.jsonl"
    log.write_text('{"content": "[hm src:notes event:note] <script>alert(1)</script> & more", "timestamp": 1793617200000}\n')
    db = tmp_path / "x.duckdb"
    assert CliRunner().invoke(app, ["run", str(log), "--db", str(db)]).exit_code == 0
    assert CliRunner().invoke(app, ["report", "--db", str(db), "--out", str(tmp_path / "x.html")]).exit_code == 0
    page = (tmp_path / "x.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page and "<script>alert(1)" not in page


def test_demo_ends_by_writing_the_report(tmp_path: Path) -> None:
    db = tmp_path / "demo.duckdb"
    res = CliRunner().invoke(app, ["demo", "--db", str(db)])
    assert res.exit_code == 0, res.output
    page_path = tmp_path / "demo-report.html"
    assert page_path.exists() and str(page_path.resolve()) in res.output.replace("\n", "")
    st = states(page_path.read_text())
    # the demo has frames, duplicates, a one-sided turn, memory tool calls, KnowHub submissions and dead letters; no stubs
    assert {k for k, v in st.items() if v == "plot"} == {"captures-per-day", "duplicate-share", "capture-lag", "window-whatif",
                                                         "one-sided-turns", "memory-reads-writes", "kb-funnel", "dead-letters"}
    assert {k for k, v in st.items() if v == "empty"} == {"stub-hit-rate", "stub-similarity"}


def test_kafka_path_file_read_from_its_snapshot_while_the_writer_holds_it(tmp_path: Path) -> None:
    """A projection written as the Kafka projector writes it (FramesProjection, no memory_tool_calls table), read from the
    snapshot it publishes while the writer still holds the file, by another process."""
    db = tmp_path / "live.duckdb"
    core = DedupFold(600_000)
    events = []
    for i, (src, t) in enumerate([("openclaw", 0), ("codex", 250), ("codex", 90_000), ("openclaw", 90_350)]):
        ev = HookEvent(event_id=f"e{i}", source=src, event_type="stop", session="openclaw-gateway:c1" if src == "openclaw" else "s1",
                       event_time_ms=1_793_617_200_000 + t, body=f"reply {i // 2}")
        cap = to_capture(ev, partition=0, offset=i)
        assert cap is not None
        events.append(core.process(cap))
    sink = FramesProjection(db)
    try:
        sink.apply(FramesBatch.of_events(events), {("hivestream.frames", 0): 4})
        publish_snapshot(sink, 1_793_617_300_000)
        out = tmp_path / "live.html"
        proc = subprocess.run([sys.executable, "-m", "hivestream", "report", "--db", str(db), "--out", str(out)],
                              capture_output=True, text=True, timeout=120, check=False)
    finally:
        sink.close()
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert "answered from the snapshot" in page
    st = states(page)
    assert st["captures-per-day"] == st["duplicate-share"] == st["capture-lag"] == "plot"
    assert st["memory-reads-writes"] == "empty"  # this projection holds no memory tool call


def test_memory_query_on_a_file_without_the_table_says_why(tmp_path: Path) -> None:
    import duckdb

    from projections.frames.schema import DDL

    db = tmp_path / "k.duckdb"
    con = duckdb.connect(str(db))  # a projection made before memory_tool_calls existed
    for stmt in DDL:
        con.execute(stmt)
    con.close()
    res = CliRunner().invoke(app, ["query", "memory-tool-errors", "--db", str(db)])
    assert res.exit_code == 2 and "no memory_tool_calls table" in res.output
    ok = CliRunner().invoke(app, ["query", "window-whatif", "--db", str(db), "--format", "json"])
    assert ok.exit_code == 0 and ok.stdout.strip().endswith("]")
