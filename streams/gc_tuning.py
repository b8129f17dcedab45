"""The cyclic garbage collector's settings for hivestream's long-running processes.

CPython's collector walks every container object of a generation on each of its collections; a
full (generation 2) collection walks them all. A worker or runner holds many long-lived ones: the
modules and the app built at start-up, and the dedup state (a dict and lists per key, replaced on
every capture), so with the default thresholds ``(700, 10, 10)`` the full collections took a quarter
of the frames step's CPU (27 → 20 µs per record on the 200k backlog with them made rare; gen 0 and
1 collections cost next to nothing). Nothing in hivestream relies on the collector to free memory
promptly: its objects are freed by reference counting, and the few cycles (exceptions, asyncio
tasks) wait longer in generation 2.
"""

from __future__ import annotations

import gc

FULL_COLLECTION_EVERY = 100
"""Generation-1 collections between two full ones (CPython's default: 10); CPython also waits
until the objects that moved to generation 2 since the last full one are a quarter of it."""


def tune_gc() -> None:
    """Freeze what is alive now out of the collector's sight (``gc.freeze``: the modules and the
    app, built before a loop starts) and make full collections ten times rarer
    (:data:`FULL_COLLECTION_EVERY`). Call it once, right before a long-running loop. Raises nothing.
    Uses CPython's ``gc.freeze`` and ``gc.set_threshold`` (Python 3.11 ``gc`` module)."""
    gc.freeze()
    gen0, gen1, _ = gc.get_threshold()
    gc.set_threshold(gen0, gen1, FULL_COLLECTION_EVERY)
