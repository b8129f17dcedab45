"""The collector settings of the long-running processes (streams.gc_tuning)."""

from __future__ import annotations

import gc

from streams.gc_tuning import FULL_COLLECTION_EVERY, tune_gc


def test_tune_gc_freezes_what_is_alive_and_makes_full_collections_rarer() -> None:
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_freeze_count() > 1000  # the modules and objects of this test process
        assert gc.get_threshold() == (before[0], before[1], FULL_COLLECTION_EVERY)
        assert FULL_COLLECTION_EVERY == 10 * 10  # ten times CPython's default (an earlier in-process command may have set it already)
        gc.collect()  # a full collection still runs when asked, and frees what it finds
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
