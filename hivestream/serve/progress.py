"""What the dedup loop of ``hivestream serve`` has done so far, read by ``/healthz`` and ``/metrics``
(one writer, the loop's thread; readers take plain attribute reads)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Progress:
    """The dedup loop's state.

    Attributes:
        applied: the first log offset not yet in DuckDB (frames and KnowHub both).
        caught_up_ms: when the loop last had nothing left to apply (epoch ms; 0: not yet).
        last_error: the last failure of a DuckDB batch (one line), ``""`` after a success.
        errors: failed batches since start (each retried).
        frames: frames created since start; duplicates: captures collapsed since start.
        snapshot_ms: when the last snapshot for readers was published (epoch ms; 0: none yet).
    """

    applied: int = 0
    caught_up_ms: int = 0
    last_error: str = ""
    errors: int = 0
    frames: int = 0
    duplicates: int = 0
    snapshot_ms: int = 0
