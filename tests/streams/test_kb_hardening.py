"""The KnowHub hardening cases on the embedded runner: every case of tests/support/kb_hardening.py through every KnowHub entry
point (kb_submit from OpenClaw, Claude Code and Codex, a direct line, extraction, kb_search) comes
out redacted / flagged exactly as the unit tests say, in strict mode; relaxed mode keeps the text."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivestream.embedded.experiences import run_kb_files
from streams.experiences.extract import ChatClient
from streams.experiences.settings import ExperienceSettings
from streams.redaction.redact import RedactionMode
from tests.support.kb_fixtures import extractor_script, write_lines
from tests.support.kb_hardening_lines import ENTRIES, check, extraction_count, hardening_lines, items
from tests.support.kb_privacy import leaks
from tests.support.openai_stub_server import OpenAIStubServer


@pytest.mark.parametrize("mode", [RedactionMode.STRICT, RedactionMode.RELAXED])
def test_every_case_through_every_entry_point(tmp_path: Path, mode: RedactionMode) -> None:
    log = write_lines(tmp_path / "hooks.jsonl", hardening_lines())
    db = tmp_path / "kb.duckdb"
    with OpenAIStubServer(extractor_script) as server:
        settings = ExperienceSettings(privacy_mode=mode, extraction_enabled=True, extraction_base_url=server.base_url, require_approval=False)
        with ChatClient(server.base_url, "stub-model") as client:
            rep = run_kb_files([log], db, settings, completer=client)
        sent = b"".join(r.body for r in server.requests)
    assert rep.extraction_requests == extraction_count() and sum(rep.dead_letters.values()) == 0
    tally = check(db, strict=mode is RedactionMode.STRICT)
    for cls, n in tally.items():  # >= 10 positives and >= 10 negatives per class, each through every entry point
        assert n["positive"] >= 10 * len(ENTRIES) and n["negative"] >= 10 * len(ENTRIES), cls
    assert sum(n["positive"] + n["negative"] for n in tally.values()) == len(items()) * len(ENTRIES)
    if mode is RedactionMode.STRICT:
        assert leaks(sent) == []  # the transcripts went to the extractor redacted
    else:
        assert leaks(sent) != []
