"""An exact "certainly not there" test for the sink's ids: 64-bit fingerprints in sorted numpy runs.

The sink must know whether a batch's event ids are already in ``frame_captures`` and which of its
frame ids are already in ``frames``. Without an index that is a scan of the whole column per
batch, whose cost grows with the file. A :class:`Fingerprints` holds DuckDB's 64-bit ``hash()`` of
every id the table holds, in a few sorted runs (a log-structured merge: a new run is merged into
the runs no larger than it, so each id is merged ``O(log n)`` times); a batch is tested against it
with one binary search per run. An id whose fingerprint is absent is certainly not in the table;
one whose fingerprint is present may be (equal hashes of different ids), and the sink then runs
the exact scan, so answers never change, only how often the scan runs.

Memory: 8 bytes per id held (16 MB per 2,000,000 captures), no Python object per id.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Hashes = npt.NDArray[np.uint64]


class Fingerprints:
    """A set of 64-bit fingerprints (DuckDB ``hash()`` values of ids) with batch membership tests.

    Args:
        initial: fingerprints to start with (any order, repeats allowed).
    """

    def __init__(self, initial: Hashes | None = None) -> None:
        self._runs: list[Hashes] = []
        if initial is not None and len(initial):
            self.add(initial)

    def __len__(self) -> int:
        return sum(len(r) for r in self._runs)

    def add(self, hashes: Hashes) -> None:
        """Add ``hashes`` (a uint64 array, any order): merged into the runs no larger than it."""
        run = np.sort(np.asarray(hashes, dtype=np.uint64))
        if not len(run):
            return
        while self._runs and len(self._runs[-1]) <= 2 * len(run):
            run = np.sort(np.concatenate((self._runs.pop(), run)), kind="stable")  # two sorted runs: a merge
        self._runs.append(run)

    def maybe(self, hashes: Hashes) -> npt.NDArray[np.bool_]:
        """Which of ``hashes`` may be held: False means certainly not added, True means added or a
        collision. Returns a bool array of the same length.

        The batch is searched in sorted order: numpy's binary search narrows each search to the part
        of a run above the previous key's, so the probes walk a run forwards instead of jumping
        across it (a 2,000,000-id run: 34 → 8 ms for 50,000 ids)."""
        h = np.asarray(hashes, dtype=np.uint64)
        order = np.argsort(h, kind="stable")
        hs = h[order]
        found = np.zeros(len(h), dtype=np.bool_)
        for run in self._runs:
            i = np.searchsorted(run, hs)
            i[i == len(run)] = 0
            found |= run[i] == hs
        out = np.empty_like(found)
        out[order] = found
        return out
