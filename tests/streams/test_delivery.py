"""The delivery ledger (faust #596 fix): which fetched records are handed on, how far a partition commits.

The scenarios replay, as plain sequences, the races faust-streaming #596 is about: a seek while the
fetch loop still holds records of an older fetch, a queue clear after a seek, a rebalance in the
middle of a fetch, and logs with absent offsets. A property test then drives a simulated consumer
(a log, a fetch position, a stream queue that is sometimes cleared, random seeks to the committed
offset) and checks the two promises: every offset below the committed one was processed, and the
committed offset reaches the end of the log.
"""

from __future__ import annotations

import bisect
import random

import pytest

from streams.kafka.delivery import DeliveryLedger

TP = ("hook-events", 0)


def deliver(ledger: DeliveryLedger, snap: dict, offsets: list[int]) -> list[int]:
    return [o for o in offsets if ledger.admit(snap, TP, o)]


def test_records_fetched_before_a_seek_are_not_handed_on_and_create_no_gap() -> None:
    ledger = DeliveryLedger()
    ledger.seeked(TP, 100)
    stale = ledger.epochs()  # a fetch dispatched now returns 100..199
    assert deliver(ledger, stale, [100, 101]) == [100, 101]
    ledger.seeked(TP, 100)  # recovery seeks back to the committed offset mid-iteration
    assert deliver(ledger, stale, [150, 151]) == []  # faust would mark 101..149 acked and skip them
    assert ledger.gaps(TP) == []
    fresh = ledger.epochs()
    assert deliver(ledger, fresh, [100, 101, 102]) == [100, 101, 102]
    assert ledger.commit_point(TP, 100, [100, 101, 102]) == (103, 3)


def test_a_duplicate_below_the_next_offset_is_dropped() -> None:
    ledger = DeliveryLedger()
    ledger.seeked(TP, 0)
    snap = ledger.epochs()
    assert deliver(ledger, snap, [0, 1, 2, 1, 2, 3]) == [0, 1, 2, 3]


def test_absent_offsets_in_one_continuous_fetch_become_gaps_the_commit_may_pass() -> None:
    ledger = DeliveryLedger()
    ledger.seeked(TP, 10)
    snap = ledger.epochs()
    assert deliver(ledger, snap, [10, 11, 15, 16]) == [10, 11, 15, 16]  # 12..14 compacted away
    assert ledger.gaps(TP) == [(12, 15)]
    assert ledger.commit_point(TP, 10, [10, 11, 15, 16]) == (17, 4)
    assert ledger.gaps(TP) == []


def test_a_missing_head_offset_blocks_the_commit() -> None:
    ledger = DeliveryLedger()
    ledger.seeked(TP, 10)
    # 10 was handed on but dropped from a queue (never acked); 11.. were processed
    assert ledger.commit_point(TP, 10, [11, 12, 13]) == (None, 0)  # faust's own rule would commit 14
    assert ledger.commit_point(TP, 10, [10, 11, 12, 13]) == (14, 4)


def test_with_nothing_committed_the_base_is_the_last_seek() -> None:
    ledger = DeliveryLedger()
    ledger.seeked(TP, 0)
    assert ledger.commit_point(TP, None, [1, 2]) == (None, 0)
    assert ledger.commit_point(TP, None, [0, 1, 2]) == (3, 3)


def test_forgetting_a_partition_makes_its_in_flight_records_stale() -> None:
    ledger = DeliveryLedger()
    ledger.seeked(TP, 5)
    snap = ledger.epochs()
    ledger.forget(TP)  # revoked during the fetch
    assert deliver(ledger, snap, [5, 6]) == []
    assert ledger.next_offset(TP) is None


@pytest.mark.parametrize("seed", range(30))
def test_simulated_consumer_processes_in_order_commits_only_processed_offsets_and_reaches_the_end(seed: int) -> None:
    """A simulated faust consumer over a log with absent offsets:

    - fetches of random size; faust's loop sometimes breaks off before handing a fetch on to its end;
    - seeks to the committed offset that are not atomic, as in :class:`streams.kafka.rewinding.RewindingConsumer`:
      the ledger hears "seek started" (epoch bump), the fetch position moves at some later point
      (fetches may run in between, before and after it moves), then the ledger hears the offset;
    - queue clears followed by a rewind to the lowest cleared offset (``RewindingFlowControl``), where
      the record in faust's hand-over lands in the queue after the clear;
    - before each fetch, the seeks :meth:`DeliveryLedger.before_fetch` asks for;
    - the agent skips records no longer current (and their acks are void).

    Promises: each record is first processed in log order, a commit never passes an unprocessed
    record, and the commit reaches the end of the log."""
    rnd = random.Random(seed)
    log = sorted(rnd.sample(range(0, 3000), 2000))  # offsets present in the partition
    end = log[-1] + 1
    ledger = DeliveryLedger()
    position = 0  # the fetcher's position
    committed: int | None = None
    ledger.seeked(TP, 0)
    queue: list[tuple[int, int]] = []  # (offset, epoch it was handed on in)
    processed: set[int] = set()
    acked: list[int] = []
    last_handed: tuple[int, int] | None = None
    first_unprocessed = 0  # index into log
    seek: list[int] = []  # [target, moved]: a seek to the committed offset in progress

    def seek_progress() -> None:
        nonlocal position
        if seek and rnd.random() < 0.3:
            if not seek[1]:
                position, seek[1] = seek[0], 1  # the consumer thread moved the position
            else:
                ledger.seeked(TP, seek[0])  # the ledger hears the offset
                seek.clear()

    for _step in range(30_000):
        if committed == end:
            break
        seek_progress()
        action = rnd.random()
        if action < 0.5:  # a fetch
            for _tp, off in ledger.before_fetch():
                position = off
                ledger.seeked(TP, off)
            snap = ledger.epochs()
            start = bisect.bisect_left(log, position)
            batch = log[start : start + rnd.randint(1, 60)]
            if not batch:
                continue
            position = batch[-1] + 1
            ledger.fetched(snap, {TP: batch[-1]})
            for o in batch:
                seek_progress()
                if rnd.random() < 0.01:
                    break  # faust's loop breaks off (rebalance, pause)
                if not seek and rnd.random() < 0.02:  # recovery starts a seek to the committed offset
                    seek.extend([committed or 0, 0])
                    ledger.seeking(TP)
                if ledger.admit(snap, TP, o):
                    last_handed = (o, ledger.epoch(TP))
                    queue.append(last_handed)
        elif action < 0.8:  # the agent takes queued records, skips stale ones, processes and acks
            for _ in range(rnd.randint(1, 40)):
                if not queue:
                    break
                o, epoch = queue.pop(0)
                if not ledger.is_current(TP, epoch, o):
                    continue  # skipped, and its ack void (RewindingConsumer.ack): the copy that comes again is acked
                if o not in processed:
                    assert o == log[first_unprocessed], f"{o} processed before {log[first_unprocessed]}"
                    processed.add(o)
                    while first_unprocessed < len(log) and log[first_unprocessed] in processed:
                        first_unprocessed += 1
                if (committed is None or o >= committed) and o not in acked:
                    acked.append(o)
        elif action < 0.85 and queue and not seek:  # flow_control.resume() clears the queue; rewind
            low = min(o for o, _ in queue)
            queue.clear()
            if last_handed is not None and rnd.random() < 0.5:
                queue.append(last_handed)  # the record in faust's hand-over lands after the clear
            if ledger.needs_rewind(TP, low):  # as RewindingConsumer.rewind decides
                position = low
                ledger.seeked(TP, low)
        else:  # commit
            acked.sort()
            new, used = ledger.commit_point(TP, committed, acked)
            del acked[:used]
            if new is not None:
                assert first_unprocessed == len(log) or log[first_unprocessed] >= new, "committed past an unprocessed record"
                committed = new
    assert committed == end
    assert processed == set(log)
