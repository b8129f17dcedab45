"""The stub index and the match rules.

:class:`StubIndex` keeps one :class:`~streams.stubs.store.RowStore` per channel plus one for the
global set, and applies :class:`StubUpserted`, :class:`StubRefreshed`, :class:`StubDeleted` and
:class:`StubMatched` events. :meth:`StubIndex.match` answers a :class:`MessageEmbedded`:

1. subagent messages get nothing (their embedding is still validated);
2. candidates are the message channel's stubs plus the global stubs; the model and dim of
   each non-empty scope must equal the message's;
3. similarity (exact definition in :mod:`streams.stubs.vectors`) by one float32 product per
   scope (the channel block and the global block of the stacked candidate matrix), exact
   float64 recomputation for rows that can reach the threshold; kept when ``>= threshold``;
4. ordered by similarity descending, ties by ``stub_id`` ascending, then a channel stub before a
   global stub with the same id;
5. walked in that order: a stub whose ``archive_tokens`` exceed the remaining budget is skipped
   and the next one tried; the walk stops after ``top_n`` stubs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from streams.model.deadletter import RejectedInput
from streams.model.events import stable_id
from streams.stubs.errors import StubError, reject
from streams.stubs.events import MessageEmbedded, StubDeleted, StubMatched, StubRefreshed, StubUpserted, decode_embedding
from streams.stubs.records import StubRecord
from streams.stubs.settings import MatchPolicy, MatchSettings
from streams.stubs.store import RowStore
from streams.stubs.vectors import exact_similarities, screen_margin, unit

Scope = str | None  # a channel name, or None for the global set
_Cand = tuple[float, int, int, Scope]  # (similarity, stub_id, 0 channel / 1 global, scope)
_Prepared = tuple[list[tuple[int, Scope, RowStore]], npt.NDArray[np.float32], npt.NDArray[np.float64]]  # (order, scope, store) per scope, u32, u64
PROBE_BUDGET = 2**62  # tokens: a stub over it never counts for a message's best similarity (MatchSettings' budget of the old probe)


@dataclass(frozen=True, slots=True)
class Match:
    """One stub selected for a message.

    Attributes:
        stub_id, stub_channel: the stub (``stub_channel`` ``None`` = global).
        similarity: exact similarity (float64, unitless), ``>= threshold``.
        rank: 1-based position in the message's result.
        archive_tokens: tokens charged against the budget (tokens).
        archive_path: the archive file to inject.
    """

    stub_id: int
    stub_channel: str | None
    similarity: float
    rank: int
    archive_tokens: int
    archive_path: str


@dataclass(frozen=True, slots=True)
class _View:
    """The candidate rows of one channel's messages: its stubs (order 0) then the global ones (order 1).

    Shapes: ``mat32`` ``(n, dim)`` unit float32 rows, ``mat64`` the same widened to float64; the
    lists and ``fits`` (``archive_tokens <= PROBE_BUDGET``) have ``n`` items.
    """

    mat32: npt.NDArray[np.float32]
    mat64: npt.NDArray[np.float64]
    ids: list[int]
    orders: list[int]
    scopes: list[Scope]
    fit: list[bool]
    fits: npt.NDArray[np.bool_]
    all_fit: bool
    margin: float

    @staticmethod
    def stack(scopes: Sequence[tuple[int, Scope, RowStore]]) -> _View:
        """Stack the row stores of ``scopes`` (``(order, scope, store)``, non-empty, one dim) in that order."""
        mat32 = np.concatenate([store.matrix for _, _, store in scopes])
        fits = np.concatenate([store.tokens <= PROBE_BUDGET for _, _, store in scopes])
        return _View(mat32, mat32.astype(np.float64), [i for _, _, st in scopes for i in st.ids.tolist()],
                     [o for o, _, st in scopes for _ in range(len(st))], [k for _, k, st in scopes for _ in range(len(st))],
                     fits.tolist(), fits, bool(fits.all()), screen_margin(scopes[0][2].dim))


class StubIndex:
    """All stubs, per channel and global, ready for matching (in-memory state; pure).

    Errors raised by every method: :class:`~streams.model.deadletter.RejectedInput` (reason
    ``wrong_shape``) with a :class:`~streams.stubs.errors.StubError` code first in the detail.
    """

    def __init__(self, policy: MatchPolicy | None = None) -> None:
        """Create an empty index using ``policy`` (default :class:`MatchPolicy()`)."""
        self.policy = policy or MatchPolicy()
        self._stores: dict[Scope, RowStore] = {}
        self._records: dict[tuple[Scope, int], StubRecord] = {}
        self._views: dict[Scope, _View] = {}  # channel -> its stubs and the global ones, stacked (dropped on change)

    def __len__(self) -> int:
        """Number of stubs over all scopes."""
        return len(self._records)

    def record(self, channel: Scope, stub_id: int) -> StubRecord | None:
        """The stub's metadata and telemetry, or ``None`` when absent."""
        return self._records.get((channel, stub_id))

    def stub_ids(self, channel: Scope) -> list[int]:
        """The ids of one scope's stubs, ascending (``channel`` ``None`` = global)."""
        store = self._stores.get(channel)
        return sorted(store.ids.tolist()) if store else []

    def apply(self, event: StubUpserted | StubRefreshed | StubDeleted | StubMatched) -> None:
        """Apply one state event (dispatches to :meth:`upsert`, :meth:`refresh`, :meth:`delete`, :meth:`record_match`)."""
        if isinstance(event, StubUpserted):
            self.upsert(event)
        elif isinstance(event, StubRefreshed):
            self.refresh(event)
        elif isinstance(event, StubDeleted):
            self.delete(event)
        else:
            self.record_match(event)

    def upsert(self, ev: StubUpserted) -> None:
        """Insert or replace a stub (row appended or overwritten in place).

        Telemetry fields left ``None`` keep the current values of a replaced stub.

        Raises:
            RejectedInput: ``bad_base64`` / ``bad_length`` / ``dimension_mismatch`` /
                ``non_finite`` / ``zero_vector`` for the embedding; ``model_mismatch`` or
                ``dimension_mismatch`` when the scope's other stubs use another model or dim.
        """
        key = (ev.channel, ev.stub_id)
        self._put(ev.channel, ev.stub_id, ev.embedding_b64, ev.model, ev.dim, ev.archive_tokens)
        old = self._records.get(key)
        self._records[key] = StubRecord(
            stub_id=ev.stub_id,
            channel=ev.channel,
            title=ev.title,
            stub_text=ev.stub_text,
            archive_path=ev.archive_path,
            archive_tokens=ev.archive_tokens,
            model=ev.model,
            dim=ev.dim,
            refresh_source=ev.refresh_source,
            refresh_spec=ev.refresh_spec,
            created_at_ms=old.created_at_ms if old else ev.event_time_ms,
            match_count=ev.match_count if ev.match_count is not None else (old.match_count if old else 0),
            last_matched_at_ms=ev.last_matched_at_ms if ev.last_matched_at_ms is not None else (old.last_matched_at_ms if old else None),
            last_refreshed_at_ms=ev.last_refreshed_at_ms if ev.last_refreshed_at_ms is not None else (old.last_refreshed_at_ms if old else None),
        )

    def refresh(self, ev: StubRefreshed) -> None:
        """Replace a stub's text, embedding and archive size; ``last_refreshed_at_ms`` = event time.

        Raises:
            RejectedInput: ``unknown_stub`` when the stub is absent, else as :meth:`upsert`.
        """
        old = self._records.get((ev.channel, ev.stub_id))
        if old is None:
            raise reject(StubError.UNKNOWN_STUB, f"refresh of stub {ev.stub_id} in {_label(ev.channel)}, which the index does not hold")
        self._put(ev.channel, ev.stub_id, ev.embedding_b64, ev.model, ev.dim, ev.archive_tokens)
        self._records[(ev.channel, ev.stub_id)] = replace(
            old,
            title=old.title if ev.title is None else ev.title,
            stub_text=ev.stub_text,
            archive_tokens=ev.archive_tokens,
            model=ev.model,
            dim=ev.dim,
            last_refreshed_at_ms=ev.event_time_ms,
        )

    def delete(self, ev: StubDeleted) -> bool:
        """Remove a stub (the scope's last row moves into its place); False when it was absent (idempotent)."""
        store = self._stores.get(ev.channel)
        if store is None or not store.remove(ev.stub_id):
            return False
        self._changed(ev.channel)
        del self._records[(ev.channel, ev.stub_id)]
        if not len(store):
            del self._stores[ev.channel]  # an empty scope accepts any model again
        return True

    def record_match(self, ev: StubMatched) -> None:
        """Bump ``match_count`` and advance ``last_matched_at_ms`` (max); no-op for a deleted stub.

        Not idempotent: deduplicate :class:`StubMatched` events by ``event_id`` upstream.
        """
        old = self._records.get((ev.stub_channel, ev.stub_id))
        if old is not None:
            last = max(old.last_matched_at_ms or 0, ev.event_time_ms)
            self._records[(ev.stub_channel, ev.stub_id)] = replace(old, match_count=old.match_count + 1, last_matched_at_ms=last)

    def match(self, message: MessageEmbedded) -> list[Match]:
        """The stubs to inject for one message (rules in the module docstring); ``[]`` for subagents.

        The matches of :meth:`match_scored` (one ``(rows, dim) @ (dim,)`` float32 product over the
        channel's and the global stubs; the message embedding is ``(dim,)``). Raises
        :class:`RejectedInput` as :meth:`match_many`.
        """
        return self.match_scored(message)[0]

    def match_scored(self, message: MessageEmbedded, settings: MatchSettings | None = None) -> tuple[list[Match], float | None]:
        """:meth:`match` and the message's best similarity whatever the threshold, from one decode and one product per scope.

        ``settings`` replaces the policy's settings of the message's channel for this call (a
        runtime's cap cuts them; see :func:`streams.stubs.inject.fit_settings`).

        The best similarity is the highest exact similarity (at least -1) over the candidate stubs
        (the channel's and the global ones) whose ``archive_tokens`` fit :data:`PROBE_BUDGET`: what
        :meth:`match` returns first under a policy of threshold -1, top 1 and that budget, which
        is how the stub runner computed it before, with a second decode and product. Exact values
        are computed only for the rows whose float32 screen can reach the threshold or lies
        within two :func:`~streams.stubs.vectors.screen_margin` of the best screen (the row of the
        best exact value is always among them). ``([], None)`` for subagent messages and when no
        scope holds a stub; ``([], best)`` when the channel's ``top_n`` is 0.

        Raises:
            RejectedInput: as :meth:`match`.
        """
        prepared = self._prepare(message, probe=True)
        if prepared is None:
            return [], None
        scopes, u32, u64 = prepared
        settings = settings or self.policy.for_channel(message.channel)
        view = self._views.get(message.channel)
        if view is None:
            view = self._views[message.channel] = _View.stack(scopes)
        sims = (view.mat32 @ u32).astype(np.float64)
        top = float(sims.max() if view.all_fit else sims[view.fits].max(initial=-math.inf))
        floor = top - 2 * view.margin
        if settings.top_n:
            floor = min(floor, settings.threshold - view.margin)
        rows = np.flatnonzero(sims >= floor)
        exact = exact_similarities(view.mat64[rows], u64)
        cands: list[_Cand] = []
        best: float | None = None
        for r, sim in zip(rows.tolist(), exact, strict=True):
            if view.fit[r] and sim >= -1.0 and (best is None or sim > best):
                best = sim
            if sim >= settings.threshold:
                cands.append((sim, view.ids[r], view.orders[r], view.scopes[r]))
        return (self._select(cands, settings) if settings.top_n else []), best

    def match_many(self, messages: Sequence[MessageEmbedded]) -> list[list[Match]]:
        """:meth:`match` for a batch, in input order, with one matrix-matrix product per scope.

        Each scope's ``(rows, dim)`` matrix is multiplied once by the ``(dim, k)`` stack of the
        ``k`` batch messages that use it (the global scope once for the whole batch). All or
        nothing: the first bad message raises; call :meth:`match` per message to dead-letter
        only that one.

        Raises:
            RejectedInput: embedding codes as :func:`~streams.stubs.events.decode_embedding`
                (the detail names the message), ``model_mismatch`` / ``dimension_mismatch``
                when a non-empty scope uses another model or dim than the message.
        """
        results: list[list[Match]] = [[] for _ in messages]
        users: dict[Scope, list[tuple[int, int]]] = {}  # scope -> [(message index, order)]
        units: dict[int, tuple[npt.NDArray[np.float32], npt.NDArray[np.float64]]] = {}
        cands: dict[int, list[_Cand]] = {}
        for i, m in enumerate(messages):
            prepared = self._prepare(m)
            if prepared is None:
                continue
            scopes, u32, u64 = prepared
            units[i], cands[i] = (u32, u64), []
            for order, key, _store in scopes:
                users.setdefault(key, []).append((i, order))
        for key, used in users.items():
            store = self._stores[key]
            sims = store.matrix @ np.stack([units[i][0] for i, _ in used], axis=1)  # (rows, k)
            for col, (i, order) in enumerate(used):
                thr = self.policy.for_channel(messages[i].channel).threshold
                cands[i] += _refine(store, sims[:, col], units[i][1], thr, order, key)
        for i, c in cands.items():
            results[i] = self._select(c, self.policy.for_channel(messages[i].channel))
        return results

    def _put(self, scope: Scope, stub_id: int, b64: str, model: str, dim: int, tokens: int) -> None:
        vec = decode_embedding(b64, dim)
        store = self._stores.get(scope)
        if store is not None and (store.model, store.dim) != (model, dim):
            if len(store) > 1 or stub_id not in store:
                raise _mismatch(f"stub {stub_id}", model, dim, store, scope)
            store = None  # replacing the scope's only stub: it may change model
        if store is None:
            store = self._stores[scope] = RowStore(model, dim)
        store.put(stub_id, unit(vec)[0], tokens)
        self._changed(scope)

    def _changed(self, scope: Scope) -> None:
        """Forget the stacked views a change of ``scope``'s rows makes stale (all of them for the global set)."""
        if scope is None:
            self._views.clear()
        else:
            self._views.pop(scope, None)

    def _prepare(self, m: MessageEmbedded, *, probe: bool = False) -> _Prepared | None:
        """The message's scopes and unit vector; ``None`` when nothing is to be matched (with ``probe``,
        a channel whose ``top_n`` is 0 is still matched, for its best similarity)."""
        try:
            vec = decode_embedding(m.embedding_b64, m.dim)
        except RejectedInput as e:
            code, _, rest = e.detail.partition(": ")
            raise RejectedInput(e.reason, f"{code}: message {m.message_id!r} on {m.channel!r}: {rest}") from e
        if m.origin != "main" or (not probe and self.policy.for_channel(m.channel).top_n == 0):
            return None
        scopes: list[tuple[int, Scope, RowStore]] = []
        for order, key in ((0, m.channel), (1, None)):
            store = self._stores.get(key)
            if store is not None:
                if (store.model, store.dim) != (m.model, m.dim):
                    raise _mismatch(f"message {m.message_id!r}", m.model, m.dim, store, key)
                scopes.append((order, key, store))
        if not scopes:
            return None
        u32, u64 = unit(vec)
        return scopes, u32, u64

    def _select(self, cands: list[_Cand], settings: MatchSettings) -> list[Match]:
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        out: list[Match] = []
        remaining = settings.token_budget
        for sim, stub_id, _order, key in cands:
            if len(out) == settings.top_n:
                break
            rec = self._records[(key, stub_id)]
            if rec.archive_tokens <= remaining:
                remaining -= rec.archive_tokens
                out.append(Match(stub_id, key, sim, len(out) + 1, rec.archive_tokens, rec.archive_path))
        return out


def _refine(store: RowStore, sims32: npt.NDArray[np.float32], u64: npt.NDArray[np.float64], threshold: float, order: int, key: Scope) -> list[_Cand]:
    """Rows whose exact similarity reaches ``threshold``, from their float32 screen ``sims32`` (shape ``(rows,)``)."""
    rows = np.flatnonzero(sims32.astype(np.float64) >= threshold - screen_margin(store.dim))
    if not rows.size:
        return []
    exact = exact_similarities(store.matrix[rows], u64)
    ids = store.ids[rows].tolist()
    return [(s, i, order, key) for s, i in zip(exact, ids, strict=True) if s >= threshold]


def _label(scope: Scope) -> str:
    return "the global set" if scope is None else f"channel {scope!r}"


def _mismatch(what: str, model: str, dim: int, store: RowStore, scope: Scope) -> RejectedInput:
    if model != store.model:
        return reject(StubError.MODEL_MISMATCH, f"{what} uses model {model!r}, the stubs of {_label(scope)} use {store.model!r}")
    return reject(StubError.DIMENSION_MISMATCH, f"{what} has {dim} dims, the stubs of {_label(scope)} have {store.dim}")


def to_matched_events(message: MessageEmbedded, matches: Sequence[Match]) -> list[StubMatched]:
    """The :class:`StubMatched` events for a message's matches (deterministic event ids; event time = the message's, ms)."""
    return [
        StubMatched(
            event_id=stable_id("stub-matched", message.event_id, m.stub_channel, m.stub_id),
            event_time_ms=message.event_time_ms,
            message_id=message.message_id,
            channel=message.channel,
            stub_id=m.stub_id,
            stub_channel=m.stub_channel,
            similarity=m.similarity,
            rank=m.rank,
            tokens_injected=m.archive_tokens,
        )
        for m in matches
    ]
