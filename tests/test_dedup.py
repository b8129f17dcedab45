"""The dedup core: the seed's tests, window semantics, at-least-once, properties."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.body_hash import KeyStrategy
from streams.dedup import DedupCore
from tests.dedup_helpers import cap, fold, run

GW = "[hm session:openclaw-gateway:c1 src:openclaw event:stop] "
CC = "[hm session:s2 src:claude-code event:stop] "


def test_seed_1_cross_source_collapse() -> None:
    core = DedupCore(60_000)
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
    evs = run(DedupCore(60_000), [cap(GW + "BODY one", 0, "a"), cap(GW + "BODY two", 1, "b")])
    assert [e.kind for e in evs] == ["created", "created"]
    assert len(fold(evs)) == 2


def test_seed_3_unprefixed_and_mixed() -> None:
    evs = run(DedupCore(60_000), [cap("plain body", 0, "a"), cap("plain body", 5, "b")])
    assert [e.kind for e in evs] == ["created", "touched"]
    evs = run(DedupCore(60_000), [cap(CC + "same", 0, "c"), cap("same", 5, "d")])
    assert [e.kind for e in evs] == ["created", "touched"]


def test_seed_4_duplicate_older_than_window_not_found() -> None:
    w = 60_000
    core = DedupCore(w)
    evs = run(core, [cap(GW + "B", 0, "a"), cap(CC + "B", w, "b"), cap(CC + "B", w + 1, "c")])
    assert [e.kind for e in evs] == ["created", "touched", "created"]  # exactly W apart still matches


def test_window_is_anchored_per_key_not_on_clock_boundaries() -> None:
    # 23:59:59.9 and 00:00:00.1 straddle a day and a minute boundary; still one frame.
    day = 86_400_000
    evs = run(DedupCore(1000), [cap(GW + "x", day - 100, "a"), cap(CC + "x", day + 100, "b")])
    assert [e.kind for e in evs] == ["created", "touched"]


def test_out_of_order_within_window_is_a_touch() -> None:
    evs = run(DedupCore(1000), [cap(GW + "x", 5000, "a"), cap(CC + "x", 4200, "b")])
    assert [e.kind for e in evs] == ["created", "touched"]


def test_unbounded_window_keeps_state_forever() -> None:
    core = DedupCore(None, allowed_lateness_ms=0)
    evs = run(core, [cap("x", 0, "a"), cap("y", 10**12, "b"), cap("x", 2 * 10**12, "c")])
    assert [e.kind for e in evs] == ["created", "created", "touched"]
    assert core.evict() == 0


def test_eviction_by_event_time_watermark() -> None:
    core = DedupCore(1000, allowed_lateness_ms=500, sweep_every=0)
    run(core, [cap("x", 0, "a"), cap("y", 1200, "b")])
    assert core.watermark_ms == 700
    assert core.evict() == 0  # x's window ends at 1000 > 700
    run(core, [cap("z", 1600, "c")])  # watermark 1100
    assert core.evict() == 1
    assert set(core.state) == {cap("y", 0, "q").key, cap("z", 0, "q").key}
    assert core.evict() == 0


def test_reprocessed_record_is_not_a_duplicate_of_itself() -> None:
    core = DedupCore(60_000)
    first = cap(GW + "B", 0, "a", offset=7)
    again = run(core, [first, cap(CC + "B", 10, "b"), first])
    assert [e.kind for e in again] == ["created", "touched", "created"]
    assert again[2].frame_id == "a"
    assert fold(again)["a"]["access_count"] == 2


def test_two_events_of_one_input_record_are_distinct_captures() -> None:
    # a transcript line and the gateway capture made of it share a position, not an event id
    core = DedupCore(60_000)
    evs = run(core, [cap(CC + "B", 0, "a", offset=3), cap(GW + "B", 250, "a-gw", offset=3)])
    assert [e.kind for e in evs] == ["created", "touched"] and evs[1].frame_id == "a"


def test_body_event_strategy_separates_events() -> None:
    p = "[hm src:codex event:user-prompt-submit] "
    s = "[hm src:codex event:stop] "
    core = DedupCore(60_000)
    evs = run(core, [cap(p + "continue", 0, "a", strategy=KeyStrategy.BODY_EVENT),
                     cap(s + "continue", 1, "b", strategy=KeyStrategy.BODY_EVENT)])
    assert [e.kind for e in evs] == ["created", "created"]
    evs = run(DedupCore(60_000), [cap(p + "continue", 0, "a"), cap(s + "continue", 1, "b")])
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
    core = DedupCore(10_000)
    once = run(core, caps)
    twice = once + run(core, caps)
    assert _summary(once) == _summary(twice)
    assert {e.frame_id for e in twice} == {e.frame_id for e in once}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(sources, st.integers(0, 10_000)), min_size=1, max_size=20), st.randoms(use_true_random=False))
def test_duplicates_in_another_order_within_the_window_give_the_same_frames(entries, rnd) -> None:  # type: ignore[no-untyped-def]
    # all captures of one body within W of each other: any order gives one frame with every capture
    caps = [cap(src + "same body", t, f"e{i}", offset=i) for i, (src, t) in enumerate(entries)]
    shuffled = caps[:]
    rnd.shuffle(shuffled)
    a = _summary(run(DedupCore(10_000), caps))
    b = _summary(run(DedupCore(10_000), shuffled))
    assert a == b
    assert len(a) == 1 and next(iter(a))[1] == len(caps)
