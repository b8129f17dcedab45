"""The faust-streaming #596 delivery fix and the before-commit hook every hivestream worker's consumer carries.

The delivery fix (faust-streaming issue #596, open in 0.15.3): faust decides which fetched record
to hand on and how far to commit from one number per partition (``_read_offset``), written after a
record was handed on and by every seek. After a table restore faust resumes and seeks the input
partitions and then clears the stream queues, so a fetch that lands between the seek and the clear
leaves offsets that are never acked and never refetched: the committed offset stops for good. Not
clearing (tried here first) turns that into loss, because a stale pre-seek record then marks the
refetched offsets as an acked "gap" and faust drops them as already read.
:class:`RewindingConsumer` replaces that bookkeeping with :class:`streams.kafka.delivery.DeliveryLedger`
(seek epochs, the next expected offset, gaps only where the log proves offsets absent, commits only
through an unbroken run); :class:`RewindingFlowControl` seeks every partition whose records a queue
clear dropped back to the lowest dropped offset. Records may be processed twice; every hivestream
step is idempotent (at-least-once).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any
from weakref import WeakKeyDictionary

import faust
from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer
from mode.utils.queues import FlowControlEvent

from streams.kafka.acknowledgements import OutputRefused
from streams.kafka.delivery import DeliveryLedger

_BEFORE_COMMIT: WeakKeyDictionary[Any, list[Callable[[], Awaitable[None]]]] = WeakKeyDictionary()


def on_before_commit(app: faust.App, hook: Callable[[], Awaitable[None]]) -> None:
    """Run ``hook`` right before each offset commit of ``app`` (see :class:`FlushBeforeCommitConsumer`)."""
    _BEFORE_COMMIT.setdefault(app, []).append(hook)


async def run_before_commit(app: Any) -> None:
    """Run the before-commit hooks of ``app`` in the order they were added."""
    for hook in _BEFORE_COMMIT.get(app, ()):
        await hook()


log = logging.getLogger(__name__)


class _NoReadOffset(dict[Any, Any]):
    """faust's ``_read_offset`` made inert: every lookup is None, so faust's fetch loop neither
    drops a record as already read nor marks a jump as an acked gap (the ledger decides both)."""

    def __getitem__(self, key: Any) -> None:
        return None


def lowest_queued(queues: Iterable[Any]) -> dict[Any, int]:
    """Per partition, the lowest offset among the events waiting in faust stream ``queues``
    (``FlowControlQueue``; each item an ``Event`` whose ``message`` has ``tp`` and ``offset``)."""
    lowest: dict[Any, int] = {}
    for queue in queues:
        for item in list(getattr(queue, "_queue", ())):
            message = getattr(item, "message", None)
            if message is None:
                continue
            tp, offset = message.tp, message.offset
            if offset < lowest.get(tp, offset + 1):
                lowest[tp] = offset
    return lowest


class RewindingFlowControl(FlowControlEvent):  # type: ignore[misc]
    """``app.flow_control`` that, when it clears the stream queues (on every resume, faust #596),
    seeks each partition whose queued records it dropped back to the lowest dropped offset, so they
    are fetched and processed again instead of leaving a hole in the acked offsets.

    Args:
        app: the faust app (its consumer must be a :class:`RewindingConsumer` to rewind).
        loop: the app's event loop.
    """

    def __init__(self, app: faust.App, *, loop: Any = None) -> None:
        super().__init__(loop=loop)
        self._app = app

    def clear(self) -> None:
        """Clear every managed queue, then rewind the partitions whose records were dropped."""
        lowest = lowest_queued(self._queues)
        super().clear()
        if lowest:
            rewind = getattr(self._app.consumer, "rewind", None)
            if rewind is not None:
                for tp, offset in lowest.items():
                    rewind(tp, offset)


class RewindingConsumer(AIOKafkaConsumer):  # type: ignore[misc]
    """faust's aiokafka consumer with :class:`~streams.kafka.delivery.DeliveryLedger` deciding which
    fetched record is handed on and how far offsets are committed (faust-streaming #596).

    - Before each fetch it takes the ledger's epoch snapshot; a record is handed on only if its
      partition was not sought since and no seek is in progress, and it is not below the next
      expected offset. faust's own ``_read_offset`` checks are made inert.
    - Records fetched but not handed on (a stale fetch, or faust's loop broke off on a rebalance or
      a pause) come again: before the next fetch the partition is sought to the ledger's next offset.
    - Every seek (to committed offsets, to restore offsets, single seeks) is recorded; a partition
      without a committed offset is sought to its earliest offset (the app's reset policy is
      ``earliest``), so the commit base is always known.
    - A message handed on before a later seek that makes its record come again is void: its ack
      is dropped (an agent on faust's per-record path can check :meth:`is_current`; a batch is
      never handed on stale, :mod:`streams.kafka.batch_delivery`), so each partition is processed in order.
    - Commits advance only through an unbroken run of acked offsets and offsets the log proved absent.

    Raises whatever faust's aiokafka consumer raises; nothing of its own.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ledger = DeliveryLedger()
        self._read_offset = _NoReadOffset()
        self._fetched_at: dict[Any, int] = {}
        self._handed: WeakKeyDictionary[Any, int] = WeakKeyDictionary()  # message → epoch it was handed on in

    def is_current(self, message: Any) -> bool:
        """Whether ``message`` (a faust ``Message`` this consumer handed on) should still be
        processed: False once a later seek made its record come again (see
        :meth:`streams.kafka.delivery.DeliveryLedger.is_current`). Workers skip such a message."""
        epoch = self._handed.get(message)
        return epoch is None or self._ledger.is_current(message.tp, epoch, message.offset)

    def rewind(self, tp: Any, offset: int) -> None:
        """Seek ``tp`` back to ``offset`` so its records from there are fetched and handed on again;
        a partition no longer assigned is forgotten instead. A fetch position already at or below
        ``offset`` is left alone (seeking forward would skip records)."""
        if self._ledger.needs_rewind(tp, offset):
            self._seek_and_record(tp, offset)

    def _seek_and_record(self, tp: Any, offset: int) -> None:
        """Seek ``tp`` to ``offset`` now and tell the ledger; a partition no longer assigned is forgotten."""
        try:
            self._thread.seek(tp, offset)
        except Exception as exc:  # aiokafka IllegalStateError: not assigned any more
            log.info("not seeking %s to %s: %s", tp, offset, exc)
            self._ledger.forget(tp)
            return
        self._ledger.seeked(tp, offset)

    def ack(self, message: Any) -> bool:
        """Ack ``message`` unless a later seek makes its record come again: then this copy's ack is
        void (acking it would let a commit pass the offset before the copy that comes again is
        processed), and the message is only marked done."""
        if not self.is_current(message):
            message.acked = True
            self._unacked_messages.discard(message)
            return False
        done: bool = super().ack(message)
        return done

    async def _getmany(self, active_partitions: Any, timeout: float) -> Any:
        ledger = self._ledger
        for tp, offset in ledger.before_fetch():  # records fetched but not handed on come again
            self._seek_and_record(tp, offset)
        self._fetched_at = ledger.epochs()
        records = await super()._getmany(active_partitions=active_partitions, timeout=timeout)
        ledger.fetched(self._fetched_at, {tp: recs[-1].offset for tp, recs in (records or {}).items() if recs})
        return records

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[Any, Any]]:
        ledger = self._ledger
        acks_enabled = self.app.topics.acks_enabled_for
        async for tp, message in super().getmany(timeout):
            if ledger.admit(self._fetched_at, tp, message.offset, track_gaps=acks_enabled(message.topic)):
                self._handed[message] = ledger.epoch(tp)
                yield tp, message

    async def seek_to_committed(self) -> Mapping[Any, int]:
        ledger = self._ledger
        for tp in self.assignment():
            ledger.seeking(tp)
        committed: Mapping[Any, int] = await super().seek_to_committed()
        acks_enabled = self.app.topics.acks_enabled_for
        unset = [tp for tp, off in committed.items() if not (off and off > 0) and acks_enabled(tp.topic)]
        earliest = await self.earliest_offsets(*unset) if unset else {}
        for tp, off in committed.items():
            if off and off > 0:
                ledger.seeked(tp, off)
            elif tp in earliest:
                self.rewind(tp, earliest[tp])
            else:
                ledger.seeked(tp, None)
        return committed

    async def seek_wait(self, partitions: Mapping[Any, int]) -> None:
        for tp in partitions:
            self._ledger.seeking(tp)
        try:
            await super().seek_wait(partitions)
        except BaseException:
            for tp in partitions:
                self._ledger.seeked(tp, None)  # position unknown; never left "seeking"
            raise
        for tp, off in partitions.items():
            self._ledger.seeked(tp, off)

    async def _seek(self, partition: Any, offset: int) -> None:
        await super()._seek(partition, offset)
        self._ledger.seeked(partition, offset)

    async def on_partitions_revoked(self, revoked: set[Any]) -> None:
        for tp in revoked:
            self._ledger.forget(tp)
        await super().on_partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned: set[Any], generation_id: int = 0) -> None:
        for tp in assigned:
            self._ledger.forget(tp)
        await super().on_partitions_assigned(assigned, generation_id)

    def _new_offset(self, tp: Any) -> int | None:
        acked = self._acked[tp]
        if not acked:
            return None
        acked.sort()
        new, used = self._ledger.commit_point(tp, self._committed_offset.get(tp), acked)
        if used:
            self._acked_index[tp].difference_update(acked[:used])
            del acked[:used]
        return new


class FlushBeforeCommitConsumer(RewindingConsumer):
    """faust's aiokafka consumer (with the #596 delivery fix) that runs the app's before-commit hooks before it commits.

    A hook writes state that changed since the last commit to its table's changelog (through the
    producer); faust then flushes its producer and commits. So the changelog
    always holds the state of at least every committed record (a write-back cache in front of a
    faust table, as Kafka Streams flushes its stores on commit), and a table can be written outside
    an event's context (faust issue #497: a table cannot be written inside ``take()``).

    A hook that raises :class:`~streams.kafka.acknowledgements.OutputRefused` (an output the broker
    did not acknowledge) stops the worker with that one line and commits nothing, as faust crashes
    its consumer on a ``ProducerSendError`` of an attached message; the next owner of the
    partitions reprocesses from the last commit (Kafka Streams' default production exception handler).
    """

    async def _commit_offsets(self, offsets: Mapping[Any, int], start_new_transaction: bool = True) -> bool:
        try:
            await run_before_commit(self.app)
        except OutputRefused as exc:  # nothing is committed past an output the broker did not take
            log.error("worker stopped: %s", exc)
            await self.crash(exc.with_traceback(None))  # a known condition: its line, not a traceback of the hook
            return False
        done: bool = await super()._commit_offsets(offsets, start_new_transaction)
        return done
