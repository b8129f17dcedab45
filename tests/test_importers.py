"""Importers of real session files, checked against the real corpus (``tests/corpus.py``).

Expected counts come from facts stated in ``shared/corpus/SOURCES.md`` or are derived here from
the files independently of the importers: the Claude Code ``hook_progress`` lines and the fasthooks
hook-event log (B3) record which hooks really ran, and so serve as oracles.
"""

from __future__ import annotations

import collections
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streams.importers.claude_transcript import import_claude_transcript
from streams.importers.codex_rollout import import_codex_rollout
from streams.importers.gateway import with_gateway_capture
from streams.model.adapters.openclaw import adapt_openclaw
from streams.model.body_hash import body_hash
from streams.model.deadletter import Reason, RejectedInput
from streams.model.events import CAPTURE_TYPES, PROMPT, STOP, SUBAGENT_STOP, HookEvent
from streams.model.timeparse import parse_time_ms
from tests.corpus import CORPUS, claude_transcripts, codex_files, corpus_file

pytestmark = pytest.mark.skipif(not (CORPUS / "claude-code").is_dir(), reason=f"no corpus at {CORPUS}")

Importer = Callable[[Iterable[bytes]], Iterator[tuple[int, bytes, HookEvent | RejectedInput]]]


def _claude(prefix: str) -> Path:
    return corpus_file("claude-code", prefix)


def _codex(prefix: str) -> Path:
    return corpus_file("codex", prefix)


def _import(path: Path, importer: Importer = import_claude_transcript) -> list[tuple[int, bytes, Any]]:
    with path.open("rb") as fh:
        return list(importer(fh))


def _events(items: Iterable[tuple[int, bytes, Any]], native: str | None = None) -> list[HookEvent]:
    return [e for _, _, e in items if isinstance(e, HookEvent) and native in (None, e.native_event)]


def _entries(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as fh:
        return [json.loads(line) for line in fh]


def _importer_for(path: Path) -> Importer:
    return import_codex_rollout if path.parent.name == "codex" else import_claude_transcript


def _is_main(path: Path) -> bool:
    return not any(e.get("isSidechain") for e in _entries(path)[:20])


# ---------------------------------------------------------------- independent derivations


def _typed_prompts(entries: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(index, text) of typed prompts: string user content that is no wrapper, meta or summary."""
    out = []
    for i, e in enumerate(entries):
        content = e.get("message", {}).get("content") if e.get("type") == "user" else None
        if not isinstance(content, str) or e.get("isMeta") or e.get("isCompactSummary"):
            continue
        if not content.lstrip().startswith(("<", "[Request interrupted")):
            out.append((i, content))
    return out


def _texts_by_message(entries: list[dict[str, Any]]) -> dict[str, str]:
    """message.id → its non-blank text blocks joined with a blank line, over all its lines."""
    parts: dict[str, list[str]] = collections.defaultdict(list)
    for e in entries:
        if e.get("type") == "assistant":
            for block in e["message"]["content"]:
                if block.get("type") == "text" and block["text"].strip():
                    parts[e["message"]["id"]].append(block["text"])
    return {k: "\n\n".join(v) for k, v in parts.items()}


def _hook_runs(entries: list[dict[str, Any]], hook_event: str) -> dict[str, int]:
    """toolUseID → first time (ms) of the ``hook_progress`` lines of one hook event."""
    runs: dict[str, int] = {}
    for e in entries:
        data = e.get("data") if e.get("type") == "progress" else None
        if isinstance(data, dict) and data.get("type") == "hook_progress" and data.get("hookEvent") == hook_event:
            runs.setdefault(e["toolUseID"], parse_time_ms(e["timestamp"]))
    return runs


def _payloads(path: Path, kind: str, ptype: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in _entries(path) if e["type"] == kind and e["payload"].get("type") == ptype]


def _user_messages(path: Path) -> list[str]:
    return [p["message"] for p in _payloads(path, "event_msg", "user_message")]


# ---------------------------------------------------------------- Claude Code: prompts and stops


def test_fasthooks_gives_exactly_its_five_typed_prompts() -> None:
    path = _claude("fasthooks-c45af7b1-main")
    prompts = _events(_import(path), "UserPromptSubmit")
    expected = [text for _, text in _typed_prompts(_entries(path))]
    assert len(expected) == 5  # SOURCES.md, B1: "5 typed"
    assert [p.body for p in prompts] == expected
    assert all(p.event_type == PROMPT and p.session == "c45af7b1-cb7c-4e51-93db-8cbb250a877a" for p in prompts)
    assert {p.project for p in prompts} == {"workspace"}


def test_fasthooks_stop_count_equals_turns_with_text() -> None:
    path = _claude("fasthooks-c45af7b1-main")
    entries = _entries(path)
    starts = [i for i, _ in _typed_prompts(entries)] + [len(entries)]
    texts = _texts_by_message(entries)
    turns_with_text = sum(
        any(e.get("type") == "assistant" and e["message"]["id"] in texts for e in entries[a:b])
        for a, b in itertools.pairwise(starts)
    )
    stops = _events(_import(path), "Stop")
    assert len(stops) == turns_with_text == 5
    assert len(stops) == sum(e.get("subtype") == "stop_hook_summary" for e in entries)


def test_fasthooks_transcript_agrees_with_its_hook_log() -> None:
    """B3 is what the author's hook logged for the B1 session: same prompts, tools, stops."""
    log = _entries(_claude("fasthooks-c45af7b1-hook-events-log"))
    events = _events(_import(_claude("fasthooks-c45af7b1-main")))

    def logged(name: str) -> list[dict[str, Any]]:
        return [r for r in log if r["event"] == name]

    def ours(name: str) -> list[HookEvent]:
        return [e for e in events if e.native_event == name]

    assert [e.body for e in ours("UserPromptSubmit")] == [r["prompt"] for r in logged("UserPromptSubmit")]
    for name in ("PreToolUse", "PostToolUse"):  # failed tools have no PostToolUse in the log
        assert [e.raw["tool_name"] for e in ours(name)] == [r["tool_name"] for r in logged(name)]
    assert len(ours("Stop")) == len(logged("Stop"))
    assert [e.raw["trigger"] for e in ours("PreCompact")] == [r["trigger"] for r in logged("PreCompact")]
    assert [e.raw["source"] for e in ours("SessionStart")] == [r["source"] for r in logged("SessionStart")]
    for name in ("UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"):
        for ev, rec in zip(ours(name), logged(name), strict=True):
            assert abs(ev.event_time_ms - parse_time_ms(rec["ts"])) < 2000, (name, rec["ts"])


def test_spotter_a1_stops_are_one_per_turn_not_per_content_block() -> None:
    path = _claude("spotter-s1-4d5611e5-main")
    entries = _entries(path)
    texts = _texts_by_message(entries)
    text_lines = sum(
        1 for e in entries if e.get("type") == "assistant" and any(b.get("type") == "text" for b in e["message"]["content"])
    )
    stops = _events(_import(path), "Stop")
    assert len({s.raw["message_id"] for s in stops}) == len(stops) == 3
    assert len({body_hash(s.frame_content()) for s in stops}) == len(stops)
    assert all(s.body == texts[s.raw["message_id"]] for s in stops)
    assert text_lines == 90 and len(texts) < text_lines  # SOURCES.md, A1: 90 text blocks
    assert stops[1].body.startswith("All done. Here's a summary")  # ends before the task-notification


MAIN_WITH_STOP_HOOKS = [
    "spotter-s1-4d5611e5-main",
    "spotter-s2-ae4a77f8-main",
    "spotter-s3",
    "fasthooks-c45af7b1-main",
    "codemie-e9fb405b-snapshot2-first50",
]


@pytest.mark.parametrize("prefix", MAIN_WITH_STOP_HOOKS)
def test_stops_match_the_stop_hook_runs_recorded_in_the_file(prefix: str) -> None:
    entries = _entries(_claude(prefix))
    stops = _events(_import(_claude(prefix)), "Stop")
    assert len(stops) == sum(e.get("subtype") == "stop_hook_summary" for e in entries)
    runs = sorted(_hook_runs(entries, "Stop").values())
    if runs:
        assert len(runs) == len(stops)
        assert all(0 <= run - s.event_time_ms < 10_000 for run, s in zip(runs, stops, strict=True))


@pytest.mark.parametrize("prefix", ["spotter-s1-4d5611e5", "spotter-s2-ae4a77f8", "spotter-s3"])
def test_tool_events_cover_the_tool_hook_runs_recorded_in_the_files(prefix: str) -> None:
    for path in (CORPUS / "claude-code").glob(f"{prefix}*.jsonl"):
        entries, items = _entries(path), _import(path)
        for name in ("PreToolUse", "PostToolUse", "PostToolUseFailure"):
            ours = {e.raw["tool_use_id"] for e in _events(items, name)}
            assert set(_hook_runs(entries, name)) <= ours, (path.name, name)
        ours_post = {e.raw["tool_use_id"] for e in _events(items, "PostToolUse")}
        if "-main-" in path.name:  # A1/A4 configure PostToolUse hooks for every tool they use
            assert set(_hook_runs(entries, "PostToolUse")) == ours_post


def test_non_prompts_never_become_prompts() -> None:
    for path in claude_transcripts():
        for p in _events(_import(path), "UserPromptSubmit"):
            assert not p.body.lstrip().startswith(("<", "[Request interrupted", "This session is being continued"))
            assert p.parent is None
    a7 = _events(_import(_claude("spotter-s3")), "UserPromptSubmit")
    assert [p.body for p in a7] == ["create the beads"]  # slash command and interrupt marker skipped


def test_sidechain_files_give_one_subagent_stop_and_no_prompts() -> None:
    for path in claude_transcripts():
        if _is_main(path):
            continue
        entries = _entries(path)
        sid, agent = entries[0]["sessionId"], entries[0]["agentId"]
        events = _events(_import(path))
        assert not [e for e in events if e.native_event in ("UserPromptSubmit", "SessionStart", "Stop")]
        assert {(e.session, e.parent) for e in events} <= {(f"{sid}:{agent}", sid)}
        stops = [e for e in events if e.event_type == SUBAGENT_STOP]
        if agent.startswith("acompact"):
            assert stops == []  # compaction agents run no SubagentStop hook
            continue
        texts = _texts_by_message(entries)
        last_text_id = [e["message"]["id"] for e in entries if e["type"] == "assistant" and e["message"]["id"] in texts][-1]
        assert [s.body for s in stops] == [texts[last_text_id]]


def test_truncated_snapshot_gets_no_stop_until_its_turn_finishes() -> None:
    first = _events(_import(_claude("codemie-e9fb405b-snapshot1-first25")))
    grown = _events(_import(_claude("codemie-e9fb405b-snapshot2-first50")))
    assert [e.native_event for e in first if e.event_type == STOP] == []  # cut during a Bash call
    assert [e for e in grown if e.event_type != STOP][: len(first)] == first  # C1 is a prefix of C2
    assert len([e for e in grown if e.event_type == STOP]) == 1


# ---------------------------------------------------------------- Codex


def test_codex_d1_prompts_are_the_user_message_events_only() -> None:
    path = _codex("localpush-long-33turns")
    prompts = _events(_import(path, import_codex_rollout), "UserPromptSubmit")
    user_messages = _user_messages(path)
    history = [item for p in _payloads(path, "compacted", None) for item in p["replacement_history"]]
    replayed = [item for item in history if item.get("role") == "user"]
    assert len(user_messages) == 38  # SOURCES.md, D1
    assert len(replayed) >= 19
    assert [p.body for p in prompts] == user_messages
    assert len({p.event_id for p in prompts}) == 38  # repeated prompt texts stay distinct events


@pytest.mark.parametrize(
    ("prefix", "n_prompts", "n_stops"),
    [("codemie-cli-2turns", 2, 2), ("localpush-7turns", 7, 5), ("localpush-truncated", 1, 0), ("localpush-long", 38, 33)],
)
def test_codex_prompt_and_stop_counts(prefix: str, n_prompts: int, n_stops: int) -> None:
    path = _codex(prefix)
    items = _import(path, import_codex_rollout)
    stops = _events(items, "Stop")
    assert len(_events(items, "UserPromptSubmit")) == n_prompts
    assert len(stops) == n_stops
    assert [s.body for s in stops] == [p["last_agent_message"] for p in _payloads(path, "event_msg", "task_complete")]
    meta = _entries(path)[0]["payload"]
    assert {e.session for e in _events(items)} == {meta["id"]}


def test_codex_e1_stops_carry_the_last_agent_message() -> None:
    path = _codex("codemie-cli-2turns")
    items = _import(path, import_codex_rollout)
    assert [p.body for p in _events(items, "UserPromptSubmit")] == ["show tools", _user_messages(path)[1]]
    stops = _events(items, "Stop")
    completes = _payloads(path, "event_msg", "task_complete")
    assert [s.body for s in stops] == [c["last_agent_message"] for c in completes]
    assert [s.raw["turn_id"] for s in stops] == [c["turn_id"] for c in completes]
    assert {s.project for s in stops} == {"codemie-code"}


def test_codex_tool_calls_pair_by_call_id() -> None:
    expected = {
        "codemie-cli-2turns": (102, 102),  # SOURCES.md: 102 calls, all with outputs
        "localpush-7turns": (144, 143),  # 144 calls, 1 without output
        "localpush-long": (365, 365),
        "localpush-truncated": (1, 0),  # ends with a call that has no output
    }
    for prefix, (n_pre, n_post) in expected.items():
        items = _import(_codex(prefix), import_codex_rollout)
        pre, post = _events(items, "PreToolUse"), _events(items, "PostToolUse")
        assert (len(pre), len(post)) == (n_pre, n_post), prefix
        names = {e.raw["tool_use_id"]: e.raw["tool_name"] for e in pre}
        assert all(names[e.raw["tool_use_id"]] == e.raw["tool_name"] for e in post)


# ---------------------------------------------------------------- all files


def _all_files() -> list[Path]:
    return claude_transcripts() + codex_files()


def test_import_is_deterministic() -> None:
    for path in _all_files():
        first, second = _import(path, _importer_for(path)), _import(path, _importer_for(path))
        assert first == second, path.name
        ids = [e.event_id for e in _events(first)]
        assert len(ids) == len(set(ids)), path.name


def test_event_times_come_from_the_attributed_line_and_raw_stays_small() -> None:
    for path in _all_files():
        for _, line, ev in _import(path, _importer_for(path)):
            assert isinstance(ev, HookEvent), (path.name, ev)
            assert ev.event_time_ms == parse_time_ms(json.loads(line)["timestamp"])
            assert len(json.dumps(ev.raw)) < 1000
            assert ev.raw["hook_event_name"] == ev.native_event
            assert ev.body is None or len(ev.body) < 30 or ev.body not in json.dumps(ev.raw)
            assert ev.is_capture == (ev.event_type in CAPTURE_TYPES and ev.body is not None)


@pytest.mark.parametrize(
    ("prefix", "importer"),
    [("fasthooks-c45af7b1-main", import_claude_transcript), ("codemie-cli-2turns", import_codex_rollout)],
)
def test_bad_lines_are_rejected_and_the_rest_still_imports(prefix: str, importer: Importer) -> None:
    path = _codex(prefix) if importer is import_codex_rollout else _claude(prefix)
    lines = path.read_bytes().splitlines(keepends=True)
    bad = {
        10: (b"{not json\n", Reason.MALFORMED_JSON),
        20: (b"\xff\xfe\n", Reason.NOT_UTF8),
        30: (b"[1, 2]\n", Reason.WRONG_SHAPE),
    }
    mixed = list(lines)
    for at in sorted(bad):
        mixed.insert(at, bad[at][0])
    items = list(importer(mixed))
    rejected = {off: item.reason for off, _, item in items if isinstance(item, RejectedInput)}
    assert rejected == {at: reason for at, (_, reason) in bad.items()}
    assert all(line == mixed[off] for off, line, _ in items)
    assert _events(items) == _events(importer(lines))


# ---------------------------------------------------------------- gateway


@pytest.mark.parametrize("path", _all_files() if CORPUS.is_dir() else [], ids=lambda p: p.name[:40])
def test_gateway_mirrors_each_main_prompt_and_stop(path: Path) -> None:
    plain = _import(path, _importer_for(path))
    wrapped = list(with_gateway_capture(iter(plain), received_lead_ms=250, sent_lag_ms=350))
    backend = [(o, ln, e) for o, ln, e in wrapped if e.source != "openclaw"]
    assert backend == plain
    main = [e for e in _events(plain) if e.parent is None]
    received, sent = _events(wrapped, "message:received"), _events(wrapped, "message:sent")
    assert len(received) == len([e for e in main if e.event_type == PROMPT])
    assert len(sent) == len([e for e in main if e.event_type == STOP and e.body is not None])
    events = _events(wrapped)
    for i, ev in enumerate(events):
        if ev.native_event == "message:received":
            _check_mirror(ev, events[i + 1], -250)
        elif ev.native_event == "message:sent":
            _check_mirror(ev, events[i - 1], 350)
    ids = [e.event_id for e in events]
    assert len(ids) == len(set(ids))


def _check_mirror(gw: HookEvent, backend: HookEvent, shift: int) -> None:
    assert backend.parent is None and backend.source in ("claude-code", "codex")
    assert gw.event_type == backend.event_type and gw.event_type in (PROMPT, STOP)
    assert body_hash(gw.frame_content()) == body_hash(backend.frame_content())
    assert gw.event_time_ms == backend.event_time_ms + shift
    channel = "gw-" + backend.session[:8]
    assert gw.session == f"openclaw-gateway:{channel}"
    assert "content" not in gw.raw["context"] and gw.raw["context"]["channelId"] == channel
    payload = {**gw.raw, "context": {**gw.raw["context"], "content": backend.body}}
    assert gw == adapt_openclaw(payload, gw.event_time_ms).model_copy(update={"raw": gw.raw})


def test_gateway_leaves_subagent_events_alone() -> None:
    for path in claude_transcripts():
        if not _is_main(path):
            plain = _import(path)
            assert list(with_gateway_capture(plain)) == plain


def test_gateway_offsets_are_configurable() -> None:
    plain = _import(_claude("fasthooks-c45af7b1-main"))
    wrapped = _events(with_gateway_capture(plain, received_lead_ms=1000, sent_lag_ms=5))
    prompts, stops = _events(plain, "UserPromptSubmit"), _events(plain, "Stop")
    assert [e.event_time_ms for e in wrapped if e.native_event == "message:received"] == [p.event_time_ms - 1000 for p in prompts]
    assert [e.event_time_ms for e in wrapped if e.native_event == "message:sent"] == [s.event_time_ms + 5 for s in stops]
