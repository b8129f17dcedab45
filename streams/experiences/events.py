"""Versioned KnowHub events (pydantic v2, ``schema_version`` 1, discriminated by ``type``).

Experiences (the KnowHub integration design (docs/design.md#sources): the ``experiences`` table, ``kb_submit``,
``POST /api/extract``, ``/api/approve|reject``):

* :class:`ExperienceSubmitted` (``experience-submitted``): an agent called ``kb_submit``, or
  someone submitted through ``hivestream kb submit``.
* :class:`ExperienceExtracted` (``experience-extracted``): the server-side extractor found it in
  a finished session (confidence above 0.7).
* :class:`ExperienceReviewed` (``experience-reviewed``): a reviewer approved or rejected it.

Plugin telemetry:

* :class:`SearchPerformed` (``kb-search``): a ``kb_search`` call, its query, agent filter and hits.
* :class:`ContentFetched` (``kb-content``): a ``kb_content`` call.
* :class:`MemoryRecalled` (``memory-recall``): a frames recall through the agent API.
* :class:`ReminderInjected` (``kb-reminder``): the plugin reminded the agent to use KnowHub
  (``before_agent_start``, and every 3rd ``before_prompt_build`` of a session).

Experience text in these events is already redacted (strict mode): they are built by
:func:`streams.experiences.build.make_submission`, which redacts before anything is serialised.
Times are epoch milliseconds (UTC).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from streams.model.deadletter import Reason, RejectedInput

MAX_MS = 253402300799999

MAX_TASK_CHARS = 2000
MAX_RESOURCE_CHARS = 4000
MAX_RESULT_CHARS = 8000
FIELD_LIMITS = {"task": MAX_TASK_CHARS, "resource": MAX_RESOURCE_CHARS, "result": MAX_RESULT_CHARS}
"""The longest task, resource and result an experience may hold (characters)."""

Ms = Annotated[int, Field(ge=0, le=MAX_MS)]
Id = Annotated[str, Field(min_length=1, max_length=200)]
Status = Literal["pending", "approved", "rejected", "quarantined"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    event_id: Id
    event_time_ms: Ms


class _Experience(_Event):
    """The fields every experience event carries (see :class:`ExperienceSubmitted`)."""

    task: str = Field(min_length=1, max_length=MAX_TASK_CHARS)
    resource: str = Field(default="", max_length=MAX_RESOURCE_CHARS)
    result: str = Field(min_length=1, max_length=MAX_RESULT_CHARS)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)
    agent_id: str = Field(default="", max_length=200)
    submitted_by: str = Field(default="", max_length=200)
    session_key: str = Field(default="", max_length=400)
    source_tool: str = Field(default="", max_length=200)
    runtime: str = Field(default="", max_length=100)
    privacy_mode: Literal["strict", "relaxed"] = "strict"
    redactions: dict[str, int] = Field(default_factory=dict)
    injection_rules: list[str] = Field(default_factory=list)
    requires_review: bool = True
    dedup_key: str = Field(min_length=1, max_length=200)


class ExperienceSubmitted(_Experience):
    """An experience submitted by an agent or a person (schema version 1).

    Attributes:
        task, resource, result: what was done, with what, and what came of it (redacted in
            strict mode; ``resource`` may be empty).
        confidence: the submitter's confidence, 0..1, optional.
        agent_id, submitted_by, session_key: who submitted it (seed: multi-agent fields).
        source_tool: the tool name as called (``kb_submit``, ``mcp__knowhub__kb_submit``, …) or ``cli``.
        runtime: ``openclaw``, ``claude-code``, ``codex``, ``cli``.
        privacy_mode: the mode the text was prepared in; ``redactions``: replacements per kind.
        injection_rules: the prompt-injection rules the text matched (empty: clean).
        requires_review: True when approval is required (pending until reviewed).
        dedup_key: hash of the normalised (task, resource, result) (see :mod:`streams.experiences.normalise`).
    """

    type: Literal["experience-submitted"] = "experience-submitted"


class ExperienceExtracted(_Experience):
    """An experience the server-side extractor found in a finished session (schema version 1).

    As :class:`ExperienceSubmitted`, plus ``confidence`` (required, > 0.7 by the seed's filter),
    ``extracted_from`` (the ``agent_end`` event id) and ``model`` (the extraction model).
    """

    type: Literal["experience-extracted"] = "experience-extracted"
    confidence: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    extracted_from: Id
    model: str = Field(default="", max_length=200)


class ExperienceReviewed(_Event):
    """A review decision (schema version 1): ``experience_id`` approved or rejected by ``reviewer`` with a ``reason``."""

    type: Literal["experience-reviewed"] = "experience-reviewed"
    experience_id: Id
    decision: Literal["approved", "rejected"]
    reviewer: str = Field(min_length=1, max_length=200)
    reason: str = Field(default="", max_length=2000)


class SearchPerformed(_Event):
    """A ``kb_search`` call (schema version 1): the (redacted) ``query``, the ``agent_filter`` it asked for, and ``hit_count`` (None when unknown)."""

    type: Literal["kb-search"] = "kb-search"
    session_key: str = Field(default="", max_length=400)
    agent_id: str = Field(default="", max_length=200)
    query: str = Field(default="", max_length=4000)
    agent_filter: str | None = None
    hit_count: int | None = Field(default=None, ge=0)
    runtime: str = ""


class ContentFetched(_Event):
    """A ``kb_content`` call (schema version 1) for ``experience_ref``."""

    type: Literal["kb-content"] = "kb-content"
    session_key: str = Field(default="", max_length=400)
    agent_id: str = Field(default="", max_length=200)
    experience_ref: str = Field(default="", max_length=400)
    runtime: str = ""


class MemoryRecalled(_Event):
    """A frames recall (schema version 1): ``GET /api/memory/search`` or the ``memory_search`` tool, its
    (redacted) ``query``, the ``project`` it was scoped to (empty: every project) and ``hit_count``."""

    type: Literal["memory-recall"] = "memory-recall"
    session_key: str = Field(default="", max_length=400)
    agent_id: str = Field(default="", max_length=200)
    query: str = Field(default="", max_length=4000)
    project: str = Field(default="", max_length=400)
    hit_count: int | None = Field(default=None, ge=0)
    runtime: str = ""


class ReminderInjected(_Event):
    """The plugin injected its KnowHub reminder (schema version 1).

    Attributes:
        trigger: ``before_agent_start`` or ``before_prompt_build``.
        llm_call: the session's ``before_prompt_build`` count when it fired (0 for ``before_agent_start``).
    """

    type: Literal["kb-reminder"] = "kb-reminder"
    session_key: str = Field(default="", max_length=400)
    agent_id: str = Field(default="", max_length=200)
    trigger: Literal["before_agent_start", "before_prompt_build"]
    llm_call: int = Field(default=0, ge=0)


class PluginHookCalled(_Event):
    """An OpenClaw plugin lifecycle hook the reminder counter needs (schema version 1; internal).

    ``hook``: ``before_agent_start``, ``before_prompt_build`` or ``agent_end``. The projection
    turns these into :class:`ReminderInjected` rows with a per-session counter (the plugin
    keeps that counter in memory and logs nothing itself), so the counter lives where one
    session's hooks arrive in order: the fold of a partition keyed by session.
    """

    type: Literal["kb-plugin-hook"] = "kb-plugin-hook"
    session_key: str = Field(default="", max_length=400)
    agent_id: str = Field(default="", max_length=200)
    hook: Literal["before_agent_start", "before_prompt_build", "agent_end"]


ExperienceEvent = (ExperienceSubmitted | ExperienceExtracted | ExperienceReviewed | SearchPerformed | ContentFetched | MemoryRecalled | ReminderInjected
           | PluginHookCalled)
"""Any KnowHub event."""

NewExperience = ExperienceSubmitted | ExperienceExtracted

_ADAPTER: TypeAdapter[ExperienceEvent] = TypeAdapter(Annotated[ExperienceEvent, Field(discriminator="type")])


def parse_kb_event(raw: bytes | str) -> ExperienceEvent:
    """Parse one JSON KnowHub event.

    Raises:
        RejectedInput: ``malformed_json`` or ``wrong_shape``.
    """
    try:
        return _ADAPTER.validate_json(raw)
    except ValidationError as e:
        kinds = {err["type"] for err in e.errors()}
        raise RejectedInput(Reason.MALFORMED_JSON if "json_invalid" in kinds else Reason.WRONG_SHAPE, str(e)[:2000]) from e


def kb_key(ev: ExperienceEvent) -> bytes:
    """The ``experience-events`` record key: the key group of an experience's dedup key (as on
    ``hook-events``, :mod:`streams.model.key_groups`), the experience id of a review, else the session."""
    if isinstance(ev, ExperienceSubmitted | ExperienceExtracted):
        from streams.model.key_groups import group_record_key, key_group

        return group_record_key(key_group(ev.dedup_key))
    if isinstance(ev, ExperienceReviewed):
        return ev.experience_id.encode()
    return ev.session_key.encode()
