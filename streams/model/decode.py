"""Raw record bytes → HookEvent: the validation step in front of the dedup core.

Used for every ``hook-events`` record and every line of a hook-event JSONL file. A record is
either a serialised :class:`~streams.model.events.HookEvent` (it has ``schema_version``) or a native
hook payload, which goes through :func:`streams.model.adapters.adapt`.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from pydantic import ValidationError

from streams.model import fastpath
from streams.model.adapters import adapt
from streams.model.adapters.openclaw_plugin import KB_EVENT_TYPES
from streams.model.deadletter import Reason, RejectedInput
from streams.model.events import SCHEMA_VERSION, HookEvent
from streams.model.jsstring import to_js_utf16


def sanitize_surrogates(value: Any) -> Any:
    """Replace lone surrogates in every string of a parsed JSON value with U+FFFD.

    A ``\\ud800`` escape in JSON is valid JSON; Node reads it as a lone UTF-16 code unit and
    hashes it as U+FFFD, so hivestream treats it the same (parity with hive-mind's hash). Returns a new value;
    dict keys are sanitised too.
    """
    if isinstance(value, str):
        return to_js_utf16(value)
    if isinstance(value, list):
        return [sanitize_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {to_js_utf16(k): sanitize_surrogates(v) for k, v in value.items()}
    return value


# bytes.translate table: every ASCII digit to "0", every other byte to "x"
_DIGITS_TO_ZERO = bytes(48 if 48 <= b <= 57 else 120 for b in range(256))
_LONG_NUMBER = b"0" * 19


def _orjson_object(raw: bytes) -> dict[str, Any] | None:
    """``raw`` parsed by orjson when that is certain to equal the standard-library result, else None.

    orjson rejects what ``json.loads`` rejects, but it also rejects lone surrogate escapes, NaN,
    Infinity and numbers out of double range (which ``json`` accepts: those lines go the slow way),
    and it reads an integer beyond 64 bits as a float where ``json`` keeps an ``int``: a line with
    19 or more digits in a row goes the slow way too (a false positive only costs time).
    """
    if type(raw) is not bytes or _LONG_NUMBER in raw.translate(_DIGITS_TO_ZERO):
        return None  # (a bytearray or memoryview takes the standard path as before)
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return obj if type(obj) is dict else None


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """Decode ``raw`` as strict UTF-8 JSON holding one object.

    The fast path (:mod:`streams.model.fastpath`) parses with orjson and falls back to ``json.loads``
    for anything orjson would read differently or reject, so the result and the rejection reason
    and text are the standard library's.

    Raises:
        RejectedInput: ``not_utf8``, ``malformed_json`` or ``wrong_shape`` (not an object).
    """
    if fastpath.ENABLED:
        fast = _orjson_object(raw)
        if fast is not None:
            return fast
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RejectedInput(Reason.NOT_UTF8, f"record is not valid UTF-8: {e}") from e
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as e:  # ValueError: JSONDecodeError, and an integer past Python's 4,300-digit limit
        raise RejectedInput(Reason.MALFORMED_JSON, f"record is not JSON: {e}") from e
    if not isinstance(obj, dict):
        raise RejectedInput(Reason.WRONG_SHAPE, f"record must be a JSON object, got {type(obj).__name__}")
    if "\\ud" in text or "\\uD" in text:
        clean: dict[str, Any] = sanitize_surrogates(obj)
        return clean
    return obj


def validate_hook_event(obj: dict[str, Any]) -> HookEvent:
    """Validate a serialised HookEvent object.

    Raises:
        RejectedInput: ``unknown_schema_version``; ``missing_field`` or ``wrong_shape`` with
            pydantic's error text.
    """
    version = obj.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise RejectedInput(Reason.UNKNOWN_SCHEMA_VERSION, f"schema_version {version!r} is not supported (expected {SCHEMA_VERSION})")
    try:
        return HookEvent.model_validate(obj)
    except ValidationError as e:
        errs = e.errors()
        missing = any(err["type"] == "missing" and err["loc"][:1] != ("event_time_ms",) for err in errs)
        if not missing and any(err["loc"][:1] == ("event_time_ms",) for err in errs):
            raise RejectedInput(Reason.BAD_TIMESTAMP, _short(e)) from e
        raise RejectedInput(Reason.MISSING_FIELD if missing else Reason.WRONG_SHAPE, _short(e)) from e


def _short(e: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()[:5])


_SERIALISED = b'{"schema_version":1,'


def decode_hook_record(raw: bytes, *, received_at_ms: int | None = None) -> HookEvent:
    """Turn one record's bytes into a HookEvent.

    Args:
        raw: the record value (UTF-8 JSON).
        received_at_ms: the ingest time (epoch ms) used when a native payload has no time.

    Raises:
        RejectedInput: with the reason; the caller dead-letters the record and goes on.
    """
    if raw.startswith(_SERIALISED) and b"\\u" not in raw:  # what `produce` writes: pydantic parses and validates it in one pass
        try:
            return HookEvent.model_validate_json(raw)
        except ValueError:
            pass  # the slow path below gives the precise reason
    obj = parse_json_object(raw)
    if "schema_version" in obj and obj.get("type") not in KB_EVENT_TYPES:  # a KnowHub event line is adapted, not validated here
        return validate_hook_event(obj)
    try:
        return adapt(obj, received_at_ms=received_at_ms)
    except RejectedInput:
        raise
    except ValidationError as e:
        raise RejectedInput(Reason.WRONG_SHAPE, _short(e)) from e
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError, RecursionError) as e:  # a field of an unexpected type or depth
        raise RejectedInput(Reason.WRONG_SHAPE, f"unexpected shape: {type(e).__name__}: {e}") from e
