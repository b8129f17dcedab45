"""Raw experience fields → a redacted, flagged, keyed experience event (pure).

The only way hivestream builds :class:`ExperienceSubmitted` / :class:`ExperienceExtracted`: the
blocks hivestream itself injected are taken out (:mod:`streams.model.injected`), text is redacted
(strict mode) *before* the event exists, so no raw value can reach a topic, a table, a dead letter
or a log line; prompt injection is detected on the redacted text (what is stored
and what every path sees); the dedup key is the hash of the normalised redacted (task,
resource, result).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from typing import Any

from pydantic import ValidationError

from streams.experiences.events import FIELD_LIMITS, ExperienceExtracted, ExperienceSubmitted
from streams.experiences.injection import detect_injection
from streams.experiences.settings import ExperienceSettings
from streams.model.deadletter import Reason, RejectedInput
from streams.model.injected import strip_injected
from streams.redaction.redact import RedactionMode, redact, strict_redaction

_WS = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """NFKC, casefolded, whitespace runs collapsed to one space, trimmed: the experience dedup normal form."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def experience_key(task: str, resource: str, result: str) -> str:
    """The dedup key of an experience: the first 32 hex chars of SHA-256 over the JSON of the normalised triple."""
    raw = json.dumps([normalise_text(task), normalise_text(resource), normalise_text(result)], ensure_ascii=True)
    return hashlib.sha256(raw.encode("ascii")).hexdigest()[:32]


def safe_text(text: str, mode: RedactionMode) -> str:
    """``text`` as it may be written anywhere (dead-letter details, logs): redacted in strict mode."""
    return text if mode == RedactionMode.RELAXED else strict_redaction(text)[0]


def rejection(reason: Reason, detail: str, mode: RedactionMode) -> RejectedInput:
    """A :class:`RejectedInput` whose detail is redacted in strict mode (pydantic errors quote their input)."""
    return RejectedInput(reason, safe_text(detail, mode))


def _str_field(fields: dict[str, Any], name: str, mode: RedactionMode, *, required: bool) -> str:
    v = fields.get(name)
    if v is None or v == "":
        if required:
            raise RejectedInput(Reason.MISSING_FIELD, f"experience has no {name!r}")
        return ""
    if not isinstance(v, str):
        raise RejectedInput(Reason.WRONG_SHAPE, f"experience field {name!r} must be a string, got {type(v).__name__}")
    if required and not v.strip():
        raise RejectedInput(Reason.MISSING_FIELD, f"experience field {name!r} is blank")
    if len(v) > FIELD_LIMITS[name]:  # checked before redaction, so a huge field costs nothing
        raise RejectedInput(Reason.WRONG_SHAPE, f"experience field {name!r} is {len(v)} characters, over the {FIELD_LIMITS[name]}-character limit")
    v = strip_injected(v)  # a quoted search answer or reminder is no experience of its own
    if required and not v.strip():
        raise RejectedInput(Reason.MISSING_FIELD, f"experience field {name!r} holds only blocks hivestream injected")
    return v


def build_experience(
    fields: dict[str, Any],
    *,
    event_id: str,
    event_time_ms: int,
    settings: ExperienceSettings,
    extracted_from: str | None = None,
    model: str = "",
    **provenance: str,
) -> ExperienceSubmitted | ExperienceExtracted:
    """Build the event of one experience from its raw fields.

    Args:
        fields: ``task``, ``result`` (required, strings), ``resource`` (optional string),
            ``confidence`` (optional number 0..1).
        event_id, event_time_ms: the event's id and time (epoch ms).
        settings: privacy mode and whether approval is required.
        extracted_from: the ``agent_end`` event id for an extracted experience (None: submitted).
        model: the extraction model (extracted only).
        provenance: ``agent_id``, ``submitted_by``, ``session_key``, ``source_tool``, ``runtime``.

    Raises:
        RejectedInput: ``missing_field`` / ``wrong_shape`` with a detail that holds no raw text
            in strict mode.
    """
    mode = settings.privacy_mode
    task = _str_field(fields, "task", mode, required=True)
    resource = _str_field(fields, "resource", mode, required=False)
    result = _str_field(fields, "result", mode, required=True)
    conf = fields.get("confidence")
    if conf is not None and (isinstance(conf, bool) or not isinstance(conf, int | float)):
        raise RejectedInput(Reason.WRONG_SHAPE, f"experience confidence must be a number, got {type(conf).__name__}")
    counts: dict[str, int] = {}
    clean = {}
    for name, text in (("task", task), ("resource", resource), ("result", result)):
        r = redact(text, mode)
        clean[name] = r.text
        for k, n in r.counts.items():
            counts[k] = counts.get(k, 0) + n
    verdict = detect_injection(clean["task"], clean["resource"], clean["result"])  # on the text as stored, so every path agrees
    prov = {k: safe_text(v, mode) for k, v in provenance.items()}
    common: dict[str, Any] = {
        "event_id": event_id, "event_time_ms": event_time_ms, **clean, "confidence": conf, **prov,
        "privacy_mode": mode.value, "redactions": counts, "injection_rules": list(verdict.rules),
        "requires_review": settings.require_approval, "dedup_key": experience_key(clean["task"], clean["resource"], clean["result"]),
    }
    try:
        if extracted_from is not None:
            return ExperienceExtracted(**common, extracted_from=extracted_from, model=model)
        return ExperienceSubmitted(**common)
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())  # no input values
        raise RejectedInput(Reason.WRONG_SHAPE, f"experience: {errs}") from e
