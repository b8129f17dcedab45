"""What one record becomes on the KnowHub path, shared by the embedded runner and the Kafka worker (pure).

* :func:`route_kb_record`: a ``hook-events`` record → KnowHub events, extraction requests, or a
  dead letter (bad kb calls only: a record that is not a hook event at all is the frames path's
  dead letter, not this one's).
* :func:`run_extraction`: an extraction request → extracted experience events, through a
  :class:`~streams.experiences.extract.Completer` (the only I/O, injected).

Neither raises: what they raise becomes a dead letter through the :class:`~streams.model.guard.Guard`
of the privacy mode, whose dead letters never hold raw text in strict mode (the detail and the
original are redacted before the :class:`DeadLetter` exists).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial

from streams.experiences.build import build_experience, safe_text
from streams.experiences.events import ExperienceExtracted, ExperienceSubmitted
from streams.experiences.extract import Completer, ExtractionError, keep_confident, parse_answer
from streams.experiences.from_hooks import Derived, ExperienceDeriver, ExtractionRequest
from streams.experiences.settings import ExperienceSettings
from streams.model.deadletter import MAX_ORIGINAL_BYTES, DeadLetter, Reason, RejectedInput
from streams.model.decode import decode_hook_record
from streams.model.events import HookEvent, stable_id
from streams.model.guard import Guard
from streams.model.position import Position
from streams.redaction.redact import RedactionMode
from streams.redaction.scrub import scrub_value


def redact_original(raw: bytes, mode: RedactionMode) -> bytes:
    """``raw`` as a dead letter may keep it: in strict mode a JSON record has every string value
    redacted (escaped text inside JSON would slip past a redaction of the raw text), anything
    else is redacted as UTF-8 text (invalid bytes replaced)."""
    if mode is RedactionMode.RELAXED:
        return raw
    if len(raw) > MAX_ORIGINAL_BYTES:  # the dead letter keeps this much anyway; redact only that
        raw = raw[:MAX_ORIGINAL_BYTES]
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return safe_text(raw.decode("utf-8", "replace"), mode).encode()
    return json.dumps(scrub_value(obj, mode), ensure_ascii=False).encode()


def redacted_dead_letter(err: RejectedInput, raw: bytes, pos: Position, now_ms: int, mode: RedactionMode, event_id: str = "") -> DeadLetter:
    """A dead letter whose detail and original are redacted in strict mode (see :func:`redact_original`)."""
    if len(raw) > MAX_ORIGINAL_BYTES and mode is RedactionMode.STRICT:
        err = RejectedInput(err.reason, f"{err.detail} (original {len(raw)} bytes, truncated to {MAX_ORIGINAL_BYTES})")
    original = redact_original(raw, mode)
    return DeadLetter.of(RejectedInput(err.reason, safe_text(err.detail, mode)), original, pos.topic, pos.partition, pos.offset, now_ms, event_id)


def guard_of(mode: RedactionMode) -> Guard:
    """The KnowHub path's :class:`~streams.model.guard.Guard` in privacy ``mode`` (its dead letters: :func:`redacted_dead_letter`)."""
    return _GUARDS[mode]


def route_kb_record(raw: bytes | None, pos: Position, deriver: ExperienceDeriver, now_ms: int, *, use_record_time: bool = True,
                    report_bad_records: bool = False, decoded: HookEvent | None = None) -> list[Derived | DeadLetter]:
    """What one ``hook-events`` record gives the KnowHub path. Never raises.

    Args:
        use_record_time: a native payload without a time of its own takes ``pos.timestamp_ms``
            (the Kafka record timestamp, as the frames path does); files pass False.
        decoded: ``raw`` decoded already with that time (the worker's frames routing did), not decoded again.
        report_bad_records: dead-letter a record that is no hook event at all (malformed JSON,
            not UTF-8, a bad time, an unknown shape). The worker leaves those to the frames
            path, which dead-letters every such record of ``hook-events`` once; ``kb run``,
            which has no frames path, reports them itself.
    """
    guard = _GUARDS[deriver.settings.privacy_mode]
    data = raw or b""
    try:
        if not data.strip():
            raise RejectedInput(Reason.MALFORMED_JSON, "empty record")
        ev = decoded if decoded is not None else decode_hook_record(data, received_at_ms=pos.timestamp_ms if use_record_time else None)
    except RejectedInput as e:
        return [guard.letter(e, data, pos, now_ms)] if report_bad_records else []
    try:
        return list(deriver.derive(ev))
    except Exception as e:
        return [guard.letter(e, data, pos, now_ms, ev.event_id)]


def run_extraction(req: ExtractionRequest, client: Completer | Callable[[], Completer], settings: ExperienceSettings, pos: Position,
                   now_ms: int) -> list[ExperienceExtracted | DeadLetter]:
    """Call the extractor for ``req`` and build its experiences (confidence > threshold), or one dead letter. Never raises.

    ``client`` is the endpoint's client, or a factory called here (so an endpoint the client
    refuses, e.g. plain HTTP to a remote host, becomes a dead letter instead of a crash). A failed
    call is ``extraction_failed``; the dead letter's original is the request.

    The request's chat payload was redacted when it was built; the answer is redacted again as
    it becomes events. Event ids are ``stable_id(request id, i)`` over the kept items.
    """
    try:
        return list(_extract(req, client, settings))
    except Exception as e:
        return [_GUARDS[settings.privacy_mode].letter(e, req.to_json(), pos, now_ms, req.request_id)]


def _extract(req: ExtractionRequest, client: Completer | Callable[[], Completer], settings: ExperienceSettings) -> Iterator[ExperienceExtracted]:
    try:
        completer = client if hasattr(client, "complete") else client()  # type: ignore[operator]
        items = keep_confident(parse_answer(completer.complete(req.chat)), settings.extraction_threshold)
    except ExtractionError as e:
        raise RejectedInput(Reason.EXTRACTION_FAILED, f"{e.reason}: {e.detail}") from e
    for i, item in enumerate(items):
        ev = build_experience(item.model_dump(), event_id=stable_id(req.request_id, "extracted", i), event_time_ms=req.event_time_ms,
                              settings=settings, extracted_from=req.request_id, model=settings.extraction_model, agent_id=req.agent_id,
                              session_key=req.session_key, source_tool="extractor", runtime="hivestream")
        assert not isinstance(ev, ExperienceSubmitted)
        yield ev


_GUARDS = {mode: Guard("KnowHub", partial(redacted_dead_letter, mode=mode)) for mode in RedactionMode}
