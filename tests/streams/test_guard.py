"""The guard: bad input becomes the dead letter it names, a bug a logged ``processing_error`` one,
and every pipeline's processing of a record goes through it (it never raises)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

import streams.frames.routing as frames_routing
import streams.stubs.partition as stub_partition
from streams.experiences.extract import ExtractionError
from streams.experiences.from_hooks import ExperienceDeriver, ExtractionRequest
from streams.experiences.routing import route_kb_record, run_extraction
from streams.experiences.settings import ExperienceSettings
from streams.frames.routing import route_record
from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.model.guard import Guard, plain_letter, record_value
from streams.model.position import Position
from streams.redaction.redact import RedactionMode
from streams.settings import Settings
from streams.stubs.partition import StubPartition
from streams.stubs.settings import MatchPolicy

POS = Position("ns.topic", 3, 17, 1_790_000_000_000)
SECRET = "jane.doe@example.com"
STOP = json.dumps({"hook_event_name": "Stop", "session_id": "s1", "last_assistant_message": "done", "ts": 5}).encode()


def test_bad_input_becomes_the_dead_letter_it_names_and_nothing_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        dl = Guard("frames").letter(RejectedInput(Reason.WRONG_SHAPE, "no session"), b"{}", POS, 5, "ev-1")
    assert (dl.reason, dl.detail, dl.event_id, dl.original(), dl.time_ms) == ("wrong_shape", "no session", "ev-1", b"{}", 5)
    assert (dl.source, dl.partition, dl.offset) == ("ns.topic", 3, 17)
    assert caplog.records == []


def test_a_bug_is_a_processing_error_logged_once_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    try:
        1 / 0  # noqa: B018
    except ZeroDivisionError as e:
        with caplog.at_level(logging.DEBUG):
            dl = Guard("stub").letter(e, b"x", POS, 5)
    assert (dl.reason, dl.detail, dl.event_id) == ("processing_error", "ZeroDivisionError: division by zero", "")
    (rec,) = caplog.records
    assert rec.levelno == logging.ERROR and rec.getMessage() == "stub processing error at ns.topic[3]@17"
    assert rec.exc_info is not None and rec.exc_info[0] is ZeroDivisionError


def test_the_guard_makes_its_dead_letters_with_its_pipeline_s_maker() -> None:
    made: list[tuple[Any, ...]] = []

    def maker(err: RejectedInput, data: bytes, pos: Position, now_ms: int, event_id: str = "") -> DeadLetter:
        made.append((err.reason, data, pos, now_ms, event_id))
        return plain_letter(err, b"kept out", pos, now_ms, event_id)

    dl = Guard("x", maker).letter(ValueError("boom"), b"raw", POS, 9, "e")
    assert made == [(Reason.PROCESSING_ERROR, b"raw", POS, 9, "e")] and dl.original() == b"kept out"


@pytest.mark.parametrize("raw", [None, b""])
def test_an_empty_record_value_is_malformed_json(raw: bytes | None) -> None:
    with pytest.raises(RejectedInput) as e:
        record_value(raw)
    assert e.value.reason == Reason.MALFORMED_JSON and "tombstone" in e.value.detail
    assert record_value(b"x") == b"x"


def boom(*_a: object, **_k: object) -> Any:
    raise ZeroDivisionError(f"bug near {SECRET}")


def test_the_frames_routing_dead_letters_a_bug_with_the_event_it_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frames_routing, "capture_outcome", boom)
    ev, res, call = route_record(STOP, POS, Settings(), 1, rules=())
    assert ev is not None and call is None
    assert isinstance(res, DeadLetter) and (res.reason, res.event_id) == ("processing_error", ev.event_id)
    assert res.detail == f"ZeroDivisionError: bug near {SECRET}" and res.original() == STOP


def test_the_stub_partition_dead_letters_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stub_partition, "parse_stub_event", boom)
    (out,) = StubPartition(0, MatchPolicy(), {}).process(b'{"type": "x"}', POS, 1)
    assert isinstance(out, DeadLetter) and out.reason == "processing_error" and out.original() == b'{"type": "x"}'


@pytest.mark.parametrize("mode", list(RedactionMode))
def test_the_knowhub_routing_dead_letters_a_bug_redacted_in_strict_mode(monkeypatch: pytest.MonkeyPatch, mode: RedactionMode) -> None:
    monkeypatch.setattr(ExperienceDeriver, "derive", boom)
    (out,) = route_kb_record(STOP, POS, ExperienceDeriver(ExperienceSettings(privacy_mode=mode)), 1)
    assert isinstance(out, DeadLetter) and out.reason == "processing_error" and out.event_id != ""
    assert (SECRET in out.detail) is (mode is RedactionMode.RELAXED)


class Failing:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def complete(self, chat: list[dict[str, str]]) -> str:
        raise self.exc


@pytest.mark.parametrize(("exc", "reason"), [(ExtractionError("timeout", "no answer in 30 s"), "extraction_failed"),
                                             (ZeroDivisionError("bug"), "processing_error")])
def test_an_extraction_that_fails_is_one_dead_letter_of_its_request(exc: Exception, reason: str) -> None:
    req = ExtractionRequest("req-1", 5, "agent", "session", [{"role": "user", "content": "hi"}])
    (out,) = run_extraction(req, Failing(exc), ExperienceSettings(), POS, 1)
    assert isinstance(out, DeadLetter) and (out.reason, out.event_id) == (reason, "req-1")
    assert json.loads(out.original())["request_id"] == "req-1"
