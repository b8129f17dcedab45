"""An adversarial review of the frames worker's prefix-safe changelog (:mod:`streams.frames.changelog`).

:mod:`tests.streams.test_dedup_changelog_order` cuts every flush of generated logs after every prefix; the
scenarios here go where those logs do not:

* a ``body+event`` dedup key that starts like a marker (an event type ``~watermarks``): fixed, the
  restore dropped its entry;
* an event id read again at a later offset: with eviction, the answers after a kill depend on
  when the sweeps ran (strict xfail); with another event time it moves the watermark by its first
  reading's time only, so the embedded runner answers as before the fix; without eviction, every
  kill gives the uninterrupted answers;
* two partitions whose keys and markers share one table, on two workers, in random steps:
  commits whose flush drains a few records late, kills that leave each changelog partition its
  own prefix (before, in and after the opening marker too), partitions revoked and taken over by
  the other worker, sweeps every 1-3 captures against the committed offsets as the owner last
  saw them; ``window_ms=None``, lateness 0, a window shorter than the lateness, event times far
  from the others;
* a changelog written before the markers (with frames of five elements), then kills in the
  first flushes.

The property tests are run against broken variants (the closing marker first, no opening marker,
another partition's marker) to show that they can fail. The answer compared for an event id is
what the projector stores for it: (kind, frame id, frame time, late flag) of the run that emits it
last.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from streams.frames.capture import Capture, to_capture
from streams.frames.changelog import PartitionChangelog, is_marker_key, marker_key, marker_value, parse_marker
from streams.frames.dedup import DedupFold, group_of_key
from streams.model.adapters import adapt
from streams.model.body_hash import KeyStrategy
from streams.model.events import from_prefixed
from streams.model.tracked_state import TrackedState
from streams.settings import DEFAULT_ALLOWED_LATENESS_MS, DEFAULT_WINDOW_MS
from tests.streams.test_dedup_changelog_order import Answer, answer, simulate

W, L = 1_000, 300


def mk(eid: str, key: str, t: int, offset: int, partition: int = 0) -> Capture:
    """A capture of ``key`` at event time ``t`` read at ``(partition, offset)``."""
    return Capture(event_id=eid, key=key, body_hash="", content="", source="s", session="s", event_type="stop", parent=None,
                   project=None, importance="normal", event_time_ms=t, partition=partition, offset=offset)


def hex_key(group: int, i: int) -> str:
    """A ``body`` dedup key (64 hex) in key group ``group``."""
    return f"{group:08x}{i:056x}"


# --- a dedup key that starts like a marker -----------------------------------------------------------


def tilde_key() -> str:
    """The ``body+event`` dedup key of a capture whose ``[hm …]`` prefix names the event ``~watermarks``."""
    ev = from_prefixed("[hm src:x event:~watermarks] the same turn", event_time_ms=1000)
    c = to_capture(ev, strategy=KeyStrategy("body+event"))
    assert c is not None
    return c.key


def test_a_body_event_key_that_starts_like_a_marker_is_a_dedup_key() -> None:
    """An event type is any token, so a ``body+event`` key can start with ``~watermarks:``; it ends
    with its 64-hex body hash, never with a partition number, and is no marker."""
    key = tilde_key()
    assert key.startswith("~watermarks:")
    assert not is_marker_key(key) and not is_marker_key("~watermarks:" + "1" * 64) and not is_marker_key("~x:" + "0" * 64)
    assert all(is_marker_key(marker_key(p)) for p in (0, 7, 255, 2**31 - 1))


def test_a_key_that_starts_like_a_marker_survives_a_restore() -> None:
    """Its entry comes back from the changelog, so a record processed again after a kill is a touch
    of the first capture's frame again (the restore dropped the entry: a frame of its own)."""
    key = tilde_key()
    log = [mk("a", key, 1000, 0), mk("b", key, 1100, 1), mk("c", hex_key(0, 1), 1200, 2)]
    expected = simulate(log, [(1, 1), (3, 3)])
    assert expected["b"] == ("touched", "a", 1000, False)
    for cut in range(4):
        assert simulate(log, [(1, 1), (3, 3)], {1: cut}) == expected, cut

    def make_core(state: TrackedState, watermarks: Mapping[int, int] | None) -> DedupFold:
        return DedupFold(W, allowed_lateness_ms=L, state=state, watermarks=watermarks)

    entry = {"f": [["a", 1000, 2000, False, ["a"]]], "g": 1000, "p": [0, 0]}
    items = [(key, entry), (marker_key(0), marker_value({group_of_key(key): 1000}))]
    assert dict(PartitionChangelog.restore(0, items, lambda _k: True, make_core).state) == {key: entry}


# --- an event id read again at a later offset, its frame evicted or not --------------------------------


@pytest.mark.xfail(strict=True, reason=(
    "eviction is not invisible to an event id read again at a later offset: once its frame is evicted the capture is "
    "decided as new and opens a frame that later captures join, and whether a sweep ran before it depends on the "
    "captures counted since the core was built (a restore starts again from 0) and on the committed offset then; "
    "an exact fix needs the absorbed event ids kept past eviction (unbounded state), or eviction decided at points "
    "of the log with a limit that is a function of the log, not of the sweep count and the committed offset"))
def test_an_event_id_read_again_after_its_frame_closed_gets_the_uninterrupted_answers_after_a_kill() -> None:
    """W = 1000, L = 300, a sweep every 5 captures (tests.streams.test_dedup_changelog_order): ``e1`` (K, t=0)
    opens a frame that closes at 1000; J's captures move the watermark to 4700 and on; the record of
    ``e1`` comes again at offset 5 (a producer retry, an input imported twice), then ``z`` (K, t=500).
    Uninterrupted, the sweep after offset 4 evicts ``e1``'s frame (K's last capture is below the
    committed offset 2), so ``e1`` again opens a frame (late) and ``z`` touches it. Killed in the
    flush of the second commit, the next owner restores the state of offset 2 and counts its
    captures from 0: no sweep before ``e1`` comes again, which finds its closed frame (the same
    answer, no state change), and ``z`` opens a frame of its own."""
    k, j = hex_key(0, 1), hex_key(0, 2)
    log = [mk("e1", k, 0, 0), mk("x", j, 5000, 1), mk("y", j, 5001, 2), mk("p", j, 5002, 3), mk("q", j, 5003, 4),
           mk("e1", k, 0, 5), mk("z", k, 500, 6), mk("r", j, 5004, 7)]
    expected = simulate(log, [(2, 2), (7, 7)])
    assert expected["z"] == ("touched", "e1", 0, True)
    assert simulate(log, [(2, 2), (7, 7)], {1: 0}) == expected  # fails: z → ("created", "z", 500, True)


def test_an_event_id_read_again_with_another_event_time_moves_no_watermark_in_the_embedded_runner() -> None:
    """The embedded runner's core (committed ``None``, state and rows in one transaction, no flush to
    cut), with its default window and lateness. A prefixed payload that names its event id and
    carries no time gets the ingest's receive time, so a retried POST is the same event id with a
    later event time. Before the fix the retry changed nothing: ``b`` (another body of the key
    group, 30 s after ``a``) was on time, and ``c`` (``b``'s body again) touched ``b``'s frame."""
    def post(content: str, eid: str, received_at_ms: int) -> Capture:
        c = to_capture(adapt({"content": content, "event_id": eid}, received_at_ms=received_at_ms))
        assert c is not None
        return c

    a1 = post("[hm src:x event:stop] the turn", "a", 1_000_000)
    a2 = post("[hm src:x event:stop] the turn", "a", 1_000_000 + 2 * DEFAULT_ALLOWED_LATENESS_MS)  # retried two minutes later
    other = next(f"[hm src:x event:stop] another turn {i}" for i in range(10_000)
                 if group_of_key(post(f"[hm src:x event:stop] another turn {i}", "q", 0).key) == group_of_key(a1.key))
    b, c = post(other, "b", 1_030_000), post(other, "c", 1_040_000)
    assert a1.key == a2.key and a1.event_id == a2.event_id and a1.event_time_ms < a2.event_time_ms
    core = DedupFold(DEFAULT_WINDOW_MS, allowed_lateness_ms=DEFAULT_ALLOWED_LATENESS_MS, state=TrackedState({}))
    got = [answer(core.process(x)) for x in (a1, a2, b, c)]
    assert got == [("created", "a", 1_000_000, False), ("created", "a", 1_000_000, False), ("created", "b", 1_030_000, False),
                   ("touched", "b", 1_030_000, False)]


# --- several partitions in one table, moved between workers, killed in the middle of flushes ---------------

PARTITIONS = 2


def owner_of(key: str) -> int:
    """The partition of a dedup key (its key group mod the partition count, as ``partition_for`` of the group's record key)."""
    return group_of_key(key) % PARTITIONS


def make_logs(seed: int, n: int, window: int | None, lateness: int, far: bool, again: float = 0.0) -> list[list[Capture]]:
    """Per partition, ``n`` captures of its two key groups (three keys each): disorder within and beyond
    the lateness, (``far``) a few event times far ahead of or behind the others, and (a share
    ``again`` of the records) an earlier capture read again at a later offset, half of them with
    another event time."""
    rng = random.Random(seed)
    w = window or W
    logs: list[list[Capture]] = []
    for p in range(PARTITIONS):
        keys = [hex_key(g, rng.getrandbits(56)) for g in (p, p + PARTITIONS) for _ in range(3)]
        assert all(owner_of(k) == p for k in keys)
        out: list[Capture] = []
        t = 0
        for i in range(n):
            if out and rng.random() < again:
                c = rng.choice(out)
                et = c.event_time_ms if rng.random() < 0.5 else max(0, c.event_time_ms + rng.randint(-2 * w, 2 * w))
                out.append(mk(c.event_id, c.key, et, i, p))
                continue
            t += rng.randint(0, 350)
            r = rng.random()
            delay = rng.randint(0, 100) if r < 0.7 else rng.randint(0, max(lateness, 1)) if r < 0.85 else rng.randint(lateness, lateness + 3 * w)
            et = t - delay
            if far and rng.random() < 0.04:
                et = t + rng.choice([-1, 1]) * rng.randint(10 * w, 100 * w)
            out.append(mk(f"p{p}e{i}", rng.choice(keys), max(0, et), i, p))
        logs.append(out)
    return logs


def uninterrupted(logs: list[list[Capture]], window: int | None, lateness: int) -> dict[str, Answer]:
    """Every partition's log through one core, in order, nothing evicted: the answers to match."""
    out: dict[str, Answer] = {}
    for log in logs:
        core = DedupFold(window, allowed_lateness_ms=lateness, sweep_every=0)
        out.update((c.event_id, answer(core.process(c))) for c in log)
    return out


def cluster(logs: list[list[Capture]], seed: int, window: int | None, lateness: int, sweep: int,
            table: dict[str, Any] | None = None, committed: list[int] | None = None, stats: Counter[str] | None = None) -> dict[str, Answer]:
    """The partitions of ``logs`` on two workers that share one table (faust's ``table.data``: every
    partition's keys and markers), in random steps: a worker processes some records of a partition,
    commits (its before-commit flush of every partition it owns, drained up to 3 records after the
    offsets were taken), is killed in the middle of that flush (each changelog partition keeps its
    own prefix, a short one often: the opening marker, the first keys) and its partitions restored by
    the other worker, or a partition is revoked (commit, flush) and taken over by the other worker.
    Eviction sweeps every ``sweep`` captures against the committed offsets as the owner last saw them
    (the worker's ``committed`` ignores the partition it is given, as in streams.workers.hooks).

    Args:
        table: the changelog contents to start from (default: empty); ``committed``: the committed
            offset of each partition (default: 0).
        stats: counts what the run went through (kills, flushes cut short, first flushes cut before,
            in or after their opening marker, revocations, tombstones, late answers), when given.

    Returns:
        event id → the answer of the last run that processed it.
    """
    rng = random.Random(seed)
    seen: Counter[str] = Counter() if stats is None else stats
    data: dict[str, Any] = {} if table is None else dict(table)
    done = list(committed or [0] * PARTITIONS)  # committed offsets (the broker's)
    views: list[dict[int, int | None]] = [{}, {}]  # what each worker's consumer last saw committed
    owner = [p % 2 for p in range(PARTITIONS)]
    pos = list(done)
    answers: dict[str, Answer] = {}

    def restore(p: int) -> PartitionChangelog:
        w = owner[p]

        def make_core(state: TrackedState, watermarks: Mapping[int, int] | None) -> DedupFold:
            return DedupFold(window, allowed_lateness_ms=lateness, state=state, sweep_every=sweep, committed=lambda _q: views[w].get(p),
                             watermarks=watermarks)

        return PartitionChangelog.restore(p, list(data.items()), lambda k: owner_of(k) == p, make_core)

    parts = {p: restore(p) for p in range(PARTITIONS)}

    def process(p: int, upto: int) -> None:
        for c in logs[p][pos[p]:upto]:
            answers[c.event_id] = a = answer(parts[p].core.process(c))
            seen["late"] += a[3]
        pos[p] = max(pos[p], upto)

    def write(records: list[tuple[str, Any]]) -> None:
        seen["tombstones"] += sum(v is None for _k, v in records)
        for k, v in records:
            if v is None:
                data.pop(k, None)
            else:
                data[k] = v

    def commit(w: int, kill: bool) -> None:
        mine = [p for p in range(PARTITIONS) if owner[p] == w]
        offsets = {p: pos[p] for p in mine}
        for p in mine:  # a fetch processed while the commit awaits
            process(p, min(len(logs[p]), pos[p] + rng.choice([0, 0, 1, 3])))
        for p in mine:
            records = parts[p].flush()
            kept = records[:rng.choice([0, 1, 2, 3, rng.randint(0, len(records))])] if kill else records
            seen["cut short"] += len(kept) < len(records)
            opening = len(records) > 2 and is_marker_key(records[0][0])  # a first flush: the changelog holds no marker
            seen["cut before any marker"] += opening and not kept
            seen["cut in the opening marker"] += opening and len(kept) == 1
            seen["cut after the opening marker"] += opening and 1 < len(kept) < len(records)
            write(kept)
        if kill:
            seen["kills"] += 1  # the offsets stay uncommitted; the other worker takes every partition of w
            for p in mine:
                owner[p] = 1 - w
                views[1 - w][p] = done[p] if rng.random() < 0.5 else None
                parts[p] = restore(p)
                pos[p] = done[p]
            views[w] = {}
            return
        for p in mine:
            done[p] = offsets[p]
            views[w][p] = offsets[p]

    while any(pos[p] < len(logs[p]) for p in range(PARTITIONS)):
        p = rng.randrange(PARTITIONS)
        r = rng.random()
        if r < 0.6:
            process(p, min(len(logs[p]), pos[p] + rng.randint(1, 12)))
        elif r < 0.85:
            commit(owner[p], kill=rng.random() < 0.4)
        else:  # revoked: the commit and the flush on revocation, then the other worker restores p
            seen["revocations"] += 1
            commit(owner[p], kill=False)
            for q in range(PARTITIONS):
                if owner[q] == owner[p]:
                    write(parts[q].flush())
            owner[p] = 1 - owner[p]
            parts[p] = restore(p)
            pos[p] = done[p]
    return answers


SETTINGS = [(W, L, 3), (W, 0, 1), (None, L, 3), (200, 5_000, 2), (W, L, 0)]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(("window", "lateness", "sweep"), SETTINGS, ids=[f"W{w}-L{lt}-sweep{s}" for w, lt, s in SETTINGS])
def test_partitions_sharing_a_table_moved_and_killed_mid_flush_give_the_uninterrupted_answers(
        seed: int, window: int | None, lateness: int, sweep: int) -> None:
    logs = make_logs(seed, 90, window, lateness, far=seed % 2 == 1)
    expected = uninterrupted(logs, window, lateness)
    for run in range(6):
        assert cluster(logs, seed * 100 + run, window, lateness, sweep) == expected, run


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("five", [False, True], ids=["marker_only", "five_element_frames"])
def test_a_changelog_written_before_the_markers_then_killed_in_the_first_flushes_gives_the_uninterrupted_answers(seed: int, five: bool) -> None:
    """The table as the worker before the markers left it: every partition's entries at its last
    flush's drain point D (a complete flush), no marker, offsets committed at C <= D; with
    ``five``, frames without the sixth element (C = D then: a late touch that the old worker
    processed and the new one processes again is flagged late only if its frame remembers it). The
    new workers rebuild the watermarks from the entries, open their first flushes with them, and
    are killed in those flushes (before, in and after the opening marker) and later ones."""
    rng = random.Random(seed)
    logs = make_logs(seed, 90, W, L, far=False)
    expected = uninterrupted(logs, W, L)
    table: dict[str, Any] = {}
    committed = []
    for log in logs:
        core = DedupFold(W, allowed_lateness_ms=L, sweep_every=0)
        drained = rng.randint(10, 40)
        for c in log[:drained]:
            core.process(c)
        table.update((k, {**v, "f": [f[:5] for f in v["f"]]} if five else v) for k, v in core.state.items())
        committed.append(drained if five else drained - rng.choice([0, 1, 3]))
    assert not any(is_marker_key(k) for k in table)
    for run in range(10):
        got = cluster(logs, seed * 100 + run, W, L, 3, table=table, committed=committed)
        assert got == {e: expected[e] for e in got}, run


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(("window", "sweep"), [(W, 0), (None, 3)], ids=["W1000-sweep0", "unbounded-sweep3"])
def test_event_ids_read_again_at_later_offsets_give_the_uninterrupted_answers_when_nothing_is_evicted(
        seed: int, window: int | None, sweep: int) -> None:
    """Records read again (the same event id at a later offset, with its event time or another): with
    no eviction (no sweeps, or an unbounded window, whose frames never close) every kill and move
    gives the uninterrupted answers, the late flags of touches processed again included; the
    failure with eviction is the strict xfail above."""
    logs = make_logs(seed, 90, window, L, far=False, again=0.15)
    assert len({c.event_id for log in logs for c in log}) < sum(map(len, logs))
    expected = uninterrupted(logs, window, L)
    for run in range(6):
        assert cluster(logs, seed * 100 + run, window, L, sweep) == expected, run


def test_the_cluster_runs_kill_in_every_part_of_a_flush_move_partitions_and_evict() -> None:
    stats: Counter[str] = Counter()
    for window, lateness, sweep in SETTINGS:
        for seed in range(8):
            logs = make_logs(seed, 90, window, lateness, far=seed % 2 == 1)
            for run in range(6):
                cluster(logs, seed * 100 + run, window, lateness, sweep, stats=stats)
    assert all(stats[k] >= 50 for k in ("kills", "cut short", "revocations", "tombstones", "late")), stats
    assert stats["cut before any marker"] >= 5 and stats["cut in the opening marker"] >= 5 and stats["cut after the opening marker"] >= 20, stats


def broken_orders() -> dict[str, Callable[[PartitionChangelog], list[tuple[str, Any]]]]:
    """Flushes in a wrong order: the closing marker first; no opening marker."""
    flush = PartitionChangelog.flush

    def closing_first(self: PartitionChangelog) -> list[tuple[str, Any]]:
        records = flush(self)
        return [*records[-1:], *records[:-1]]

    def no_opening(self: PartitionChangelog) -> list[tuple[str, Any]]:
        opening = self._written is None
        records = flush(self)
        return records[1:] if opening and records else records

    return {"closing marker first": closing_first, "no opening marker": no_opening}


def any_marker(cls: type[PartitionChangelog], partition: int, items: Any, owns: Callable[[str], bool], make_core: Any,
               decode: Callable[[Any], Any] = lambda v: v) -> PartitionChangelog:
    """A restore that takes the first marker it meets, whichever partition's it is."""
    entries, marked = {}, None
    for k, v in items:
        if v is not None and is_marker_key(k):
            marked = parse_marker(decode(v)) if marked is None else marked
        elif v is not None and owns(k):
            entries[k] = decode(v)
    return cls(partition, make_core(TrackedState(entries), marked), marked)


@pytest.mark.parametrize("broken", ["closing marker first", "no opening marker", "any partition's marker"])
def test_the_cluster_test_fails_on_a_broken_order_or_restore(broken: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The property above can fail: with the closing marker written first, without the opening one
    (a partition's first flush cut after some keys brings their watermarks), or with the restore
    taking another partition's marker, some runs give other answers."""
    if broken == "any partition's marker":
        monkeypatch.setattr(PartitionChangelog, "restore", classmethod(any_marker))
    else:
        monkeypatch.setattr(PartitionChangelog, "flush", broken_orders()[broken])
    diverged = 0
    for window, lateness, sweep in SETTINGS[:2]:
        for seed in range(4):
            logs = make_logs(seed, 90, window, lateness, far=False)
            expected = uninterrupted(logs, window, lateness)
            diverged += sum(cluster(logs, seed * 100 + run, window, lateness, sweep) != expected for run in range(6))
    assert diverged > 0
