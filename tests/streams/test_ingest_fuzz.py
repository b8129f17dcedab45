"""A property-based fuzz of the ingest server in process: random bodies, encodings,
NDJSON mixes, number and nesting extremes, wrong and missing tokens. Every answer is a JSON verdict
(never a 500); every accepted payload is a hook event, every refused one a dead letter with a
reason, and the good lines of a mixed request are kept."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivestream.ingest.server import IngestConfig
from streams.ingest.auth import TokenTable, parse_tokens
from streams.model.deadletter import DeadLetter
from tests.support.memory_sink import MemorySink, requests

TOKEN = "fuzz-token-0123456789abcdef"
CFG = IngestConfig(spool_dir=Path(tempfile.gettempdir()) / "unused-spool", tokens=TokenTable(parse_tokens(f"gw-1 {TOKEN}\n")))


def _good(i: int) -> str:
    return json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": f"good {i}", "event_time_ms": 1_790_000_000_000 + i})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**400), max_value=10**400) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=20)

extreme_lines = st.sampled_from([
    '{"hook_event_name": "Stop", "session_id": "s", "event_time_ms": 1e999}',
    '{"hook_event_name": "Stop", "session_id": "s", "ts": -1' + "0" * 40 + "}",
    '{"x": ' + "[" * 5000 + "]" * 5000 + "}",
    '{"s": "\\ud800", "d": ' + "{\"a\":" * 800 + "1" + "}" * 800 + "}",
    '{"n": 1' + "0" * 6000 + "}",
    "NaN", "\u2028", '{"prompt": "a\u2028b"}', "{broken",
])


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, list[bool]]:
    """A body and, for an NDJSON mix, which of its lines are known good (else ``[]``)."""
    kind = draw(st.sampled_from(["bytes", "json", "ndjson"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200)), []
    if kind == "json":
        return json.dumps(draw(json_values)).encode(), []
    lines: list[str] = []
    good: list[bool] = []
    for i in range(draw(st.integers(2, 6))):
        if draw(st.booleans()):
            lines.append(_good(i))
            good.append(True)
        else:
            lines.append(draw(extreme_lines | json_values.map(json.dumps)))
            good.append(False)
    return "\n".join(lines).encode(), good


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(body=bodies(), auth=st.sampled_from(["ok", "none", "wrong"]), encoding=st.sampled_from(["", "gzip", "bad-gzip"]),
       runtime=st.sampled_from(["claude-code", "auto", "codex", "nope"]))
def test_every_answer_is_a_verdict_and_every_payload_is_accounted_for(body: tuple[bytes, list[bool]], auth: str, encoding: str,
                                                                     runtime: str) -> None:
    raw, good = body
    headers = {"Authorization": f"Bearer {TOKEN}" if auth == "ok" else "Bearer wrong-token-0123456789"} if auth != "none" else {}
    data = raw
    if encoding:
        headers["Content-Encoding"] = "gzip"
        data = gzip.compress(raw) if encoding == "gzip" else b"\x1f\x8b not gzip"
    sink = MemorySink()
    [(status, got)] = requests(CFG, sink, [("POST", f"/v1/hooks/{runtime}", data, headers)])
    assert status != 500 and status < 500 and isinstance(got, dict), (status, got)
    events = [v for t, _k, v in sink.records if t.endswith("hook-events")]
    dead = [DeadLetter.model_validate_json(v) for t, _k, v in sink.records if t.endswith("dead-letter")]
    if auth != "ok":
        assert status == 401 and not sink.records
        return
    assert all(d.reason for d in dead)
    if status in (200, 422):
        assert len(events) == got["accepted"] and len(dead) == got["rejected"] == got["dead_lettered"]
        if good and encoding != "bad-gzip" and runtime in ("claude-code", "auto"):
            accepted = {r["index"] for r in got["results"] if r["status"] == "accepted"}
            assert {i for i, g in enumerate(good) if g} <= accepted  # the good lines of a mixed request are kept
    else:
        assert status in (400, 404) and got["dead_lettered"] == 1 and len(dead) == 1 and not events

