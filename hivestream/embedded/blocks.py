"""Import outcomes as columns: what ``hivestream run``'s import hands its dedup loop.

The dedup core reads five fields of a capture (event id, key, event time, partition, offset); the
other nine (body hash, content, provenance, details) only go to the DuckDB sink. An
:class:`ImportBlock` holds a run of import outcomes (:data:`streams.frames.capture_import.Outcome`)
with the captures' decision fields as Python lists and the rest as one Arrow table of
strings, built where the outcomes were made: in an import process (``--jobs N``,
:func:`import_block`) the strings cross the pipe as Arrow buffers instead of one pickled tuple per
capture, and the runner's process neither makes a :class:`~streams.frames.capture.Capture` nor a
:class:`~streams.frames.dedup.FrameEvent` nor transposes rows into columns. A batch's columns
(:class:`BatchColumns`) are slices of its blocks' tables beside the core's decisions.

Order and contents are those of the outcomes: the same sequence of dedup decisions as
:meth:`streams.frames.dedup.DedupFold.process` over the same captures, the same rows
(``tests/hivestream/test_run_blocks.py`` compares with the capture-by-capture fold).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain, islice
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from projections.frames.rows import CAPTURE_COLUMNS
from streams.frames.capture import Capture
from streams.frames.capture_import import ImportTask, Outcome, task_outcomes
from streams.frames.dedup import Decision
from streams.memory_calls.tool_calls import MemoryToolCall
from streams.model.clock import Clock

STRING_COLUMNS = (*Capture._fields[2:10], "details")
"""The capture fields a block keeps as Arrow strings (body hash, content, source, session, event type, parent, project,
importance, details: named as the sink's capture columns)."""

BLOCK_OUTCOMES = 4096
"""Outcomes per block when the runner's own process imports (``--jobs 0``, a serve log)."""


class ImportBlock(NamedTuple):
    """A run of import outcomes, in order, as columns.

    Attributes:
        offs: every outcome's line (or log) offset.
        kinds: every outcome's kind, one character each (``"c"``, ``"n"``, ``"e"``, ``"d"``, ``"x"``).
        others: ``(original line or None, payload, clock reading or None)`` of each outcome that is
            not a capture (a skipped event's payload is its :class:`~streams.frames.capture.Skipped`
            row), in order; the clock is read right after a rejected outcome (``"e"``,
            ``"d"``) was made, when :func:`to_block` was given one (a serve log's
            :class:`~hivestream.embedded.log_run.RecordClock`: the record's append time).
        calls: outcome index → its memory tool call (the few outcomes that have one).
        ids, keys, times, parts, coffs: per capture, in order: event id, dedup key, event time
            (epoch ms), partition, offset.
        strings: per capture, the :data:`STRING_COLUMNS` (Arrow ``string``, nulls for absent
            parent / project / details; a table, so a column past Arrow's 2 GiB per array is chunked).
    """

    offs: list[int]
    kinds: str
    others: list[tuple[bytes | None, Any, int | None]]
    calls: dict[int, MemoryToolCall]
    ids: list[str]
    keys: list[str]
    times: list[int]
    parts: list[int]
    coffs: list[int]
    strings: pa.Table


def to_block(outs: Iterable[Outcome], clock: Clock | None = None) -> ImportBlock:
    """The block of ``outs`` (a capture's payload a :class:`~streams.frames.capture.Capture` or the plain tuple of its fields).

    Args:
        outs: the outcomes, read one at a time.
        clock: read after each rejected outcome is made (see :attr:`ImportBlock.others`); ``None``:
            the runner reads its own clock when it records the dead letter.

    Raises:
        pyarrow.ArrowInvalid, pyarrow.ArrowTypeError: when a capture's string field is not a string (a bug upstream).
    """
    offs: list[int] = []
    kinds: list[str] = []
    others: list[tuple[bytes | None, Any, int | None]] = []
    calls: dict[int, MemoryToolCall] = {}
    caps: list[tuple[Any, ...]] = []
    for i, (off, kind, raw, payload, call) in enumerate(outs):
        offs.append(off)
        kinds.append(kind)
        if call is not None:
            calls[i] = call
        if kind == "c":
            caps.append(payload)
        else:
            others.append((raw, payload, clock() if clock is not None and (kind == "e" or kind == "d") else None))
    cols = dict(zip(Capture._fields, zip(*caps, strict=True) if caps else [() for _ in Capture._fields], strict=True))
    strings = pa.table({name: pa.array(cols[name], type=pa.string()) for name in STRING_COLUMNS})
    return ImportBlock(offs, "".join(kinds), others, calls, list(cols["event_id"]), list(cols["key"]), list(cols["event_time_ms"]),
                       list(cols["partition"]), list(cols["offset"]), strings)


def blocks_of(outs: Iterable[Outcome], size: int | None = None, clock: Clock | None = None) -> Iterator[ImportBlock]:
    """``outs`` as blocks of at most ``size`` (default :data:`BLOCK_OUTCOMES`) outcomes, in order (at
    least one outcome each); ``clock`` as :func:`to_block` takes it."""
    size = size or BLOCK_OUTCOMES
    it = iter(outs)
    while True:
        block = to_block(islice(it, size), clock)
        if not block.offs:
            return
        yield block


def import_block(job: tuple[int, ImportTask]) -> tuple[int, ImportBlock]:
    """Run one import task into one block (in an import process; :func:`streams.frames.capture_import.task_outcomes`).

    Returns:
        (the caller's tag, the block of the task's outcomes).

    Raises:
        OSError: when a session file cannot be read.
    """
    tag, task = job
    return tag, to_block(task_outcomes(task))


class BatchColumns:
    """A batch being gathered by the runner: slices of blocks' captures and the core's decision for each.

    :meth:`add` records that captures ``lo`` to ``hi`` of a block belong to the batch (in order),
    :attr:`decisions` gets one :data:`~streams.frames.dedup.Decision` per capture, and
    :meth:`columns` gives the sink's capture columns (:data:`projections.frames.rows.CAPTURE_COLUMNS`).
    A touch's ``content`` is kept (the sink folds only created captures' content).
    """

    def __init__(self) -> None:
        self.segments: list[tuple[ImportBlock, int, int]] = []
        self.decisions: list[Decision] = []

    def add(self, block: ImportBlock, lo: int, hi: int) -> None:
        """Captures ``lo`` to ``hi`` (exclusive) of ``block`` are the batch's next ones."""
        if hi > lo:
            self.segments.append((block, lo, hi))

    def columns(self) -> dict[str, Any]:
        """The batch's capture columns (lists, Arrow arrays; ``seq`` the capture's index in the batch).

        Raises:
            AssertionError: when the decisions and the segments disagree in length (a bug in the caller).
        """
        segs = self.segments
        n = sum(hi - lo for _b, lo, hi in segs)
        assert n == len(self.decisions), f"{n} captures, {len(self.decisions)} decisions"
        if not n:
            return {name: [] for name in CAPTURE_COLUMNS}

        def cat(field: str) -> list[Any]:
            return list(chain.from_iterable(getattr(b, field)[lo:hi] for b, lo, hi in segs))

        created, frame_ids, frame_times, lates = zip(*self.decisions, strict=True)
        strings = pa.concat_tables([b.strings.slice(lo, hi - lo) for b, lo, hi in segs])
        cols: dict[str, Any] = {name: strings.column(name) for name in STRING_COLUMNS}
        cols.update({
            "event_id": cat("ids"), "frame_id": frame_ids, "is_duplicate": [not c for c in created], "dedup_key": cat("keys"),
            "event_time_ms": cat("times"), "frame_time_ms": frame_times, "src_partition": cat("parts"), "src_offset": cat("coffs"),
            "seq": np.arange(n, dtype=np.int64), "is_late": lates,
        })
        return cols
