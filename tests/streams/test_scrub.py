"""The KnowHub scrub (streams.redaction.scrub): one walk, idempotent, counted where it should be,
and nothing of a payload kept unredacted by its shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streams.kafka.topics import partition_for
from streams.model.deadletter import RejectedInput
from streams.model.events import HookEvent
from streams.redaction.redact import RedactionMode, redact
from streams.redaction.scrub import COUNTS_KEY, MAX_SCRUB_CHARS, TOO_DEEP, prior_counts, scrub_kb_event, scrub_value
from tests.streams.test_redact import CASES

STRICT = RedactionMode.STRICT
SECRET = CASES[0].text  # a redaction case with at least one secret in it


def event(source: str, native: str, raw: dict[str, Any]) -> HookEvent:
    return HookEvent(schema_version=1, event_id="e1", source=source, event_type="x", native_event=native, session="s1",
                     event_time_ms=1_790_000_000_000, raw=raw)


def kb_line(**fields: Any) -> HookEvent:
    return event("knowhub", "experience-submitted", {"type": "experience-submitted", "event_id": "e1", **fields})


def test_the_secret_case_has_a_secret() -> None:
    assert redact(SECRET).total > 0 and redact(SECRET).text != SECRET


def test_scrub_twice_equals_scrub_once_for_every_redaction_case() -> None:
    for case in CASES:
        ev = kb_line(task=case.text, resource=[case.text, {"k": case.text}], result="r", note=case.text)
        once = scrub_kb_event(ev, STRICT)
        assert scrub_kb_event(once, STRICT) == once, case.text


def test_experience_fields_are_counted_and_other_fields_are_redacted_uncounted() -> None:
    ev = kb_line(task=SECRET, resource="plain", result="plain", note=SECRET)
    raw = scrub_kb_event(ev, STRICT).raw or {}
    expected = redact(SECRET)
    assert raw["task"] == expected.text and raw["note"] == expected.text
    assert raw[COUNTS_KEY] == dict(sorted(expected.counts.items()))  # the note's replacements are not counted


def test_a_long_string_is_cut_once_and_its_marker_survives_a_second_scrub() -> None:
    long = "a" * (MAX_SCRUB_CHARS + 1000)
    once = scrub_kb_event(kb_line(task="t", resource="r", result=long), STRICT)
    text = (once.raw or {})["result"]
    assert text == "a" * MAX_SCRUB_CHARS + " [truncated: 1000 more characters]"
    assert scrub_kb_event(once, STRICT) == once
    # a string that only looks cut at another length is cut again
    odd = "b" * (MAX_SCRUB_CHARS + 5) + " [truncated: 9 more characters]"
    assert scrub_value(odd, STRICT).startswith("b" * MAX_SCRUB_CHARS + " [truncated: ")
    assert scrub_value(odd, STRICT) != odd


def test_a_nested_counts_key_is_redacted_like_any_other_field() -> None:
    ev = event("claude-code", "PostToolUse", {"tool_name": "mcp__kb__kb_search", "tool_input": {"query": "q", COUNTS_KEY: SECRET},
                                              "tool_response": {COUNTS_KEY: [SECRET]}})
    out = json.dumps(scrub_kb_event(ev, STRICT).raw)
    assert redact(SECRET).text in out and json.dumps(SECRET)[1:-1] not in out


@pytest.mark.parametrize("forged", [SECRET, [SECRET], {SECRET: 1, "email": "x"}, {"email": True}, 7])
def test_malformed_carried_counts_are_dropped_not_copied(forged: Any) -> None:
    ev = kb_line(task="t", resource="r", result="r")
    ev = ev.model_copy(update={"raw": {**(ev.raw or {}), COUNTS_KEY: forged}})
    raw = scrub_kb_event(ev, STRICT).raw or {}
    counts = raw[COUNTS_KEY]
    assert all(isinstance(v, int) and v > 0 for v in counts.values())
    assert SECRET not in json.dumps(raw) and SECRET not in counts


def test_carried_counts_add_to_the_new_ones() -> None:
    ev = kb_line(task=SECRET, resource="r", result="r")
    ev = ev.model_copy(update={"raw": {**(ev.raw or {}), COUNTS_KEY: {"email": 2, "zz_unknown": 3}}})
    counts = (scrub_kb_event(ev, STRICT).raw or {})[COUNTS_KEY]
    expected = dict(redact(SECRET).counts)
    expected["email"] = expected.get("email", 0) + 2
    assert counts == dict(sorted(expected.items()))  # the unknown kind is dropped


def test_codex_json_string_arguments_are_redacted_inside_and_as_text() -> None:
    args = json.dumps({"query": SECRET, "n": 3})
    ev = event("codex", "PostToolUse", {"tool_name": "kb_search", "tool_input": args})
    out = (scrub_kb_event(ev, STRICT).raw or {})["tool_input"]
    assert json.loads(out) == {"query": redact(SECRET).text, "n": 3}


def test_subclasses_and_tuples_are_walked_too() -> None:
    class S(str):
        pass

    assert scrub_value({"a": (S(SECRET), 1)}, STRICT) == {"a": [redact(SECRET).text, 1]}
    assert scrub_value([None, True, 1.5, SECRET], STRICT) == [None, True, 1.5, redact(SECRET).text]


def test_relaxed_keeps_the_payload() -> None:
    ev = kb_line(task=SECRET, resource="r", result="r")
    assert scrub_kb_event(ev, RedactionMode.RELAXED) is ev


@pytest.mark.parametrize("partitions", [1, 4, 7])
def test_partition_for_is_kafkas_default_partitioner_for_short_and_long_keys(partitions: int) -> None:
    from kafka.partitioner.default import murmur2

    for key in [b"", b"s1", b"openclaw-gateway:c1", b"k" * 256, b"k" * 257, b"x" * 5000]:
        for _ in range(2):  # the second call is the remembered one
            assert partition_for(key, partitions) == (murmur2(key) & 0x7FFFFFFF) % partitions


@pytest.mark.parametrize("hook", ["before_agent_start", "before_prompt_build", "agent_end"])
def test_a_plugin_hook_record_scrubs_only_the_ctx_and_equals_the_fully_scrubbed_one(hook: str) -> None:
    from streams.experiences.from_hooks import ExperienceDeriver
    from streams.experiences.settings import ExperienceSettings

    ev = event("openclaw", hook, {"hook": hook, "ctx": {"agentId": SECRET, "sessionKey": "k " + SECRET}, "event": {"prompt": SECRET, "messages": []}})
    deriver = ExperienceDeriver(ExperienceSettings())
    (rec,) = deriver.derive(ev)
    assert rec.model_dump() == deriver.derive(scrub_kb_event(ev, STRICT))[0].model_dump()  # what scrubbing the payload first gives
    assert rec.agent_id == redact(SECRET).text and SECRET not in rec.model_dump_json()  # type: ignore[union-attr]
    assert rec.session_key == redact("k " + SECRET).text  # type: ignore[union-attr]


def test_a_secret_under_the_counts_key_stays_out_of_a_memory_call_record() -> None:
    from streams.memory_calls.tool_calls import memory_call

    ev = event("claude-code", "PostToolUse", {"tool_name": "mcp__kb__kb_search", "tool_input": {"query": "q", COUNTS_KEY: SECRET}, "tool_response": {}})
    call = memory_call(ev)
    assert call is not None and call.arguments is not None
    assert redact(SECRET).text in json.loads(call.arguments)[COUNTS_KEY] and SECRET not in call.to_json().decode()


def test_long_strings_with_secrets_and_strings_that_grow_are_cut_once() -> None:
    """A secret inside the first 65,536 characters changes the body's length; a string under the
    bound can grow past it when redacted: a second scrub changes neither."""
    texts = [c.text + " " + "a" * (MAX_SCRUB_CHARS + 100) for c in CASES] + [("a@b.io " * 9362)[: MAX_SCRUB_CHARS - 2]]
    for text in texts:
        once = scrub_value(text, STRICT)
        assert len(once) <= MAX_SCRUB_CHARS + 42 and scrub_value(once, STRICT) == once
        assert once.endswith(" more characters]")
    for c in CASES:  # nothing of a secret before the cut survives, and the counts are the body's
        ev = kb_line(task=c.text + " " + "a" * (MAX_SCRUB_CHARS + 5), resource="r", result="r")
        raw = scrub_kb_event(ev, STRICT).raw or {}
        assert not any(x in raw["task"] for x in c.secrets), c.id
        assert scrub_kb_event(scrub_kb_event(ev, STRICT), STRICT).raw == raw


def _grown(text: str) -> str:
    """What the scrub gives a string under the bound whose redaction is longer than the bound: the
    redacted text cut at the bound, with a marker counting the rest (the scrub's output before it
    stopped redacting such a string twice, checked against that code when this test was written)."""
    full = redact(text).text
    assert len(text) <= MAX_SCRUB_CHARS < len(full)
    return full[:MAX_SCRUB_CHARS] + f" [truncated: {len(full) - MAX_SCRUB_CHARS} more characters]"


def test_a_short_string_that_grows_past_the_bound_is_cut_from_its_one_redaction() -> None:
    """The redacted text cut at the bound (here inside a placeholder) and marked, the replacements
    counted once, and a second scrub a no-op; one growing case per kind of redaction."""
    emails = "a@b.io " * 9362  # 65,534 characters; 159,154 once redacted
    assert scrub_value(emails, STRICT) == ("[REDACTED:email] " * 9362)[:MAX_SCRUB_CHARS] + " [truncated: 93618 more characters]"
    texts = [emails, "x" * 8 + "a@b.io " * 9361, "a@b.io " * 3855 + "zzz"]
    for kind in sorted({k for c in CASES for k in c.counts}):
        case = next((c for c in CASES if kind in c.counts and len(redact(c.text).text) > 1.01 * len(c.text)), None)
        if case is not None:
            texts.append(((case.text + " ") * (MAX_SCRUB_CHARS // (len(case.text) + 1)))[: MAX_SCRUB_CHARS - 1])
    assert len(texts) >= 7
    for text in texts:
        once = scrub_kb_event(kb_line(task=text, resource="r", result="r"), STRICT)
        raw = once.raw or {}
        assert raw["task"] == _grown(text)
        assert raw[COUNTS_KEY] == dict(sorted(redact(text).counts.items()))  # counted once
        assert scrub_kb_event(once, STRICT) == once and scrub_value(raw["task"], STRICT) == raw["task"]


def test_a_fake_marker_neither_lifts_the_bound_nor_keeps_a_card_number() -> None:
    huge = "h" * MAX_SCRUB_CHARS + " [truncated: " + "1" * 2_000_000 + " more characters]"
    assert len(scrub_value(huge, STRICT)) <= MAX_SCRUB_CHARS + 42
    card = "x [truncated: 4111111111111111 more characters]"
    assert "4111111111111111" not in scrub_value(card, STRICT)
    short = "see above [truncated: 12 more characters]"  # a marker-like ending of a short text is kept
    assert scrub_value(short, STRICT) == short == scrub_value(scrub_value(short, STRICT), STRICT)


def test_a_str_enum_is_redacted_by_its_characters() -> None:
    from enum import Enum

    class Address(str, Enum):  # noqa: UP042 - str() of this kind of enum is its name, not its value
        A = "bob@example.com"

    assert scrub_value({"to": Address.A}, STRICT) == {"to": redact("bob@example.com").text}


def test_a_payload_nested_too_deeply_is_rejected_not_a_crash() -> None:
    deep: Any = SECRET
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(RejectedInput) as err:
        scrub_kb_event(kb_line(task="t", resource="r", result="r", note=deep), STRICT)
    assert err.value.reason.value == "wrong_shape"
    assert scrub_value(deep, STRICT) == TOO_DEEP


def test_odd_shapes_of_keys_and_payloads_do_not_raise() -> None:
    assert partition_for(bytearray(b"k"), 3) == partition_for(b"k", 3)
    assert prior_counts(["x"]) == {} and prior_counts(None) == {}  # type: ignore[arg-type]


def test_a_token_across_the_cut_leaves_nothing_of_itself() -> None:
    tokens = {x for c in CASES for x in c.secrets if len(x) >= 12 and not any(ch.isspace() for ch in x)}
    assert len(tokens) >= 20
    for tok in tokens:
        half = len(tok) // 2
        text = "a" * (MAX_SCRUB_CHARS - half - 1) + " " + tok + " and more text after it"
        out = scrub_value(text, STRICT)
        assert tok[:half] not in out and scrub_value(out, STRICT) == out, tok
        assert out.endswith(f" [truncated: {len(text) - (MAX_SCRUB_CHARS - half - 1)} more characters]")


@pytest.mark.parametrize("raw", [{"event": "x", "ctx": []}, {"event": ["x"], "ctx": "y"}, {"event": None}])
def test_odd_event_and_ctx_shapes_give_no_record_not_a_crash(raw: dict[str, Any]) -> None:
    from streams.experiences.from_hooks import ExperienceDeriver
    from streams.experiences.settings import ExperienceSettings

    deriver = ExperienceDeriver(ExperienceSettings(extraction_enabled=True))
    assert deriver.derive(event("openclaw", "after_tool_call", raw)) == []
    (hook,) = deriver.derive(event("openclaw", "agent_end", raw))  # the hook's record, no extraction request
    assert hook.hook == "agent_end"  # type: ignore[union-attr]
