"""An in-memory BM25 index that grows with a projection: documents are added as they appear and
every query is ranked over the documents a caller may see (pure; numpy).

The agent API searches experiences and recalls frames thousands of times between two changes of
the projection, so the text is tokenized once, when a document is added, instead of at each query
(:func:`streams.experiences.search.search` indexes its candidates anew per call: seconds at
100,000 documents). Ranking equals that function's: Okapi BM25 in its Lucene variant (``k1`` 1.5,
``b`` 0.75, ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, bm25s's defaults) with the statistics
(``N``, each term's ``df``, the average length) taken over the *candidates* alone, the documents the
``candidates`` mask of a query keeps, so a document a caller may not see (a quarantined experience,
another project's frame) cannot sway the ranking of those it may; tokens as
:func:`streams.experiences.search.tokenize` makes them; a query token counted as often as it occurs;
hits with a score above zero, ordered by score descending, then by key.

Storage: per term, the document numbers and term frequencies as numpy chunks (concatenated on first
use), about 8 bytes per (document, distinct term); the document lengths as one array. A document's
text never changes once added (an experience's text is its first writer's, a frame's content its
first capture's); what may change (status, agents, project) is the caller's, as masks.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from streams.experiences.search import tokenize, tokenize_ids

K1 = 1.5
B = 0.75

BoolArray = npt.NDArray[np.bool_]


class TextIndex:
    """Documents (a key and a text each, numbered from 0 in the order added) and their postings."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._number: dict[str, int] = {}
        self._vocab: dict[str, int] = {}
        self._postings: list[list[npt.NDArray[np.uint32]]] = []  # term -> chunks of doc numbers
        self._tfs: list[list[npt.NDArray[np.uint32]]] = []  # term -> chunks of term frequencies
        self._lengths = np.zeros(1024, dtype=np.float64)

    def __len__(self) -> int:
        return len(self.keys)

    def number(self, key: str) -> int | None:
        """The document number of ``key``, or ``None`` when it was never added."""
        return self._number.get(key)

    @property
    def lengths(self) -> npt.NDArray[np.float64]:
        """Each document's token count (a view: do not change it)."""
        return self._lengths[: len(self.keys)]

    def add(self, keys: Sequence[str], texts: Sequence[str]) -> list[int]:
        """Add the documents ``keys`` with ``texts`` (a key added before keeps its first text); returns their numbers."""
        fresh: dict[str, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in self._number and k not in fresh:
                fresh[k] = t
        if fresh:
            self._append(list(fresh), list(fresh.values()))
        return [self._number[k] for k in keys]

    def _append(self, keys: list[str], texts: list[str]) -> None:
        base = len(self.keys)
        need = base + len(keys)
        if need > len(self._lengths):
            grown = np.zeros(max(need, 2 * len(self._lengths)), dtype=np.float64)
            grown[:base] = self._lengths[:base]
            self._lengths = grown
        ids, batch_vocab = tokenize_ids(texts)
        remap = np.zeros(len(batch_vocab) + 1, dtype=np.int64)  # batch token number -> term number
        for tok, i in batch_vocab.items():
            t = self._vocab.get(tok)
            if t is None:
                t = self._vocab[tok] = len(self._vocab)
                self._postings.append([])
                self._tfs.append([])
            remap[i] = t
        sizes = np.fromiter((len(d) for d in ids), dtype=np.int64, count=len(ids))
        self._lengths[base:need] = sizes
        for i, k in enumerate(keys):
            self._number[k] = base + i
        self.keys.extend(keys)
        total = int(sizes.sum())
        if total == 0:
            return
        terms = remap[np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=total)]
        docs = np.repeat(np.arange(base, need, dtype=np.int64), sizes)
        uniq, counts = np.unique(terms * need + docs, return_counts=True)  # sorted by term, then document
        t_of = uniq // need
        d_of = (uniq % need).astype(np.uint32)
        cuts = np.flatnonzero(np.diff(t_of)) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [len(uniq)]))
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            t = int(t_of[s])
            self._postings[t].append(d_of[s:e])
            self._tfs[t].append(counts[s:e].astype(np.uint32))

    def _term(self, t: int) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
        p, f = self._postings[t], self._tfs[t]
        if len(p) > 1:
            self._postings[t], self._tfs[t] = p, f = [np.concatenate(p)], [np.concatenate(f)]
        return p[0], f[0]

    def search(self, query: str, candidates: BoolArray, k: int) -> list[tuple[int, float]]:
        """The ``k`` best ``(document number, score)`` for ``query`` among the documents ``candidates`` keeps.

        Args:
            query: free text (tokenized as the documents are).
            candidates: one flag per document (``len(self)`` of them): which the caller may see.
            k: at most this many hits (>= 1).

        Raises:
            ValueError: ``k`` below 1, or a mask of another length.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if len(candidates) != len(self.keys):
            raise ValueError(f"the mask has {len(candidates)} flags for {len(self.keys)} documents")
        terms = [self._vocab[t] for t in tokenize([query])[0] if t in self._vocab]
        if not terms:
            return []
        n = int(np.count_nonzero(candidates))
        if n == 0:
            return []
        lengths = self.lengths
        avgdl = float(lengths[candidates].mean())
        if avgdl <= 0:
            return []
        hit_docs: list[npt.NDArray[np.uint32]] = []
        hit_scores: list[npt.NDArray[np.float64]] = []
        for t in terms:
            docs, tfs = self._term(t)
            keep = candidates[docs]
            d, tf = docs[keep], tfs[keep].astype(np.float64)
            df = len(d)
            if df == 0:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            hit_docs.append(d)
            hit_scores.append(idf * tf / (tf + K1 * ((1 - B) + B * lengths[d] / avgdl)))
        if not hit_docs:
            return []
        uniq, inverse = np.unique(np.concatenate(hit_docs), return_inverse=True)
        totals = np.bincount(inverse, weights=np.concatenate(hit_scores))
        positive = totals > 0
        uniq, totals = uniq[positive], totals[positive]
        if len(uniq) > k:  # the k-th best score, and every document tied with it (ties ordered by key)
            kth = np.partition(totals, len(totals) - k)[len(totals) - k]
            keep = totals >= kth
            uniq, totals = uniq[keep], totals[keep]
        ranked = sorted(zip(uniq.tolist(), totals.tolist(), strict=True), key=lambda h: (-h[1], self.keys[h[0]]))
        return ranked[:k]
