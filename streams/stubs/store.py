"""The row store of one scope (a channel's stubs, or the global set).

Rows are unit float32 vectors (see :mod:`streams.stubs.vectors`) in one contiguous matrix of
shape ``(capacity, dim)`` with parallel arrays of stub ids and archive token counts. Appends
grow the capacity by doubling (amortised O(dim) per insert), a replace overwrites its row in
place, and a delete moves the last row into the hole; nothing is ever rebuilt from scratch.
Row order is therefore arbitrary: the matcher orders by similarity and stub id, never by row.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

_MIN_CAPACITY = 8


class RowStore:
    """Pre-normalised float32 rows of one scope, all of one embedding ``model`` and ``dim``.

    Attributes:
        model: embedding model name shared by every row.
        dim: dimensions of every row.
    """

    def __init__(self, model: str, dim: int) -> None:
        """Create an empty store for ``dim``-dimensional vectors of ``model``."""
        self.model = model
        self.dim = dim
        self._mat: npt.NDArray[np.float32] = np.zeros((_MIN_CAPACITY, dim), dtype=np.float32)
        self._ids: npt.NDArray[np.int64] = np.zeros(_MIN_CAPACITY, dtype=np.int64)
        self._tokens: npt.NDArray[np.int64] = np.zeros(_MIN_CAPACITY, dtype=np.int64)
        self._row: dict[int, int] = {}

    def __len__(self) -> int:
        """Number of rows (stubs)."""
        return len(self._row)

    def __contains__(self, stub_id: object) -> bool:
        """True when the store holds ``stub_id``."""
        return stub_id in self._row

    @property
    def matrix(self) -> npt.NDArray[np.float32]:
        """The live rows, shape ``(len, dim)`` float32 (a view: do not keep across updates)."""
        return self._mat[: len(self._row)]

    @property
    def ids(self) -> npt.NDArray[np.int64]:
        """Stub ids parallel to :attr:`matrix`, shape ``(len,)`` (a view)."""
        return self._ids[: len(self._row)]

    @property
    def tokens(self) -> npt.NDArray[np.int64]:
        """Archive token counts parallel to :attr:`matrix`, shape ``(len,)`` (a view)."""
        return self._tokens[: len(self._row)]

    def put(self, stub_id: int, unit32: npt.NDArray[np.float32], archive_tokens: int) -> None:
        """Insert or replace a stub's row.

        Args:
            stub_id: the stub id (int64 range).
            unit32: its unit vector, shape ``(dim,)`` float32.
            archive_tokens: its archive token count (tokens).

        Raises:
            ValueError: when ``unit32`` does not have shape ``(dim,)`` (a caller bug).
        """
        if unit32.shape != (self.dim,):
            raise ValueError(f"row shape {unit32.shape} != ({self.dim},)")
        row = self._row.get(stub_id)
        if row is None:
            row = len(self._row)
            if row == self._mat.shape[0]:
                self._grow()
            self._row[stub_id] = row
            self._ids[row] = stub_id
        self._mat[row] = unit32
        self._tokens[row] = archive_tokens

    def remove(self, stub_id: int) -> bool:
        """Delete a stub's row by moving the last row into it; False when it was absent."""
        row = self._row.pop(stub_id, None)
        if row is None:
            return False
        last = len(self._row)
        if row != last:
            moved = int(self._ids[last])
            self._mat[row] = self._mat[last]
            self._ids[row] = moved
            self._tokens[row] = self._tokens[last]
            self._row[moved] = row
        return True

    def _grow(self) -> None:
        cap = 2 * self._mat.shape[0]
        mat = np.zeros((cap, self.dim), dtype=np.float32)
        mat[: self._mat.shape[0]] = self._mat
        self._mat = mat
        self._ids = np.concatenate([self._ids, np.zeros(cap - self._ids.shape[0], dtype=np.int64)])
        self._tokens = np.concatenate([self._tokens, np.zeros(cap - self._tokens.shape[0], dtype=np.int64)])
