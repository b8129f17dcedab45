"""The dedup answers do not depend on partitioning, interleaving, restarts or eviction (no broker).

A log of captures with a few hundred bodies, disorder within and beyond the allowed lateness and
late arrivals is routed as ``hook-events`` routes it (the record key of the body's key group,
murmur2 mod n). Each partition is processed by its own core whose state is a changelog (a list of
writes); partitions interleave at random; a partition "crashes" at random points: its state is
rebuilt from a prefix of its changelog and it re-processes from an earlier committed offset, as a
faust worker does after kill -9. The first answer per event id (what the idempotent projection
keeps) must equal one core over the whole log in log order, for every partition count.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest

from streams.frames.capture import Capture
from streams.frames.dedup import DedupFold, FrameEvent, group_of_key
from streams.kafka.topics import partition_for
from streams.model.key_groups import group_record_key
from tests.support.dedup_helpers import cap

W, L = 10_000, 2_000


class ChangelogState(MutableMapping[str, Any]):
    """A dict whose every write is appended to a changelog (as a faust table's is)."""

    def __init__(self, log: list[tuple[str, Any]] | None = None) -> None:
        self.log: list[tuple[str, Any]] = []
        self.data: dict[str, Any] = {}
        for k, v in log or []:
            self[k] = v

    def __getitem__(self, k: str) -> Any:
        return self.data[k]

    def __setitem__(self, k: str, v: Any) -> None:
        self.data[k] = v
        self.log.append((k, v))

    def __delitem__(self, k: str) -> None:
        del self.data[k]
        self.log.append((k, None))

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def restore(log: list[tuple[str, Any]]) -> ChangelogState:
    st = ChangelogState()
    for k, v in log:
        if v is None:
            st.data.pop(k, None)
        else:
            st.data[k] = v
    st.log = list(log)
    return st


def make_log(seed: int, n: int = 2_500) -> list[tuple[str, int, str]]:
    """(body, event time ms, event id) in arrival order: pairs 300 ms apart, jitter, late ones, re-sends."""
    rng = random.Random(seed)
    out: list[tuple[int, str, int, str]] = []
    t = 0
    for i in range(n // 2):
        t += rng.randint(0, 900)
        body = f"short {rng.randint(0, 5)}" if rng.random() < 0.3 else f"turn {i} {rng.getrandbits(24)}"
        delay = rng.choice([0, 0, 0, rng.randint(0, L), rng.randint(L, 5 * W)]) if rng.random() < 0.2 else 0
        out.append((t + rng.randint(0, 500), body, t, f"e{i}a"))
        out.append((t + 300 + rng.randint(0, 500) + delay, body, t + 300, f"e{i}b"))
    out.sort()
    return [(body, et, eid) for _arr, body, et, eid in out]


def captures(log: list[tuple[str, int, str]], partitions: int) -> list[list[Capture]]:
    """The log split into partitions as hook-events holds it, with each record's offset."""
    parts: list[list[Capture]] = [[] for _ in range(partitions)]
    for body, t, eid in log:
        key = cap(body, t, eid).key
        p = partition_for(group_record_key(group_of_key(key)), partitions)
        parts[p].append(cap(body, t, eid, offset=len(parts[p])))
    return parts


def answers(events: list[FrameEvent]) -> dict[str, tuple[str, str, bool]]:
    first: dict[str, tuple[str, str, bool]] = {}
    for e in events:
        first.setdefault(e.capture.event_id, (e.kind, e.frame_id, e.late))
    return first


def run_partitioned(log: list[tuple[str, int, str]], partitions: int, seed: int, crashes: int) -> dict[str, tuple[str, str, bool]]:
    rng = random.Random(seed)
    parts = captures(log, partitions)
    emitted: list[FrameEvent] = []
    committed = [0] * partitions
    nxt = [0] * partitions
    states = [ChangelogState() for _ in range(partitions)]
    marks: list[list[int]] = [[] for _ in range(partitions)]  # changelog length after each record

    def core(p: int) -> DedupFold:
        return DedupFold(W, allowed_lateness_ms=L, state=states[p], sweep_every=37, committed=lambda _q, p=p: committed[p])

    cores = [core(p) for p in range(partitions)]
    crash_at = set(rng.sample(range(len(log)), crashes))
    steps = 0
    while any(nxt[p] < len(parts[p]) for p in range(partitions)):
        p = rng.choice([q for q in range(partitions) if nxt[q] < len(parts[q])])
        for _ in range(rng.randint(1, 40)):  # a fetch of up to 40 records
            if nxt[p] >= len(parts[p]):
                break
            c = parts[p][nxt[p]]
            emitted.append(cores[p].process(c))
            del marks[p][nxt[p]:]
            marks[p].append(len(states[p].log))
            nxt[p] += 1
            if rng.random() < 0.01:  # the consumer commits what it processed (never beyond), now and then
                committed[p] = rng.randint(committed[p], nxt[p])
            steps += 1
            if steps in crash_at:  # kill -9: the changelog keeps a prefix covering at least the committed records
                covered = marks[p][committed[p] - 1] if committed[p] else 0
                keep = rng.randint(covered, len(states[p].log))
                states[p] = restore(states[p].log[:keep])
                nxt[p] = committed[p]
                cores[p] = core(p)
    return answers(emitted)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_any_partition_count_interleaving_and_crash_gives_the_embedded_answers(seed: int) -> None:
    log = make_log(seed)
    one = DedupFold(W, allowed_lateness_ms=L, sweep_every=50)
    embedded = answers([one.process(c) for c in captures(log, 1)[0]])
    assert sum(k == "touched" for k, _f, _l in embedded.values()) > 900  # the log has double captures
    assert any(late for _k, _f, late in embedded.values())  # and late ones
    for partitions in (1, 2, 4, 7):
        got = run_partitioned(log, partitions, seed * 100 + partitions, crashes=8)
        assert got == embedded, f"{partitions} partitions"


def test_the_check_can_fail_one_watermark_for_all_groups_differs() -> None:
    """A control: with one watermark for the whole partition (the old rule), partitioning changes answers."""
    log = make_log(4)

    def one_group(_k: str) -> int:
        return 0

    one = DedupFold(W, allowed_lateness_ms=L, group_of=one_group)
    embedded = answers([one.process(c) for c in captures(log, 1)[0]])
    split = []
    for part in captures(log, 4):
        core = DedupFold(W, allowed_lateness_ms=L, group_of=one_group)
        split += [core.process(c) for c in part]
    assert answers(split) != embedded
