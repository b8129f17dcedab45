"""What agents got back, in ``kb query`` and the report: searches and recalls per agent, the zero-hit
rates, the time from submission to approval and the reminder conversion."""

from __future__ import annotations

from pathlib import Path

import duckdb

from hivestream.report import Sources, render_html
from projections.experiences.projection import ExperienceBatch, ExperienceProjection
from projections.experiences.queries import KB_QUERIES
from projections.experiences.report_data import memory_kpis, memory_use
from projections.named_query import run_query
from streams.experiences.build import build_experience
from streams.experiences.events import ExperienceReviewed, MemoryRecalled, PluginHookCalled, SearchPerformed
from streams.experiences.fold import ExperienceFold
from streams.experiences.settings import ExperienceSettings

T0 = 1_790_000_000_000


def build(db: Path) -> None:
    fold = ExperienceFold(ExperienceSettings().window)
    s = ExperienceSettings()
    fold.feed(PluginHookCalled(event_id="h1", event_time_ms=T0, session_key="s1", agent_id="a", hook="before_agent_start"))
    fold.feed(PluginHookCalled(event_id="h2", event_time_ms=T0, session_key="s2", agent_id="b", hook="before_agent_start"))
    ev = build_experience({"task": "t", "result": "r"}, event_id="e1", event_time_ms=T0 + 60_000, settings=s, agent_id="a", session_key="s1")
    fold.feed(ev)
    fold.feed(ExperienceReviewed(event_id="r1", event_time_ms=T0 + 31 * 60_000, experience_id="e1", decision="approved", reviewer="lee"))
    for i, hits in enumerate([0, 2, 0, 3]):
        fold.feed(SearchPerformed(event_id=f"q{i}", event_time_ms=T0, agent_id="a" if i < 3 else "b", query="x", hit_count=hits))
    fold.feed(MemoryRecalled(event_id="m1", event_time_ms=T0, agent_id="b", query="y", project="p", hit_count=0))
    with ExperienceProjection(db) as sink:
        sink.apply(ExperienceBatch(fold.drain(), dict(fold.counters)), {})


def test_memory_use_per_agent_and_the_kpis(tmp_path: Path) -> None:
    db = tmp_path / "kb.duckdb"
    build(db)
    with duckdb.connect(str(db), read_only=True) as con:
        cols, rows = memory_use(con)
        assert cols[:3] == ["agent_id", "searches", "search_zero_hit_rate"]
        assert rows == [("a", 3, 0.667, 0, 0, None), ("b", 1, 0.0, 0, 1, 1.0)]
        assert dict(memory_kpis(con)[1]) == {"median minutes from submission to approval": 30.0,
                                             "reminded sessions that submitted": "1 of 2 (50%)"}
        assert run_query(con, "submit-to-approval", KB_QUERIES)[1] == [(1, 30.0, 30.0, 30.0)]
        page = render_html(Sources(con, con, con, []), generated_at_ms=T0)
    assert 'data-chart="memory-use" data-state="table"' in page and "reminded sessions that submitted" in page


def test_an_empty_file_says_so(tmp_path: Path) -> None:
    db = tmp_path / "empty.duckdb"
    duckdb.connect(str(db)).close()
    with duckdb.connect(str(db), read_only=True) as con:
        assert memory_use(con)[1] == [] and memory_kpis(con)[1] == []
        assert 'data-chart="memory-use" data-state="empty"' in render_html(Sources(con, con, con, []), generated_at_ms=T0)
