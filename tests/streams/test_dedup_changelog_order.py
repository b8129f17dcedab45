"""A kill -9 in the middle of the frames worker's changelog flush changes no answer.

The frames worker (:mod:`streams.workers.hooks`) writes the dedup state keys changed since its last
flush to the changelog right before faust commits offsets (:mod:`streams.frames.changelog`). A kill
-9 during that flush leaves an arbitrary prefix of its records in the changelog, and the offsets
uncommitted; the next owner restores the state from the changelog and processes again every record
since the last committed offset. This test plays that, without Kafka: a generated log of captures
(a few key groups of a few keys each, disorder within and beyond the allowed lateness, frames
closing and evicted) is processed by :class:`~streams.frames.dedup.DedupFold` through
:class:`~streams.frames.changelog.PartitionChangelog` with a commit every 8-20 records (its flush
drained up to 3 records after the offsets were taken, as a fetch can run while a commit awaits), and
at every commit point the run is cut after EVERY prefix of that flush, in the order the worker writes
it, restored, processed again from the committed offset and on to the end (why every prefix is safe:
the module docstring of :mod:`streams.frames.changelog`); then with kills in a row. A few other
orders show what the order matters for: not the order of the dedup keys, but the closing watermark
marker after all of them. The answer each event id gets from the run that emits it last -- kind, frame id, frame time and the late flag, which is what
the projector stores for it (``projections.frames.rows``) -- must be the uninterrupted run's: the
projector keeps the first answer it reads for an event id, and the outputs of uncommitted records may
or may not have reached it before the kill.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from streams.frames.capture import Capture
from streams.frames.changelog import PartitionChangelog, is_marker_key
from streams.frames.dedup import DedupFold, FrameEvent
from streams.model.tracked_state import TrackedState

W, L = 1_000, 300
SWEEP = 5  # captures between eviction sweeps: evictions happen between commits

Answer = tuple[str, str, int, bool]
Records = list[tuple[str, Any]]
Order = Callable[[Records], Records]


def make_log(seed: int, n: int = 140, groups: int = 2, keys_per_group: int = 3) -> list[Capture]:
    """``n`` captures of partition 0 (offset = index) over ``groups`` key groups of ``keys_per_group`` keys."""
    rng = random.Random(seed)
    keys = [f"{g:08x}{rng.getrandbits(224):056x}" for g in range(groups) for _ in range(keys_per_group)]
    out: list[Capture] = []
    t = 0
    for i in range(n):
        t += rng.randint(0, 350)
        r = rng.random()
        delay = rng.randint(0, 100) if r < 0.7 else rng.randint(0, L) if r < 0.85 else rng.randint(L, 3 * W)
        out.append(Capture(event_id=f"e{i}", key=rng.choice(keys), body_hash="", content="", source="s", session="s", event_type="stop",
                           parent=None, project=None, importance="normal", event_time_ms=t - delay, partition=0, offset=i))
    return out


def make_commits(seed: int, n: int) -> list[tuple[int, int]]:
    """(committed offset, records processed when the flush drains the state) of each commit, in order."""
    rng = random.Random(seed + 10_000)
    out: list[tuple[int, int]] = []
    c = 0
    while True:
        c += rng.randint(8, 20)
        if c >= n:
            return out
        out.append((c, min(n, c + rng.choice([0, 0, 1, 3]))))


def answer(fe: FrameEvent) -> Answer:
    return (fe.kind, fe.frame_id, fe.frame_time_ms, fe.late)


def as_written(records: Records) -> Records:
    """The flush in the order the worker writes it."""
    return records


def simulate(log: list[Capture], commits: list[tuple[int, int]], cuts: Mapping[int, int] | None = None, order: Order = as_written,
             flushes: list[Records] | None = None, markers: bool = True) -> dict[str, Answer]:
    """Run the frames worker's dedup over ``log``, its flushes written in ``order``, with a kill -9 at each cut.

    Args:
        cuts: commit index → how many records of that commit's flush reach the changelog before
            the kill (fewer than the flush holds; a flush with no records is never cut).
        markers: ``False`` restores the watermarks from the entries, ignoring the marker (as before it).

    Returns:
        event id → the answer of the last run that processed it. ``flushes`` (if given) receives
        the records of each flush, in the order written.
    """
    changelog: dict[str, Any] = {}
    committed: list[int | None] = [None]

    def make_core(state: TrackedState, watermarks: Mapping[int, int] | None) -> DedupFold:
        return DedupFold(W, allowed_lateness_ms=L, state=state, sweep_every=SWEEP, committed=lambda _p: committed[0],
                         watermarks=watermarks if markers else None)

    def restore() -> PartitionChangelog:
        return PartitionChangelog.restore(0, list(changelog.items()), lambda _k: True, make_core)

    part = restore()
    answers: dict[str, Answer] = {}
    i = 0
    for k, (c, d) in enumerate(commits):
        for cap in log[i:d]:
            answers[cap.event_id] = answer(part.core.process(cap))
        i = max(i, d)
        records = order(part.flush())
        if flushes is not None:
            flushes.append(records)
        kept = records[:(cuts or {}).get(k, len(records))]
        for key, value in kept:
            if value is None:
                changelog.pop(key, None)
            else:
                changelog[key] = value
        if len(kept) < len(records):  # killed: the offsets stay uncommitted; the next owner restores and goes back
            part = restore()
            i = committed[0] or 0
            for cap in log[i:c]:  # it goes on to the next commit from there
                answers[cap.event_id] = answer(part.core.process(cap))
            i = max(i, c)
            continue
        committed[0] = c
    for cap in log[i:]:
        answers[cap.event_id] = answer(part.core.process(cap))
    return answers


def scenario(seed: int) -> tuple[list[Capture], list[tuple[int, int]], dict[str, Answer], list[Records]]:
    log = make_log(seed)
    commits = make_commits(seed, len(log))
    flushes: list[Records] = []
    return log, commits, simulate(log, commits, flushes=flushes), flushes


def diverging_cuts(seed: int, order: Order = as_written, markers: bool = True) -> list[tuple[int, int]]:
    """(commit, prefix length) of every cut of ``seed``'s scenario, its flushes written in ``order``,
    whose answers differ from the uninterrupted run's."""
    log, commits, expected, flushes = scenario(seed)
    bad = []
    for k, records in enumerate(flushes):
        for j in range(len(records)):  # the whole flush is the uninterrupted run
            if simulate(log, commits, {k: j}, order, markers=markers) != expected:
                bad.append((k, j))
    return bad


def shuffled_entries(seed: int) -> Order:
    """The flush with its dedup keys in a random order, the markers where the worker puts them."""
    rng = random.Random(seed)

    def order(records: Records) -> Records:
        head = [r for r in records[:1] if is_marker_key(r[0])]
        tail, entries = records[-1:], records[len(head):-1]
        assert all(is_marker_key(k) for k, _v in tail) and not any(is_marker_key(k) for k, _v in entries)
        return [*head, *rng.sample(entries, len(entries)), *tail]

    return order


def shuffled_all(seed: int) -> Order:
    """The flush in a random order, its markers included."""
    rng = random.Random(seed)
    return lambda records: rng.sample(records, len(records))


def closing_marker_first(records: Records) -> Records:
    return [records[-1], *records[:-1]]


def by_last_capture(records: Records) -> Records:
    """The dedup keys by the offset of their last capture (deleted keys first), markers dropped."""
    entries = [r for r in records if not is_marker_key(r[0])]
    return sorted(entries, key=lambda r: -1 if r[1] is None else r[1]["p"][1])


SEEDS = range(12)


def test_the_scenarios_cross_commits_with_late_captures_closed_frames_and_evictions() -> None:
    for seed in SEEDS:
        _log, commits, expected, flushes = scenario(seed)
        assert len(commits) >= 5
        assert sum(kind == "touched" for kind, *_ in expected.values()) > 20
        assert any(late for *_, late in expected.values())
        assert any(v is None for records in flushes for _k, v in records)  # keys evicted


@pytest.mark.parametrize("seed", SEEDS)
def test_every_prefix_of_every_flush_in_the_workers_order_gives_the_uninterrupted_answers(seed: int) -> None:
    assert diverging_cuts(seed) == []


@pytest.mark.parametrize("seed", SEEDS)
def test_the_order_of_the_dedup_keys_does_not_matter(seed: int) -> None:
    assert diverging_cuts(seed, shuffled_entries(seed)) == []


def test_the_place_of_the_closing_marker_does() -> None:
    """The closing marker written before the entries (or anywhere, in a random order) brings the
    watermarks of the drain point to entries from before it: answers change."""
    assert any(diverging_cuts(seed, closing_marker_first) for seed in SEEDS[:4])
    assert any(diverging_cuts(seed, shuffled_all(seed)) for seed in SEEDS[:4])


@pytest.mark.parametrize("order", [as_written, by_last_capture], ids=["by_key", "by_last_capture"])
def test_without_the_marker_no_order_of_the_entries_is_safe(order: Order) -> None:
    """The watermarks rebuilt from the entries (before the marker): every order tried leaves cuts that
    change answers, the order by last capture too (a key's earlier records sit before another key's
    last one, so the two keys' entries would each have to come first)."""
    assert any(diverging_cuts(seed, order, markers=False) for seed in SEEDS[:4])


def test_the_example_of_the_module_docstring() -> None:
    """streams.frames.changelog's example: W = 1000, L = 300, keys A, B, C of one key group, the flush
    cut after A's entry (before any marker: rebuilt from the entries, B's second capture joins B's
    first frame instead of making its own; with the markers the answers stay)."""
    a, b, c = (f"{0:08x}{i:056x}" for i in (1, 2, 3))
    caps = [Capture(event_id=eid, key=key, body_hash="", content="", source="s", session="s", event_type="stop", parent=None, project=None,
                    importance="normal", event_time_ms=t, partition=0, offset=i)
            for i, (eid, key, t) in enumerate([("b1", b, 0), ("c1", c, 2000), ("b2", b, 500), ("a1", a, 5000)])]
    expected = simulate(caps, [(4, 4)])
    assert expected == {"b1": ("created", "b1", 0, False), "c1": ("created", "c1", 2000, False),
                        "b2": ("created", "b2", 500, True), "a1": ("created", "a1", 5000, False)}

    def a_first(records: Records) -> Records:
        return sorted((r for r in records if not is_marker_key(r[0])), key=lambda r: r[0] != a)

    before = simulate(caps, [(4, 4)], {0: 1}, a_first, markers=False)
    assert before == {"b1": ("created", "b1", 0, True), "c1": ("created", "c1", 2000, True),
                      "b2": ("touched", "b1", 0, True), "a1": ("created", "a1", 5000, False)}
    assert all(simulate(caps, [(4, 4)], {0: j}) == expected for j in range(5))


@pytest.mark.parametrize("seed", SEEDS[:6])
def test_kills_in_a_row_each_cutting_a_flush_give_the_uninterrupted_answers(seed: int) -> None:
    """The next owner is killed too, in the middle of its first flush (which has no opening marker:
    the restored one stays), or of a later one; and three kills in a row."""
    log, commits, expected, _flushes = scenario(seed)
    rng = random.Random(seed)
    for k in range(len(commits) - 2):
        for cuts in ({k: rng.randint(0, 4), k + 1: rng.randint(1, 6)}, {k: rng.randint(1, 6), k + 2: rng.randint(0, 6)},
                     {k: rng.randint(0, 3), k + 1: rng.randint(0, 3), k + 2: rng.randint(1, 5)}):
            assert simulate(log, commits, cuts) == expected, cuts


def test_a_changelog_without_a_marker_rebuilds_the_watermarks_and_the_first_flush_opens_with_them() -> None:
    """A changelog written before the markers (or a partition's first flush cut before its closing
    marker): the core rebuilds the watermarks from the entries, and its first flush writes them
    first, so a cut anywhere in it restores them again rather than the entries' newer ones."""
    x, y = f"{7:08x}{1:056x}", f"{7:08x}{2:056x}"
    old = {x: {"f": [["a", 1000, 2000, False, ["a"]]], "g": 1000, "p": [0, 0]}}

    def make_core(state: TrackedState, watermarks: Mapping[int, int] | None) -> DedupFold:
        return DedupFold(W, allowed_lateness_ms=L, state=state, sweep_every=0, watermarks=watermarks)

    part = PartitionChangelog.restore(0, [*old.items(), ("~watermarks:1", {"watermarks": [[7, 99]]})], lambda _k: True, make_core)
    assert part.core.group_max == {7: 1000}  # another partition's marker is not this one's
    assert part.flush() == []  # nothing changed: nothing to write
    part.core.process(Capture("b", y, "", "", "s", "s", "stop", None, None, "normal", 5000, 0, 1))
    records = part.flush()
    assert [k for k, _v in records] == ["~watermarks:0", y, "~watermarks:0"]
    assert [v for _k, v in records[::2]] == [{"watermarks": [[7, 1000]]}, {"watermarks": [[7, 5000]]}]
    again = PartitionChangelog.restore(0, [*old.items(), *records[:2]], lambda _k: True, make_core)
    assert again.core.group_max == {7: 1000}  # not 5000, which y's entry carries
    assert again.core.process(Capture("b", y, "", "", "s", "s", "stop", None, None, "normal", 5000, 0, 1)).kind == "created"
    assert again.core.group_max == {7: 5000}  # the record processed again moves the watermark as the first time
    assert again.flush() == [("~watermarks:0", {"watermarks": [[7, 5000]]})]  # and the marker follows, no entry changed
    assert again.flush() == []
