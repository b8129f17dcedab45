"""The privacy test input: every strict-mode case of ``tests/streams/test_redact.py`` (invented personal
details and credentials in realistic experience text) as kb calls from the three runtimes, a kb
search, a bad kb_submit and a finished session; and a scan for the sensitive substrings."""

from __future__ import annotations

import json
from typing import Any

from tests.streams.test_redact import CASES
from tests.support.kb_fixtures import MIN, T0, cc_tool, oc_tool, openclaw, submit


def privacy_lines() -> list[dict[str, Any]]:
    """Hook-event lines carrying every case's text through every KnowHub entry point."""
    out: list[dict[str, Any]] = []
    for i, c in enumerate(CASES):
        t = T0 + 200 * MIN + i * 1000
        args = submit(f"case {c.id}", c.text, c.text)
        if i % 3 == 0:
            out.append(oc_tool(t, f"p-{i}", "agent-p", "kb_submit", args))
        else:
            out.append(cc_tool(t, f"p-{i}", "mcp__knowhub__kb_submit", json.dumps(args) if i % 3 == 2 else args,
                               source="codex" if i % 3 == 2 else "claude-code"))
        out.append(oc_tool(t + 1, f"p-{i}", "agent-p", "kb_search", {"query": c.text}, {"results": []}))
        out.append(oc_tool(t + 2, f"p-{i}", "agent-p", "kb_submit", {"resource": c.text, "result": "no task"}))  # dead-lettered
    out.append({"type": "experience-submitted", "event_id": "direct-privacy", "event_time_ms": T0 + 300 * MIN, "task": "direct",
                "result": " | ".join(c.text for c in CASES[:10]), "agent_id": "human"})
    out.append(openclaw("agent_end", T0 + 301 * MIN, "p-end", "agent-p", messages=[{"role": "user", "content": c.text} for c in CASES[:20]]))
    return out


def secrets() -> set[str]:
    """Every sensitive substring of the cases."""
    return {s for c in CASES for s in c.secrets}


def forms(secret: str) -> list[bytes]:
    """How a secret could appear in bytes: as is, and JSON-escaped (ASCII and UTF-8)."""
    return list({secret.encode(), json.dumps(secret)[1:-1].encode(), json.dumps(secret, ensure_ascii=False)[1:-1].encode()})


def leaks(blob: bytes) -> list[str]:
    """The secrets found in ``blob``."""
    return sorted(s for s in secrets() if any(f in blob for f in forms(s)))
