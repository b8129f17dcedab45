"""Importer items → capture outcomes: the per-event work of ``hivestream run`` before dedup (pure).

The embedded runner reads a file's items (:mod:`streams.importers.files`) and routes each as the
Kafka worker does (:func:`streams.frames.routing.route_event`: a capture, a skipped event or a
rejection, and its memory tool call); only the dedup core and the sink need the runner's state. :func:`outcomes` does the stateless part and says what each
item became, so the same function runs in the runner's process (``--jobs 0``) or in forked
import processes (``--jobs N``, :class:`streams.importers.ordered_pool.OrderedPool` over
:func:`file_tasks` / :func:`task_outcomes`), and both give the runner the same sequence.

A hook-event JSONL file is cut into chunks of about :data:`CHUNK_BYTES` at line ends (each line
stands alone); a session file (Claude Code transcript, Codex rollout: a turn spans lines) is one
task. Offsets are the file's 0-based line numbers either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streams.frames.capture import Capture, Skipped
from streams.frames.fast_capture import line_capture
from streams.frames.routing import route_event
from streams.importers.files import CHUNK_BYTES, Item, import_file, split_lines
from streams.memory_calls.tool_calls import DEFAULT_RULES, MemoryToolCall, ToolRule
from streams.model import fastpath
from streams.model.body_hash import KeyStrategy
from streams.model.deadletter import Reason, RejectedInput
from streams.model.decode import decode_hook_record
from streams.model.events import HookEvent
from streams.settings import DEFAULT_MAX_BODY_BYTES


@dataclass(frozen=True)
class CaptureOptions:
    """What the import needs besides the items.

    Attributes:
        strategy: the dedup key strategy.
        max_body_bytes: the largest stripped body accepted, UTF-8 bytes.
        rules: the memory tool classification table (:func:`streams.memory_calls.configured_rules`).
    """

    strategy: KeyStrategy = KeyStrategy.BODY
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    rules: Sequence[ToolRule] = DEFAULT_RULES


Outcome = tuple[int, str, bytes | None, Any, MemoryToolCall | None]
"""``(line offset, kind, original line or None, payload, memory tool call or None)``. Kinds:

* ``"c"``: a capture; payload the :class:`~streams.frames.capture.Capture`.
* ``"n"``: a valid event that is not a turn (tool, lifecycle, empty body, placeholder, failed
  send); payload its :class:`~streams.frames.capture.Skipped` row.
* ``"e"``: an event :func:`~streams.frames.capture.capture_outcome` rejected (a body over the
  limit); payload ``(reason, detail, event id)``.
* ``"d"``: a line the importer rejected (no event); payload ``(reason, detail, "")``.
* ``"x"``: a dead letter made before the runner (a dead-letter record of ``hivestream serve``'s
  log); payload the :class:`~streams.model.deadletter.DeadLetter`, recorded as it is.
"""

ImportTask = tuple[str, str, bytes | None, int, bool, int, CaptureOptions]
"""``(path, format, chunk of whole lines or None for the whole file, offset of the chunk's first
line, gateway double capture, file id, options)``."""


def outcomes(items: Iterable[Item], opts: CaptureOptions, file_id: int) -> Iterator[Outcome]:
    """What each importer item becomes, in order.

    Args:
        items: (line offset, line bytes, event or rejection) from :mod:`streams.importers`.
        opts: key strategy, body limit and memory tool rules.
        file_id: the capture's ``partition`` (the runner's id of the input; the offset is the line).

    Never raises on data: a bad line or event is an ``"e"`` / ``"d"`` outcome.
    """
    for off, raw, item in items:
        yield item_outcome(off, raw, item, opts, file_id)


def item_outcome(off: int, raw: bytes, item: HookEvent | RejectedInput, opts: CaptureOptions, file_id: int) -> Outcome:
    """What one importer item becomes (see :func:`outcomes`): :func:`streams.frames.routing.route_event`'s
    result as an outcome; never raises on data."""
    res, call = route_event(item, opts.strategy, opts.max_body_bytes, file_id, off, opts.rules)
    if isinstance(res, Capture):
        return off, "c", None, res, call
    if isinstance(res, Skipped):
        return off, "n", None, res, call
    err = res.error
    return off, "d" if isinstance(item, RejectedInput) else "e", raw, (str(err.reason), err.detail, res.event_id), call


def hook_outcomes(lines: Iterable[bytes], start: int, opts: CaptureOptions, file_id: int) -> Iterator[Outcome]:
    """:func:`outcomes` of a hook-event file's lines (offsets from ``start``; blank lines skipped, as
    :func:`streams.importers.files.import_hook_events` does), with ``run``'s line fast path first
    (:func:`streams.frames.fast_capture.line_capture`, on the :mod:`streams.model.fastpath` switch):
    a capture it covers is a ``"c"`` outcome whose payload is the plain tuple of the capture's
    fields and no memory tool call; every other line takes the general path. The same outcomes
    as :func:`outcomes` over :func:`~streams.importers.files.import_hook_events`, but for that
    payload's type (:func:`hivestream.embedded.blocks.to_block` reads either as the fields in order).
    """
    fast = fastpath.ENABLED
    strategy, limit = opts.strategy, opts.max_body_bytes
    for off, line in enumerate(lines, start):
        if not line.strip():
            continue
        cap = line_capture(line, strategy, limit, file_id, off) if fast else None
        if cap is not None:
            yield off, "c", None, cap, None
            continue
        try:
            item: HookEvent | RejectedInput = decode_hook_record(line)
        except RejectedInput as e:
            item = e
        yield item_outcome(off, line, item, opts, file_id)


def rejection(payload: tuple[str, str, str]) -> RejectedInput:
    """The :class:`RejectedInput` of an ``"e"`` / ``"d"`` outcome's payload."""
    return RejectedInput(Reason(payload[0]), payload[1])


def file_tasks(path: Path, fmt: str, gateway: bool, file_id: int, opts: CaptureOptions,
               chunk: int | None = None) -> Iterator[ImportTask]:
    """The import tasks of one file, in line order (at least one, so every file is reported).

    Args:
        chunk: target bytes per hook-event task (default :data:`CHUNK_BYTES`); a task ends at
            the end of the line its cut falls in.

    Raises:
        OSError: when the file cannot be read.
    """
    if fmt != "hook-events":
        yield str(path), fmt, None, 0, gateway, file_id, opts
        return
    first, sent = 0, False
    with path.open("rb") as f:
        while True:
            data = f.read(chunk or CHUNK_BYTES)
            if not data:
                break
            if not data.endswith(b"\n"):
                data += f.readline()  # to the end of the line the cut fell in
            yield str(path), fmt, data, first, gateway, file_id, opts
            sent = True
            first += data.count(b"\n")
    if not sent:
        yield str(path), fmt, b"", 0, gateway, file_id, opts


def task_outcomes(task: ImportTask) -> Iterator[Outcome]:
    """The outcomes of one import task, in order (run in an import process by
    :func:`hivestream.embedded.blocks.import_block`; the line offsets are the file's).

    Raises:
        OSError: when a session file cannot be read.
    """
    path, fmt, data, first, gateway, file_id, opts = task
    if data is not None:
        return hook_outcomes(split_lines(data), first, opts, file_id)
    return outcomes(import_file(Path(path), gateway=gateway, fmt=fmt)[1], opts, file_id)
