"""The knowledge base service (:mod:`hivestream.services.experiences`) without a server: its event
lines are what the pipeline applies, a submission's id is predicted from the projection and this
process's recent submissions until the projection has it (the Kafka path), its text is readable by
its writer meanwhile, and each read writes one telemetry line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hivestream.embedded.experiences import run_kb_files
from hivestream.services.experiences import Caller, ExperienceService, ExtractionDisabled, NotFound, ServiceError, title_of
from hivestream.services.readers import SnapshotReader
from streams.experiences.settings import ExperienceSettings

AGENT = Caller(agent_id="a1", session_key="s1")
REVIEWER = Caller(agent_id="lee", reviewer=True)


class FileWriter:
    """Keeps the lines; :meth:`apply` runs them into the file as the pipeline would."""

    def __init__(self, db: Path, work: Path) -> None:
        self.db, self.work, self.lines, self.applied = db, work, [], 0

    async def write(self, lines: Sequence[dict[str, Any]]) -> None:
        self.lines.extend(lines)

    def apply(self) -> None:
        f = self.work / f"lines-{self.applied}.jsonl"
        f.write_text("".join(json.dumps(x) + "\n" for x in self.lines[self.applied:]))
        self.applied = len(self.lines)
        run_kb_files([f], self.db)


def test_the_kafka_path_answers_before_the_projection_has_it(tmp_path: Path) -> None:
    db = tmp_path / "kb.duckdb"
    w = FileWriter(db, tmp_path)
    run_kb_files([], db)
    svc = ExperienceService(SnapshotReader(db, prefer_file=True), w, ExperienceSettings())

    async def go() -> None:
        fields = {"task": "pin the kafka client\nbecause of rebalances", "resource": "aiokafka", "result": "pin 0.11; rebalances stopped"}
        first = await svc.submit(fields, caller=AGENT)
        again = await svc.submit(fields, caller=AGENT)  # not projected yet: this process remembers it
        assert again.id == first.id == first.event_id and first.status == "pending"
        mine = await svc.content(first.id, caller=AGENT)
        assert mine["projected"] is False and mine["title"] == "pin the kafka client"
        w.apply()
        assert (await svc.content(first.id, caller=AGENT))["submit_count"] == 2
        assert await svc.search("kafka rebalances", caller=AGENT) == []  # pending
        await svc.review(first.id, "approved", reviewer="lee")
        w.apply()
        hits = await svc.search("kafka rebalances", caller=AGENT)
        assert [h["id"] for h in hits] == [first.id]
        third = await svc.submit(fields, caller=AGENT)  # projected now: the projection says which experience
        assert (third.id, third.status) == (first.id, "approved")
        with pytest.raises(NotFound):
            await svc.content("nope", caller=AGENT)
        with pytest.raises(NotFound):
            await svc.review("nope", "approved", reviewer="lee")
        with pytest.raises(ServiceError, match="reviewers only"):
            await svc.search("kafka", caller=AGENT, include_quarantined=True)
        with pytest.raises(ExtractionDisabled):
            await svc.extract({"session_key": "s", "messages": [{"role": "user", "content": "x"}]}, caller=AGENT)
        await svc.drain()

    asyncio.run(go())
    kinds = [x["type"] for x in w.lines]
    assert kinds.count("experience-submitted") == 3 and kinds.count("experience-reviewed") == 1
    assert kinds.count("kb-search") == 2 and kinds.count("kb-content") == 3  # the refused search wrote nothing
    assert all(x["agent_id"] == "a1" and x["session_key"] == "s1" for x in w.lines if x["type"] in ("kb-search", "kb-content"))


def test_extraction_requests_become_extraction_when_enabled(tmp_path: Path) -> None:
    db = tmp_path / "kb.duckdb"
    w = FileWriter(db, tmp_path)
    run_kb_files([], db)
    svc = ExperienceService(SnapshotReader(db, prefer_file=True), w, ExperienceSettings(extraction_enabled=True))

    async def go() -> str:
        for bad in ({}, {"session_key": "s"}, {"session_key": "s", "messages": [{"role": 1, "content": "x"}]}):
            with pytest.raises(ServiceError):
                await svc.extract(bad, caller=AGENT)
        return await svc.extract({"session_key": "s", "messages": [{"role": "user", "content": "fix it"}]}, caller=AGENT)

    rid = asyncio.run(go())
    assert w.lines == [{"type": "extraction-requested", "event_id": rid, "event_time_ms": w.lines[0]["event_time_ms"], "session_key": "s",
                        "agent_id": "a1", "messages": [{"role": "user", "content": "fix it"}]}]
    from streams.experiences.from_hooks import ExperienceDeriver, ExtractionRequest
    from streams.model.adapters import adapt

    ev = adapt(w.lines[0], received_at_ms=1_790_000_000_000)
    out = ExperienceDeriver(ExperienceSettings(extraction_enabled=True)).derive(ev)
    assert len(out) == 1 and isinstance(out[0], ExtractionRequest) and out[0].request_id == rid and "fix it" in out[0].chat[1]["content"]
    assert ExperienceDeriver(ExperienceSettings()).derive(ev) == []  # extraction off where the line is applied: nothing


def test_title_is_the_first_line_cut_to_120() -> None:
    assert title_of("  one\ntwo") == "one"
    assert len(title_of("x" * 500)) == 120
