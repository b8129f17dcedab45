"""The hardening cases (tests/support/kb_hardening.py) pushed through every KnowHub entry point, and the check
of what came out; used on the embedded runner (tests/streams/test_kb_hardening.py) and on Kafka
(tests/streams/test_kb_kafka_path.py).

Every case text, positive and negative, is submitted with ``kb_submit`` from OpenClaw
(``after_tool_call``), Claude Code (``PostToolUse``, MCP tool name) and Codex (``PostToolUse``
with JSON-string arguments), as a direct KnowHub line, and through extraction (a finished
``agent_end`` session whose local extractor answers with the case's text); the redaction cases are
also searched for (``kb_search``). Each submission's task is ``hardening case h<n> via <entry>``,
so the check can find every one of them in the tables.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import duckdb

from tests.support.kb_fixtures import MIN, T0, cc_tool, oc_tool, openclaw, submit
from tests.support.kb_hardening import INJECTION_CLASSES, REDACTION_CLASSES

ENTRIES = ("openclaw", "claude-code", "codex", "direct", "extraction")
_PER_SESSION = 20  # extraction items per finished session (the extractor accepts at most 50)
_MARK = re.compile(r"hardening case h(\d+)\b")


class Item(NamedTuple):
    """One case text: ``kind`` is ``redact`` or ``inject``; ``expect`` the exact redaction counts
    (redact) or the rule that must flag it (inject; empty for a negative)."""

    n: int
    kind: str
    cls: str
    text: str
    expect: Any


def items() -> list[Item]:
    """Every hardening case, numbered."""
    out: list[Item] = []
    for cls, (rpos, rneg) in REDACTION_CLASSES.items():
        out += [Item(0, "redact", cls, c.text, dict(c.counts)) for c in rpos]
        out += [Item(0, "redact", cls, t, {}) for t in rneg]
    for cls, (ipos, ineg) in INJECTION_CLASSES.items():
        out += [Item(0, "inject", cls, c.text, c.rule) for c in ipos]
        out += [Item(0, "inject", cls, t, "") for t in ineg]
    return [it._replace(n=i) for i, it in enumerate(out)]


def _task(n: int, entry: str) -> str:
    return f"hardening case h{n} via {entry}"


def hardening_lines() -> list[dict[str, Any]]:
    """Hook-event and KnowHub lines carrying every case through every entry point."""
    out: list[dict[str, Any]] = []
    t0 = T0 + 400 * MIN
    all_items = items()
    for it in all_items:
        t = t0 + it.n * 1000
        out.append(oc_tool(t, f"h-oc-{it.n}", "agent-h", "kb_submit", submit(_task(it.n, "openclaw"), it.text)))
        out.append(cc_tool(t + 1, f"h-cc-{it.n}", "mcp__knowhub__kb_submit", submit(_task(it.n, "claude-code"), it.text)))
        out.append(cc_tool(t + 2, f"h-cx-{it.n}", "mcp__knowhub__kb_submit", json.dumps(submit(_task(it.n, "codex"), it.text)), source="codex"))
        out.append({"type": "experience-submitted", "event_id": f"direct-h-{it.n}", "event_time_ms": t + 3, "task": _task(it.n, "direct"),
                    "result": it.text, "agent_id": "human"})
        if it.kind == "redact":
            out.append(oc_tool(t + 4, f"h-oc-{it.n}", "agent-h", "kb_search", {"query": it.text}, {"results": []}))
    for s in range(0, len(all_items), _PER_SESSION):
        chunk = all_items[s : s + _PER_SESSION]
        messages = [{"role": "user", "content": f"hardening case h{it.n}: {it.text}"} for it in chunk]
        out.append(openclaw("agent_end", t0 + 300 * MIN + s, f"h-end-{s}", "agent-h", messages=messages, success=True))
    return out


def extraction_count() -> int:
    """How many extraction requests :func:`hardening_lines` makes."""
    return -(-len(items()) // _PER_SESSION)


def extractor_items(transcript: str) -> list[dict[str, Any]] | None:
    """The local extractor's answer for a hardening session (the case's own text, as a model that
    copies it would answer), or None when ``transcript`` is no hardening session."""
    found = [int(n) for n in _MARK.findall(transcript)]
    if not found:
        return None
    by_n = {it.n: it for it in items()}
    return [{"task": _task(n, "extraction"), "resource": "", "result": by_n[n].text, "confidence": 0.9} for n in dict.fromkeys(found)]


class Outcome(NamedTuple):
    """What the tables hold for one submission."""

    result: str
    status: str
    rules: list[str]
    counts: dict[str, int]


def outcomes(db: Path) -> dict[tuple[int, str], Outcome]:
    """(case number, entry) → the stored submission, its experience's status, rules and counts."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        subs = con.execute(
            "SELECT s.event_id, s.task, s.result, e.status, s.injection_rules FROM experience_submissions s JOIN experiences e USING (experience_id)"
            " WHERE s.task LIKE 'hardening case h%'"
        ).fetchall()
        red: dict[str, dict[str, int]] = {}
        for event_id, kind, n in con.execute("SELECT event_id, kind, n FROM experience_redactions").fetchall():
            red.setdefault(event_id, {})[kind] = n
    finally:
        con.close()
    out: dict[tuple[int, str], Outcome] = {}
    for event_id, task, result, status, rules in subs:
        m = re.fullmatch(r"hardening case h(\d+) via ([\w-]+)", task)
        assert m, task
        out[(int(m.group(1)), m.group(2))] = Outcome(result, status, list(rules), red.get(event_id, {}))
    return out


def search_queries(db: Path) -> list[str]:
    """The stored ``kb_search`` queries of the hardening sessions."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT query FROM kb_telemetry WHERE kind = 'search' AND session_key LIKE 'h-oc-%'").fetchall()]
    finally:
        con.close()


def check(db: Path, *, strict: bool) -> dict[str, dict[str, int]]:
    """Assert every case came out right through every entry point; return per class the number of
    (case, entry) submissions checked as ``{"positive": n, "negative": m}``.

    Strict: a redaction positive keeps none of its secrets and has exactly its counts; a negative
    is stored verbatim with no counts; relaxed mode stores every text verbatim with no counts. An
    injection positive is quarantined with its rule, a negative is not flagged (both modes).
    """
    got = outcomes(db)
    tally: dict[str, dict[str, int]] = {}
    for it in items():
        for entry in ENTRIES:
            o = got.get((it.n, entry))
            assert o is not None, (it, entry)
            side = "positive" if it.expect else "negative"
            tally.setdefault(it.cls, {"positive": 0, "negative": 0})[side] += 1
            if it.kind == "redact":
                want = it.expect if strict else {}
                assert o.counts == want, (it, entry, o)
                assert (o.result == it.text) == (not want), (it, entry, o.result)
                assert o.rules == [], (it, entry, o.rules)
            else:
                if it.expect:
                    assert it.expect in o.rules and o.status == "quarantined", (it, entry, o)
                else:
                    assert o.rules == [] and o.status != "quarantined", (it, entry, o)
                    assert o.result == it.text, (it, entry, o.result)
    queries = search_queries(db)
    redact_items = [it for it in items() if it.kind == "redact"]
    assert len(queries) == len(redact_items)
    for it in redact_items:
        assert (it.text in queries) == (not (strict and it.expect)), it
    return tally
