"""The dedup core: the seed's tests, window semantics, at-least-once, properties."""

from __future__ import annotations

import copy
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.frames.dedup import DedupFold, group_of_key
from streams.model.body_hash import KeyStrategy
from tests.support.dedup_helpers import cap, fold, run

GW = "[hm session:openclaw-gateway:c1 src:openclaw event:stop] "
CC = "[hm session:s2 src:claude-code event:stop] "


def test_seed_1_cross_source_collapse() -> None:
    core = DedupFold(60_000)
    evs = run(core, [cap(GW + "BODY", 1000, "a"), cap(CC + "BODY", 1400, "b")])
    assert [e.kind for e in evs] == ["created", "touched"]
    assert evs[1].frame_id == evs[0].frame_id == "a"
    frames = fold(evs)
    assert len(frames) == 1
    assert frames["a"]["access_count"] == 2
    assert frames["a"]["sources"] == Counter({"openclaw": 1, "claude-code": 1})
    assert evs[1].capture.source == "claude-code"  # the touch keeps the duplicate's provenance
    assert evs[0].capture.content == GW + "BODY"  # first writer verbatim


def test_seed_2_different_bodies_never_merge() -> None:
    evs = run(DedupFold(60_000), [cap(GW + "BODY one", 0, "a"), cap(GW + "BODY two", 1, "b")])
    assert [e.kind for e in evs] == ["created", "created"]
    assert len(fold(evs)) == 2


def test_seed_3_unprefixed_and_mixed() -> None:
    evs = run(DedupFold(60_000), [cap("plain body", 0, "a"), cap("plain body", 5, "b")])
    assert [e.kind for e in evs] == ["created", "touched"]
    evs = run(DedupFold(60_000), [cap(CC + "same", 0, "c"), cap("same", 5, "d")])
    assert [e.kind for e in evs] == ["created", "touched"]


def test_seed_4_duplicate_older_than_window_not_found() -> None:
    w = 60_000
    core = DedupFold(w)
    evs = run(core, [cap(GW + "B", 0, "a"), cap(CC + "B", w, "b"), cap(CC + "B", w + 1, "c")])
    assert [e.kind for e in evs] == ["created", "touched", "created"]  # exactly W apart still matches


def test_window_is_anchored_per_key_not_on_clock_boundaries() -> None:
    # 23:59:59.9 and 00:00:00.1 straddle a day and a minute boundary; still one frame.
    day = 86_400_000
    evs = run(DedupFold(1000), [cap(GW + "x", day - 100, "a"), cap(CC + "x", day + 100, "b")])
    assert [e.kind for e in evs] == ["created", "touched"]


def test_out_of_order_within_window_is_a_touch() -> None:
    evs = run(DedupFold(1000), [cap(GW + "x", 5000, "a"), cap(CC + "x", 4200, "b")])
    assert [e.kind for e in evs] == ["created", "touched"]


def test_unbounded_window_keeps_state_forever() -> None:
    core = DedupFold(None, allowed_lateness_ms=0)
    evs = run(core, [cap("x", 0, "a"), cap("y", 10**12, "b"), cap("x", 2 * 10**12, "c")])
    assert [e.kind for e in evs] == ["created", "created", "touched"]
    assert core.evict() == 0


def _same_group(body: str, n: int) -> list[str]:
    """``n`` bodies (``body`` + a suffix) whose keys fall in the key group of ``body``."""
    g = group_of_key(cap(body, 0, "q").key)
    out, i = [], 0
    while len(out) < n:
        b = f"{body} {i}"
        if group_of_key(cap(b, 0, "q").key) == g:
            out.append(b)
        i += 1
    return out


def test_eviction_by_the_key_groups_watermark() -> None:
    x, y, z = _same_group("x", 3)
    core = DedupFold(1000, allowed_lateness_ms=500, sweep_every=0)
    run(core, [cap(x, 0, "a"), cap(y, 1200, "b")])
    g = group_of_key(cap(x, 0, "q").key)
    assert core.watermark_ms(g) == 700
    assert core.evict() == 0  # x's frame closes at 1000 >= 700
    run(core, [cap(z, 1600, "c")])  # watermark 1100
    assert core.evict() == 1
    assert cap(x, 0, "q").key not in core.state
    assert set(core.state) == {cap(y, 0, "q").key, cap(z, 0, "q").key}
    assert core.evict() == 0


def test_a_capture_of_another_key_group_moves_no_watermark() -> None:
    x = "body of group one"
    other = next(f"other {i}" for i in range(1000) if group_of_key(cap(f"other {i}", 0, "q").key) != group_of_key(cap(x, 0, "q").key))
    core = DedupFold(1000, allowed_lateness_ms=0, sweep_every=0)
    evs = run(core, [cap(x, 0, "a"), cap(other, 10**9, "b"), cap(x, 900, "c")])
    assert [e.kind for e in evs] == ["created", "created", "touched"]  # x's group never saw t = 10**9
    assert not evs[2].late


def test_a_late_capture_after_its_frame_closed_starts_a_frame_and_its_pair_joins_it() -> None:
    x, y = _same_group("late body", 2)
    core = DedupFold(1000, allowed_lateness_ms=100, sweep_every=0)
    evs = run(core, [cap(x, 0, "a"), cap(y, 5000, "b"), cap(x, 300, "c"), cap(x, 650, "d")])
    # the group's watermark is 4900 when "c" arrives: frame "a" (closes at 1000) is closed
    assert [(e.kind, e.frame_id, e.late) for e in evs] == [("created", "a", False), ("created", "b", False),
                                                            ("created", "c", True), ("touched", "c", True)]
    # the late frame stays open for W of watermark progress: until the watermark passes 4900 + 1000
    # (g is 1050 after b: a new frame; it moves the watermark to 5950 > 5900, so h finds c closed)
    evs = run(core, [cap(y, 5950, "e"), cap(x, 700, "f"), cap(y, 6050, "g"), cap(x, 710, "h")])
    assert [(e.kind, e.frame_id) for e in evs] == [("touched", "b"), ("touched", "c"), ("created", "g"), ("created", "h")]


def test_a_capture_within_the_lateness_is_not_late() -> None:
    core = DedupFold(1000, allowed_lateness_ms=500, sweep_every=0)
    evs = run(core, [cap("x", 1000, "a"), cap("x", 600, "b"), cap("x", 400, "c")])
    assert [(e.kind, e.late) for e in evs] == [("created", False), ("touched", False), ("touched", True)]


def test_state_rebuilds_the_group_watermarks() -> None:
    x, y = _same_group("restore", 2)
    core = DedupFold(1000, allowed_lateness_ms=0, sweep_every=0)
    run(core, [cap(x, 0, "a"), cap(y, 5000, "b")])
    restored = DedupFold(1000, allowed_lateness_ms=0, sweep_every=0, state=dict(core.state))
    assert restored.group_max == core.group_max
    assert restored.process(cap(x, 10, "c")).kind == "created"  # frame "a" closed at 1000 < 5000


def test_eviction_waits_for_the_committed_offset() -> None:
    x, y = _same_group("gc", 2)
    committed = {0: 0}
    core = DedupFold(1000, allowed_lateness_ms=0, sweep_every=0, committed=lambda p: committed.get(p))
    run(core, [cap(x, 0, "a", offset=0), cap(y, 9000, "b", offset=1)])
    assert core.evict() == 0  # x's last capture (offset 0) could still be processed again
    committed[0] = 1
    assert core.evict() == 1


def test_reprocessed_record_is_not_a_duplicate_of_itself() -> None:
    core = DedupFold(60_000)
    first = cap(GW + "B", 0, "a", offset=7)
    again = run(core, [first, cap(CC + "B", 10, "b"), first])
    assert [e.kind for e in again] == ["created", "touched", "created"]
    assert again[2].frame_id == "a"
    assert fold(again)["a"]["access_count"] == 2


def test_a_late_touch_processed_again_is_late_again() -> None:
    """A re-processed record (state restored ahead of the committed offset) re-emits its late flag too:
    the projector stores it (``frame_captures.is_late``) from whichever answer it reads first."""
    x, y = _same_group("late again", 2)
    core = DedupFold(1000, allowed_lateness_ms=300, sweep_every=0)
    caps = [cap(x, 1000, "a"), cap(y, 2000, "b"), cap(x, 1500, "c"), cap(x, 1600, "d")]
    first = run(core, caps)
    assert [(e.kind, e.frame_id, e.late) for e in first] == [("created", "a", False), ("created", "b", False),
                                                              ("touched", "a", True), ("touched", "a", True)]
    restored = DedupFold(1000, allowed_lateness_ms=300, sweep_every=0, state=dict(core.state))
    assert run(restored, caps) == first  # every answer again, the late flags included
    assert run(core, caps) == first
    assert dict(restored.state) == dict(core.state)  # and nothing changed


def test_a_frame_keeps_its_captures_first_event_times_and_entries_from_before_are_upgraded() -> None:
    """Each absorbed capture's event time as first processed is kept beside its id (what a read-again
    capture moves the watermark by, not its own time); a frame stored before the late touches and
    times were kept (five items) gains them, ``None`` for the ids it held, when it next absorbs one."""
    x, y = _same_group("times kept", 2)
    core = DedupFold(1000, allowed_lateness_ms=300, sweep_every=0)
    run(core, [cap(x, 1000, "a"), cap(x, 1200, "b")])
    (f,) = core.state[cap(x, 0, "q").key]["f"]
    assert f[4:] == [["a", "b"], [], [1000, 1200]]
    old = {cap(x, 0, "q").key: {"f": [["a", 1000, 2000, False, ["a"]]], "g": 1000, "p": [0, 1]}}
    core = DedupFold(1000, allowed_lateness_ms=300, sweep_every=0, state=dict(old))
    assert core.process(cap(x, 1100, "b")).frame_id == "a"
    (f,) = core.state[cap(x, 0, "q").key]["f"]
    assert f[4:] == [["a", "b"], [], [None, 1100]]
    core.group_max[group_of_key(cap(y, 0, "q").key)] = 500  # below both: a read-again "a" (time unknown) moves nothing,
    core.process(cap(x, 9000, "a"))                         # a read-again "b" moves it to b's first time, not 9000
    assert core.group_max[group_of_key(cap(y, 0, "q").key)] == 500
    core.process(cap(x, 9000, "b"))
    assert core.group_max[group_of_key(cap(y, 0, "q").key)] == 1100


def test_two_events_of_one_input_record_are_distinct_captures() -> None:
    # a transcript line and the gateway capture made of it share a position, not an event id
    core = DedupFold(60_000)
    evs = run(core, [cap(CC + "B", 0, "a", offset=3), cap(GW + "B", 250, "a-gw", offset=3)])
    assert [e.kind for e in evs] == ["created", "touched"] and evs[1].frame_id == "a"


def test_body_event_strategy_separates_events() -> None:
    p = "[hm src:codex event:user-prompt-submit] "
    s = "[hm src:codex event:stop] "
    core = DedupFold(60_000)
    evs = run(core, [cap(p + "continue", 0, "a", strategy=KeyStrategy.BODY_EVENT),
                     cap(s + "continue", 1, "b", strategy=KeyStrategy.BODY_EVENT)])
    assert [e.kind for e in evs] == ["created", "created"]
    evs = run(DedupFold(60_000), [cap(p + "continue", 0, "a"), cap(s + "continue", 1, "b")])
    assert [e.kind for e in evs] == ["created", "touched"]


# --- properties ---------------------------------------------------------------------------
bodies = st.sampled_from(["alpha", "beta", "continue", "gamma delta"])
sources = st.sampled_from([GW, CC, "[hm src:codex event:stop] ", ""])
log_entries = st.lists(st.tuples(bodies, sources, st.integers(0, 50_000)), min_size=1, max_size=40)


def _caps(entries: list[tuple[str, str, int]]) -> list:
    return [cap(src + body, t, f"e{i}", offset=i) for i, (body, src, t) in enumerate(entries)]


def _summary(events: list) -> set[tuple[str, int, tuple[tuple[str, int], ...]]]:
    return {(f["body_hash"], f["access_count"], tuple(sorted(f["sources"].items()))) for f in fold(events).values()}


@settings(max_examples=200, deadline=None)
@given(log_entries)
def test_processing_a_log_twice_gives_the_same_frames(entries: list[tuple[str, str, int]]) -> None:
    caps = _caps(entries)
    core = DedupFold(10_000)
    once = run(core, caps)
    state = copy.deepcopy(dict(core.state))
    again = run(core, caps)
    assert again == once  # each record read again gets its first answer (frame, kind, anchor, late flag)
    assert _summary(again) == _summary(once)  # the second pass alone folds to the same frames
    assert dict(core.state) == state  # and changed no frame


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(sources, st.integers(0, 10_000)), min_size=1, max_size=20), st.randoms(use_true_random=False))
def test_duplicates_in_another_order_within_the_window_give_the_same_frames(entries, rnd) -> None:  # type: ignore[no-untyped-def]
    # all captures of one body within W of each other: any order gives one frame with every capture
    caps = [cap(src + "same body", t, f"e{i}", offset=i) for i, (src, t) in enumerate(entries)]
    shuffled = caps[:]
    rnd.shuffle(shuffled)
    a = _summary(run(DedupFold(10_000), caps))
    b = _summary(run(DedupFold(10_000), shuffled))
    assert a == b
    assert len(a) == 1 and next(iter(a))[1] == len(caps)
