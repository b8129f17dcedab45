"""Format detection and dispatch for input files (JSONL, one record per line).

Formats:

* ``claude-code``: a Claude Code transcript (``~/.claude/projects/<slug>/<session>.jsonl``).
* ``codex``: a Codex rollout (``~/.codex/sessions/…/rollout-….jsonl``).
* ``hook-events``: one hook payload per line: serialised HookEvents or native payloads
  (Claude Code / Codex hook stdin with a ``ts``/``timestamp``, OpenClaw events, Codex notify,
  ``{"content": "[hm …] …", "timestamp": …}``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from streams.model.deadletter import RejectedInput
from streams.model.decode import decode_hook_record
from streams.model.events import HookEvent

Item = tuple[int, bytes, HookEvent | RejectedInput]
"""(0-based line offset, the line's bytes, the event or why the line was rejected)."""

_CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
_CLAUDE_TYPES = {"user", "assistant", "system", "summary", "progress", "file-history-snapshot", "queue-operation"}


def detect_format(lines: Iterable[bytes], sniff: int = 20) -> str:
    """Name the format of a JSONL stream from its first ``sniff`` parseable lines.

    Returns:
        ``claude-code``, ``codex`` or ``hook-events`` (the default when nothing matches).
    """
    for i, line in enumerate(lines):
        if i >= sniff:
            break
        try:
            obj = json.loads(line)
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            continue
        if obj["type"] in _CODEX_TYPES and "payload" in obj:
            return "codex"
        if obj["type"] in _CLAUDE_TYPES and ("sessionId" in obj or "uuid" in obj or "messageId" in obj or "leafUuid" in obj):
            return "claude-code"
    return "hook-events"


def read_lines(path: Path) -> Iterator[bytes]:
    """The lines of ``path`` as bytes, without line endings (blank lines kept, so offsets hold)."""
    with path.open("rb") as f:
        for line in f:
            yield line.rstrip(b"\r\n")


CHUNK_BYTES = 1_048_576
"""Target size of one import task when a hook-event file is cut at line ends for import processes
(``produce --jobs``, ``run --jobs``): about 1,800 lines of the generated backlog."""


def split_lines(data: bytes) -> list[bytes]:
    """The lines of ``data`` exactly as :func:`streams.importers.files.read_lines` yields them.

    Args:
        data: whole lines of a file (starting at a line start, ending after a ``\\n`` or at the
            end of the file).
    """
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()  # the text after the last "\n" is no line
    return [ln.rstrip(b"\r\n") for ln in lines]


def import_hook_events(lines: Iterable[bytes], start: int = 0) -> Iterator[Item]:
    """Decode a hook-event JSONL stream line by line; blank lines are skipped.

    Args:
        lines: the lines, without line endings.
        start: the offset of the first line (a chunk of a file starts at its first line's number).
    """
    for off, line in enumerate(lines, start):
        if not line.strip():
            continue
        try:
            yield off, line, decode_hook_record(line)
        except RejectedInput as e:
            yield off, line, e


def import_file(path: Path, *, gateway: bool = False, fmt: str | None = None) -> tuple[str, Iterator[Item]]:
    """Open ``path`` and return its format and the stream of items.

    Args:
        path: a JSONL file.
        gateway: also emit the OpenClaw gateway's double capture of each prompt and reply of
            a session file (hook-event logs are already captures: left as they are).
        fmt: force a format instead of detecting it.

    Raises:
        OSError: when the file cannot be read.
        ValueError: for an unknown ``fmt``.
    """
    fmt = fmt or detect_format(read_lines(path))
    lines = read_lines(path)
    items: Iterator[Item]
    if fmt == "claude-code":
        from streams.importers.claude_transcript import import_claude_transcript

        items = import_claude_transcript(lines, str(path))
    elif fmt == "codex":
        from streams.importers.codex_rollout import import_codex_rollout

        items = import_codex_rollout(lines)
    elif fmt == "hook-events":
        items = import_hook_events(lines)
    else:
        raise ValueError(f"unknown format {fmt!r}")
    if gateway and fmt != "hook-events":
        from streams.importers.gateway import with_gateway_capture

        items = with_gateway_capture(items)
    return fmt, items
