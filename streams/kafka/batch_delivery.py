"""Batch delivery inside faust: a worker's source topic goes to a batch handler a fetch per partition at a time.

faust hands each record to an agent as one ``Event``: per record its fetch loop
(``Consumer._drain_messages``) runs ``wait_first`` (tasks around the callback), the conductor's lock,
flow control, a queue hand-over, a ``sleep(0)`` and sensor calls, and an ack under an RLock; ``take()``
and ``noack_take()`` use the same path (and a table cannot be written inside ``take()``, faust #497).
On a 2-core machine that machinery alone is ~140 µs per record, more than the dedup step itself.

:class:`BatchDeliveryConsumer` keeps faust for the app, the consumer group and its rebalances, the
tables, their changelog topics and recovery, and takes the records of the topics registered with
:func:`on_batch` out of each fetch before faust sees them. After faust has handed on the rest of the
fetch (changelogs during recovery, other agents' topics), each registered partition's records go to
the handler in one synchronous call, and their offsets are acked together:

* **Which records** -- the same :class:`streams.kafka.delivery.DeliveryLedger` decisions as every
  other record (the #596 fix, :mod:`streams.kafka.rewinding`): a record of a fetch older than a
  seek, or below the next expected offset, is not delivered; a partition whose records were not all
  delivered is sought back before the next fetch, so they come again.
* **When not at all** -- nothing is delivered while faust's flow is stopped (a rebalance is under
  way), when the consumer generation changed since the fetch, or for a partition no longer assigned
  or paused (recovery): those records come again from the ledger's next offset.
* **No await between taking and acking** -- the handler is synchronous (outputs go to a
  :class:`~streams.kafka.batched_output.BatchedOutput` with ``put``), so no seek, revocation or commit
  can run between the ledger's decision, the processing and the ack: the batch is the in-flight
  unit, and a rebalance that starts during the fetch waits for the fetch loop like any callback.
* **Commits** -- offsets are acked only after the handler returned, into faust's own acked lists,
  so commits advance only through processed records (:meth:`DeliveryLedger.commit_point`); the
  before-commit hooks (:func:`streams.kafka.rewinding.on_before_commit`) send every batched output
  and state change first, and faust flushes its producer before it commits (at-least-once).

Per partition the records are processed in offset order (one fetch, one call), so ordering within a
partition, and with it the dedup semantics, are those of the per-record path.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any
from weakref import WeakKeyDictionary

import faust
from faust.types.tuples import ack_lock

from streams.kafka.rewinding import FlushBeforeCommitConsumer

log = logging.getLogger(__name__)

BatchHandler = Callable[[Any, Sequence[Any]], None]
"""``handler(tp, records)``: a faust ``TP`` and the partition's aiokafka ``ConsumerRecord`` s of one
fetch, in offset order (``topic``, ``partition``, ``offset``, ``timestamp`` in epoch ms, ``key``,
``value`` bytes or None). Synchronous: it must not await, and it must not raise on data (an
exception stops the worker as an agent's crash would)."""

_HANDLERS: WeakKeyDictionary[Any, dict[str, tuple[BatchHandler, Callable[[], Awaitable[None]] | None]]] = WeakKeyDictionary()


def on_batch(app: faust.App, topic: str, handler: BatchHandler, after: Callable[[], Awaitable[None]] | None = None) -> None:
    """Deliver the records of ``topic`` to ``handler`` a fetch per partition at a time (see the module docstring).

    Args:
        app: the faust app (its consumer must be a :class:`BatchDeliveryConsumer`,
            :func:`streams.kafka.faust_app.make_faust_app`); an agent must still subscribe to
            ``topic`` so faust assigns its partitions (it receives no event).
        topic: the source topic's name.
        handler: the :data:`BatchHandler`.
        after: awaited once after the handlers of a fetch ran and their offsets were acked (e.g.
            :meth:`~streams.kafka.batched_output.BatchedOutput.send_full`).
    """
    _HANDLERS.setdefault(app, {})[topic] = (handler, after)


def batch_topics(app: Any) -> dict[str, tuple[BatchHandler, Callable[[], Awaitable[None]] | None]]:
    """The topics of ``app`` delivered in batches, with their handlers."""
    return _HANDLERS.get(app, {})


class BatchDeliveryConsumer(FlushBeforeCommitConsumer):
    """faust's aiokafka consumer with the #596 fix, the before-commit hooks and batch delivery of the
    topics registered with :func:`on_batch` (the stock per-record path for every other topic).

    Raises whatever the handlers raise (a bug: the worker stops and its uncommitted records are
    processed again by the next owner of the partition) and whatever faust's consumer raises.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._batches: list[tuple[Any, list[Any]]] = []
        self._batch_fetched_at: dict[Any, int] = {}
        self.batches_delivered = 0
        self.records_delivered = 0

    async def _getmany(self, active_partitions: Any, timeout: float) -> Any:
        records = await super()._getmany(active_partitions=active_partitions, timeout=timeout)
        handlers = batch_topics(self.app)
        if records and handlers:
            self._batches = [(tp, records.pop(tp)) for tp in list(records) if tp.topic in handlers]
            self._batch_fetched_at = dict(self._fetched_at)
        else:
            self._batches = []
        return records

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[Any, Any]]:
        generation = self.app.consumer_generation_id
        async for tp, message in super().getmany(timeout):
            yield tp, message
        batches, self._batches = self._batches, []
        if batches:
            await self._deliver(batches, generation)

    async def _deliver(self, batches: list[tuple[Any, list[Any]]], generation: int) -> None:
        """Hand each partition's records to its handler and ack them; then run the handlers' ``after``."""
        if self.should_stop or not self.flow_active or self.app.consumer_generation_id != generation:
            return  # nothing taken: the ledger's next offsets are unchanged, so the records come again (before_fetch)
        handlers = batch_topics(self.app)
        assigned = self.assignment()
        paused = self._paused_partitions
        ledger, fetched_at = self._ledger, self._batch_fetched_at
        afters: list[Callable[[], Awaitable[None]]] = []
        for tp, recs in batches:
            if tp not in assigned or tp in paused:
                continue  # as above: sought back to the ledger's next offset before the next fetch
            taken = [r for r in recs if ledger.admit(fetched_at, tp, r.offset)]
            if not taken:
                continue
            handler, after = handlers[tp.topic]
            handler(tp, taken)
            self._ack_offsets(tp, [r.offset for r in taken])
            self.app.monitor.track_tp_end_offset(tp, self.highwater(tp))
            self.batches_delivered += 1
            self.records_delivered += len(taken)
            if after is not None and after not in afters:
                afters.append(after)
        for after in afters:
            await after()
        commit_every = self._commit_every
        if commit_every is not None and self._n_acked >= commit_every:
            self._n_acked = 0
            await self.commit()

    def _ack_offsets(self, tp: Any, offsets: list[int]) -> None:
        """Ack processed ``offsets`` of ``tp`` as faust's ``Consumer.ack`` does per message (under its ack lock)."""
        with ack_lock:
            committed = self._committed_offset[tp]
            index, acked = self._acked_index[tp], self._acked[tp]
            n = 0
            for off in offsets:
                if (committed is None or off >= committed) and off not in index:
                    index.add(off)
                    acked.append(off)
                    n += 1
            self._n_acked += n
