"""Importers of session files, checked on the generated sessions and on the real corpus (``tests/support/session_sets.py``).

Every test runs on both sets (the corpus one skips where the corpus is absent). Expected counts are
the sets' facts (the generator's record of what it wrote; for the corpus, facts stated in
``shared/corpus/SOURCES.md``) or are derived here from the files independently of the importers:
the Claude Code ``hook_progress`` lines and the hook-event log that recorded the ``hooked`` session
(the corpus's B3) record which hooks really ran, and so serve as oracles.
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
from tests.support.session_sets import SessionSet

Importer = Callable[[Iterable[bytes]], Iterator[tuple[int, bytes, HookEvent | RejectedInput]]]


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


def test_the_hooked_session_gives_exactly_its_typed_prompts(sessions: SessionSet) -> None:
    path = sessions.path("hooked_main")
    prompts = _events(_import(path), "UserPromptSubmit")
    expected = [text for _, text in _typed_prompts(_entries(path))]
    assert len(expected) == sessions.facts.hooked_prompts
    assert [p.body for p in prompts] == expected
    assert {p.session for p in prompts} == {e["sessionId"] for e in _entries(path) if "sessionId" in e}
    assert all(p.event_type == PROMPT for p in prompts)
    assert {p.project for p in prompts} == {"workspace"}


def test_the_hooked_session_stop_count_equals_turns_with_text(sessions: SessionSet) -> None:
    path = sessions.path("hooked_main")
    entries = _entries(path)
    starts = [i for i, _ in _typed_prompts(entries)] + [len(entries)]
    texts = _texts_by_message(entries)
    turns_with_text = sum(
        any(e.get("type") == "assistant" and e["message"]["id"] in texts for e in entries[a:b])
        for a, b in itertools.pairwise(starts)
    )
    stops = _events(_import(path), "Stop")
    assert len(stops) == turns_with_text == sessions.facts.hooked_prompts
    assert len(stops) == sum(e.get("subtype") == "stop_hook_summary" for e in entries)


def test_the_hooked_transcript_agrees_with_its_hook_log(sessions: SessionSet) -> None:
    """The hook log is what a logging hook recorded of the hooked session: same prompts, tools, stops."""
    log = _entries(sessions.path("hook_log"))
    events = _events(_import(sessions.path("hooked_main")))

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


def test_stops_are_one_per_turn_not_per_content_block(sessions: SessionSet) -> None:
    path = sessions.path("split_main")
    entries = _entries(path)
    texts = _texts_by_message(entries)
    text_lines = sum(
        1 for e in entries if e.get("type") == "assistant" and any(b.get("type") == "text" for b in e["message"]["content"])
    )
    stops = _events(_import(path), "Stop")
    assert len({s.raw["message_id"] for s in stops}) == len(stops) == sessions.facts.split_stops
    assert len({body_hash(s.frame_content()) for s in stops}) == len(stops)
    assert all(s.body == texts[s.raw["message_id"]] for s in stops)
    assert text_lines == sessions.facts.split_text_lines and len(texts) < text_lines
    assert stops[1].body.startswith(sessions.facts.split_second_stop)  # ends before the task-notification


MAIN_WITH_STOP_HOOKS = ["split_main", "manual_main", "slash_main", "hooked_main", "snapshot_grown"]
"""Roles whose files record their Stop hooks' runs (``stop_hook_summary`` lines)."""
NO_STOP_PROGRESS = {"hooked_main", "snapshot_grown"}
"""Of those, the files with no ``hook_progress`` line for Stop (B1 and C2: only the summary)."""


@pytest.mark.parametrize("role", MAIN_WITH_STOP_HOOKS)
def test_stops_match_the_stop_hook_runs_recorded_in_the_file(sessions: SessionSet, role: str) -> None:
    entries = _entries(sessions.path(role))
    stops = _events(_import(sessions.path(role)), "Stop")
    assert len(stops) == sum(e.get("subtype") == "stop_hook_summary" for e in entries)
    runs = sorted(_hook_runs(entries, "Stop").values())
    if role in NO_STOP_PROGRESS:
        assert runs == []
        return
    assert len(runs) == len(stops) > 0
    assert all(0 <= run - s.event_time_ms < 10_000 for run, s in zip(runs, stops, strict=True))


@pytest.mark.parametrize("session", ["split", "manual", "slash"])
def test_tool_events_cover_the_tool_hook_runs_recorded_in_the_files(sessions: SessionSet, session: str) -> None:
    paths = sessions.group(session)
    assert paths
    for path in paths:
        entries, items = _entries(path), _import(path)
        for name in ("PreToolUse", "PostToolUse", "PostToolUseFailure"):
            ours = {e.raw["tool_use_id"] for e in _events(items, name)}
            assert set(_hook_runs(entries, name)) <= ours, (path.name, name)
        ours_post = {e.raw["tool_use_id"] for e in _events(items, "PostToolUse")}
        if "-main-" in path.name:  # A1/A4 configure PostToolUse hooks for every tool they use
            assert set(_hook_runs(entries, "PostToolUse")) == ours_post


def test_non_prompts_never_become_prompts(sessions: SessionSet) -> None:
    for path in sessions.claude_transcripts():
        for p in _events(_import(path), "UserPromptSubmit"):
            assert not p.body.lstrip().startswith(("<", "[Request interrupted", "This session is being continued"))
            assert p.parent is None
    slash = _events(_import(sessions.path("slash_main")), "UserPromptSubmit")
    assert tuple(p.body for p in slash) == sessions.facts.slash_prompts  # slash command and interrupt marker skipped


def test_sidechain_files_give_one_subagent_stop_and_no_prompts(sessions: SessionSet) -> None:
    sidechains = [p for p in sessions.claude_transcripts() if not _is_main(p)]
    assert len(sidechains) >= 4
    for path in sidechains:
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


def test_truncated_snapshot_gets_no_stop_until_its_turn_finishes(sessions: SessionSet) -> None:
    first = _events(_import(sessions.path("snapshot_first")))
    grown = _events(_import(sessions.path("snapshot_grown")))
    assert sessions.path("snapshot_grown").read_bytes().startswith(sessions.path("snapshot_first").read_bytes())
    assert [e.native_event for e in first if e.event_type == STOP] == []  # cut during a Bash call
    assert [e for e in grown if e.event_type != STOP][: len(first)] == first  # C1 is a prefix of C2
    assert len([e for e in grown if e.event_type == STOP]) == 1


# ---------------------------------------------------------------- Codex


def test_codex_prompts_are_the_user_message_events_only(sessions: SessionSet) -> None:
    path = sessions.path("codex_compacted")
    prompts = _events(_import(path, import_codex_rollout), "UserPromptSubmit")
    user_messages = _user_messages(path)
    history = [item for p in _payloads(path, "compacted", None) for item in p["replacement_history"]]
    replayed = [item for item in history if item.get("role") == "user"]
    assert len(user_messages) == sessions.facts.codex_user_messages
    assert len(replayed) >= sessions.facts.codex_replayed
    assert len(set(user_messages)) < len(user_messages)  # a prompt text repeated in the session
    assert [p.body for p in prompts] == user_messages
    assert len({p.event_id for p in prompts}) == len(user_messages)  # repeated prompt texts stay distinct events


@pytest.mark.parametrize("role", ["codex_two_turns", "codex_unfinished", "codex_truncated", "codex_compacted"])
def test_codex_prompt_and_stop_counts(sessions: SessionSet, role: str) -> None:
    path = sessions.path(role)
    n_prompts, n_stops = sessions.facts.codex_counts[role]
    items = _import(path, import_codex_rollout)
    stops = _events(items, "Stop")
    assert len(_events(items, "UserPromptSubmit")) == n_prompts
    assert len(stops) == n_stops
    assert [s.body for s in stops] == [p["last_agent_message"] for p in _payloads(path, "event_msg", "task_complete")]
    meta = _entries(path)[0]["payload"]
    assert {e.session for e in _events(items)} == {meta["id"]}


def test_codex_stops_carry_the_last_agent_message(sessions: SessionSet) -> None:
    path = sessions.path("codex_two_turns")
    items = _import(path, import_codex_rollout)
    assert [p.body for p in _events(items, "UserPromptSubmit")] == [sessions.facts.codex_first_prompt, _user_messages(path)[1]]
    stops = _events(items, "Stop")
    completes = _payloads(path, "event_msg", "task_complete")
    assert [s.body for s in stops] == [c["last_agent_message"] for c in completes]
    assert [s.raw["turn_id"] for s in stops] == [c["turn_id"] for c in completes]
    assert {s.project for s in stops} == {sessions.facts.codex_project}


def test_codex_tool_calls_pair_by_call_id(sessions: SessionSet) -> None:
    expected = sessions.facts.codex_calls  # the corpus: SOURCES.md's counts (D2: 1 call without output; D3 ends in a call)
    assert expected["codex_unfinished"][1] == expected["codex_unfinished"][0] - 1 and expected["codex_truncated"] == (1, 0)
    for role, (n_pre, n_post) in expected.items():
        items = _import(sessions.path(role), import_codex_rollout)
        pre, post = _events(items, "PreToolUse"), _events(items, "PostToolUse")
        assert (len(pre), len(post)) == (n_pre, n_post), role
        names = {e.raw["tool_use_id"]: e.raw["tool_name"] for e in pre}
        assert all(names[e.raw["tool_use_id"]] == e.raw["tool_name"] for e in post)


# ---------------------------------------------------------------- all files


def test_import_is_deterministic(sessions: SessionSet) -> None:
    for path in sessions.transcripts():
        first, second = _import(path, _importer_for(path)), _import(path, _importer_for(path))
        assert first == second, path.name
        ids = [e.event_id for e in _events(first)]
        assert len(ids) == len(set(ids)), path.name


def test_event_times_come_from_the_attributed_line_and_raw_stays_small(sessions: SessionSet) -> None:
    for path in sessions.transcripts():
        for _, line, ev in _import(path, _importer_for(path)):
            assert isinstance(ev, HookEvent), (path.name, ev)
            assert ev.event_time_ms == parse_time_ms(json.loads(line)["timestamp"])
            assert len(json.dumps(ev.raw)) < 1000
            assert ev.raw["hook_event_name"] == ev.native_event
            assert ev.body is None or len(ev.body) < 30 or ev.body not in json.dumps(ev.raw)
            assert ev.is_capture == (ev.event_type in CAPTURE_TYPES and ev.body is not None)


@pytest.mark.parametrize(
    ("role", "importer"),
    [("hooked_main", import_claude_transcript), ("codex_two_turns", import_codex_rollout)],
)
def test_bad_lines_are_rejected_and_the_rest_still_imports(sessions: SessionSet, role: str, importer: Importer) -> None:
    path = sessions.path(role)
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


def test_gateway_mirrors_each_main_prompt_and_stop(sessions: SessionSet) -> None:
    for path in sessions.transcripts():
        _check_gateway(path)


def _check_gateway(path: Path) -> None:
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


def test_gateway_leaves_subagent_events_alone(sessions: SessionSet) -> None:
    for path in sessions.claude_transcripts():
        if not _is_main(path):
            plain = _import(path)
            assert list(with_gateway_capture(plain)) == plain


def test_gateway_offsets_are_configurable(sessions: SessionSet) -> None:
    plain = _import(sessions.path("hooked_main"))
    wrapped = _events(with_gateway_capture(plain, received_lead_ms=1000, sent_lag_ms=5))
    prompts, stops = _events(plain, "UserPromptSubmit"), _events(plain, "Stop")
    assert [e.event_time_ms for e in wrapped if e.native_event == "message:received"] == [p.event_time_ms - 1000 for p in prompts]
    assert [e.event_time_ms for e in wrapped if e.native_event == "message:sent"] == [s.event_time_ms + 5 for s in stops]
