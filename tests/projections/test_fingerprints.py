"""projections.frames.fingerprints: the answers are a set's, in the order asked, whatever the runs."""

from __future__ import annotations

import numpy as np

from projections.frames.fingerprints import Fingerprints


def test_maybe_answers_as_a_set_in_the_order_asked() -> None:
    rng = np.random.default_rng(7)
    fp = Fingerprints()
    held: set[int] = set()
    for size in (9_000, 1, 2_000, 300, 7_000, 40, 5, 3):  # runs of many sizes, so several stay unmerged
        batch = rng.integers(0, 1 << 20, size, dtype=np.uint64)  # a small range: repeats and near neighbours
        fp.add(batch)
        held.update(int(x) for x in batch)
        asked = np.concatenate((rng.integers(0, 1 << 20, 3_000, dtype=np.uint64), batch[::-1][:500], batch[:5]))
        got = fp.maybe(asked)
        assert got.dtype == np.bool_ and len(got) == len(asked)
        assert got.tolist() == [int(x) in held for x in asked]
    assert len(fp._runs) > 1
    assert len(fp) == sum(len(r) for r in fp._runs)


def test_maybe_on_edges() -> None:
    fp = Fingerprints(np.array([0, 2**64 - 1, 5], dtype=np.uint64))
    assert fp.maybe(np.array([2**64 - 1, 4, 0, 6, 5, 2**64 - 2], dtype=np.uint64)).tolist() == [True, False, True, False, True, False]
    assert fp.maybe(np.array([], dtype=np.uint64)).tolist() == []
    assert Fingerprints().maybe(np.array([1, 2], dtype=np.uint64)).tolist() == [False, False]
