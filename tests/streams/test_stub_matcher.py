"""StubIndex against a brute-force plain-Python reference, plus the malformed-input cases."""

from __future__ import annotations

import base64
import math
import random
import struct
from array import array
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from streams.model.deadletter import Reason, RejectedInput
from streams.stubs.errors import StubError, code_of
from streams.stubs.events import (
    MessageEmbedded,
    StubDeleted,
    StubMatched,
    StubRefreshed,
    StubUpserted,
    decode_embedding,
    encode_embedding,
    parse_stub_event,
)
from streams.stubs.matcher import StubIndex, to_matched_events
from streams.stubs.settings import MatchPolicy, MatchSettings

MODEL = "test-embed"
CHANNELS = ("alpha", "beta")

# ---------------------------------------------------------------- the reference (plain Python)


def ref_unit(values: list[float]) -> list[float]:
    """Unit vector per streams.stubs.vectors: sequential float64 norm, float64 division, round to float32."""
    total = 0.0
    for x in values:
        total += x * x
    norm = math.sqrt(total)
    return list(array("f", [x / norm for x in values]))


def ref_similarity(a: list[float], b: list[float]) -> float:
    """Cosine similarity of two raw vectors: sequential float64 dot product of their float32 unit vectors."""
    ua, ub = ref_unit(a), ref_unit(b)
    total = 0.0
    for x, y in zip(ua, ub, strict=True):
        total += x * y  # the product is exact: both are float32 values
    return total


@dataclass
class RefIndex:
    """Stubs as a plain dict: (scope, stub_id) -> (raw vector values, archive_tokens, archive_path)."""

    stubs: dict[tuple[str | None, int], tuple[list[float], int, str]] = field(default_factory=dict)

    def match(self, channel: str, query: list[float], s: MatchSettings, stats: Counter[str] | None = None) -> list[tuple[str | None, int, float, int, int]]:
        cands = []
        for (scope, sid), (vec, tokens, _path) in self.stubs.items():
            if scope != channel and scope is not None:
                continue
            sim = ref_similarity(vec, query)
            if sim >= s.threshold:
                cands.append((sim, sid, 0 if scope == channel else 1, scope, tokens))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        out: list[tuple[str | None, int, float, int, int]] = []
        remaining = s.token_budget
        skipped = False
        for sim, sid, _order, scope, tokens in cands:
            if len(out) == s.top_n:
                break
            if tokens > remaining:
                skipped = True
                continue
            remaining -= tokens
            out.append((scope, sid, sim, len(out) + 1, tokens))
        if stats is not None:
            sims = [c[0] for c in cands]
            stats["tie"] += len(sims) - len(set(sims))
            stats["at_threshold"] += sum(1 for x in sims if x == s.threshold)
            stats["at_threshold_kept"] += sum(1 for r in out if r[2] == s.threshold)
            stats["budget_skip"] += skipped and any(True for _ in out)
            stats["mixed"] += len({r[0] is None for r in out}) == 2
            stats["nonempty"] += bool(out)
        return out

    def best(self, channel: str, query: list[float], origin: str) -> float | None:
        """The highest similarity of the channel's and the global stubs to ``query`` (at least -1), whatever the threshold."""
        sims = [ref_similarity(vec, query) for (scope, _), (vec, _t, _p) in self.stubs.items() if scope in (channel, None)]
        sims = [x for x in sims if x >= -1.0]
        return max(sims) if sims and origin == "main" else None


# ---------------------------------------------------------------- helpers


def f32(values: object) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


_counter = iter(range(10**9))


def upserted(sid: int, channel: str | None, vec: np.ndarray, tokens: int = 100, model: str = MODEL, **kw: object) -> StubUpserted:
    return StubUpserted(
        event_id=f"u{next(_counter)}",
        event_time_ms=1_000,
        stub_id=sid,
        channel=channel,
        title=f"t{sid}",
        stub_text="hook",
        archive_path=f"/arch/{channel}/{sid}.md",
        archive_tokens=tokens,
        embedding_b64=encode_embedding(vec),
        model=model,
        dim=len(vec),
        **kw,  # type: ignore[arg-type]
    )


def refreshed(sid: int, channel: str | None, vec: np.ndarray, tokens: int = 100, model: str = MODEL, t: int = 5_000) -> StubRefreshed:
    return StubRefreshed(
        event_id=f"r{next(_counter)}",
        event_time_ms=t,
        stub_id=sid,
        channel=channel,
        stub_text="new hook",
        archive_tokens=tokens,
        embedding_b64=encode_embedding(vec),
        model=model,
        dim=len(vec),
    )


def message(
    channel: str, vec: np.ndarray | None = None, *, b64: str | None = None, dim: int | None = None, origin: str = "main", model: str = MODEL
) -> MessageEmbedded:
    assert vec is not None or (b64 is not None and dim is not None)
    return MessageEmbedded(
        event_id=f"m{next(_counter)}",
        event_time_ms=2_000,
        channel=channel,
        message_id=f"msg{next(_counter)}",
        embedding_b64=b64 if b64 is not None else encode_embedding(vec),  # type: ignore[arg-type]
        model=model,
        dim=dim if dim is not None else len(vec),  # type: ignore[arg-type]
        origin=origin,  # type: ignore[arg-type]
    )


def as_tuples(matches: list) -> list[tuple[str | None, int, float, int, int]]:  # type: ignore[type-arg]
    return [(m.stub_channel, m.stub_id, m.similarity, m.rank, m.archive_tokens) for m in matches]


def random_vector(rng: random.Random, dim: int) -> np.ndarray:
    kind = rng.random()
    if kind < 0.4:  # small integers: many exact ties and exactly representable similarities
        vals = [rng.randint(-2, 2) for _ in range(dim)]
        if not any(vals):
            vals[rng.randrange(dim)] = 1
        return f32(vals)
    if kind < 0.5:  # a scaled copy of a basis-like vector
        v = [0.0] * dim
        v[rng.randrange(dim)] = rng.choice([0.5, 1.0, 3.0, -2.0])
        return f32(v)
    return f32([rng.gauss(0.0, 1.0) for _ in range(dim)])


# ---------------------------------------------------------------- the randomised comparison


def run_case(seed: int, stats: Counter[str]) -> None:
    rng = random.Random(seed)
    dim = rng.choice([1, 2, 3, 4, 5, 8, 16, 33]) if seed % 150 else 3072
    pool = [random_vector(rng, dim) for _ in range(rng.randint(1, 6))]
    scale = [1.0, 2.0, 0.25, -1.0]
    index, ref = StubIndex(), RefIndex()
    scopes: list[str | None] = [*CHANNELS, None]
    n_ops = rng.randint(1, 25) if dim < 3072 else rng.randint(1, 8)
    for _ in range(n_ops):
        scope, sid = rng.choice(scopes), rng.randint(0, 9)
        vec = pool[rng.randrange(len(pool))] * np.float32(rng.choice(scale)) if rng.random() < 0.6 else random_vector(rng, dim)
        tokens = rng.choice([0, 50, 400, 900, 1500, 3000])
        op = rng.random()
        key = (scope, sid)
        if op < 0.6:
            index.apply(upserted(sid, scope, vec, tokens))
            ref.stubs[key] = (vec.tolist(), tokens, "")
            stats["upsert"] += 1
        elif op < 0.8:
            if key in ref.stubs:
                index.apply(refreshed(sid, scope, vec, tokens))
                ref.stubs[key] = (vec.tolist(), tokens, "")
                stats["refresh"] += 1
            else:
                with pytest.raises(RejectedInput) as ei:
                    index.apply(refreshed(sid, scope, vec, tokens))
                assert code_of(ei.value) == StubError.UNKNOWN_STUB
        else:
            assert index.delete(StubDeleted(event_id="d", event_time_ms=1, stub_id=sid, channel=scope)) == (key in ref.stubs)
            if ref.stubs.pop(key, None) is not None:
                stats["delete"] += 1
    assert len(index) == len(ref.stubs)
    for sc in scopes:
        assert index.stub_ids(sc) == sorted(s for (k, s) in ref.stubs if k == sc)

    queries = [pool[rng.randrange(len(pool))] if rng.random() < 0.5 else random_vector(rng, dim) for _ in range(rng.randint(1, 4))]
    channel = rng.choice(CHANNELS)
    # threshold: random, or exactly some candidate's similarity (kept), or the next float above it (dropped)
    candidates = [k for k in ref.stubs if k[0] in (channel, None)]
    threshold = rng.uniform(-0.3, 0.95)
    mode = rng.random()
    if candidates and mode < 0.6:
        s = ref_similarity(ref.stubs[rng.choice(candidates)][0], queries[0].tolist())
        if -1.0 <= s <= 1.0:
            threshold = s if mode < 0.45 or s >= 1.0 else math.nextafter(s, 2.0)
    own = MatchSettings(threshold=threshold, top_n=rng.randint(0, 5), token_budget=rng.choice([0, 400, 1000, 2500, 4000, 10**6]))
    other = MatchSettings(threshold=rng.uniform(-1.0, 1.0), top_n=rng.randint(0, 5), token_budget=rng.randint(0, 5000))
    policy = MatchPolicy(defaults=other, overrides={channel: own}) if rng.random() < 0.5 else MatchPolicy(defaults=own, overrides={"zzz": other})
    index.policy = policy

    msgs = [message(rng.choice((channel, channel, *CHANNELS)), q, origin="subagent" if rng.random() < 0.1 else "main") for q in queries]
    batch = index.match_many(msgs)
    for m, q, got_batch in zip(msgs, queries, batch, strict=True):
        got = index.match(m)
        expected = [] if m.origin == "subagent" else ref.match(m.channel, q.tolist(), policy.for_channel(m.channel), stats)
        assert as_tuples(got) == expected, (seed, m.channel)
        assert as_tuples(got_batch) == expected, (seed, "batch")
        scored, best = index.match_scored(m)
        assert as_tuples(scored) == expected, (seed, "scored")
        assert best == ref.best(m.channel, q.tolist(), m.origin), (seed, "best")
        stats["best"] += best is not None
        stats["subagent"] += m.origin == "subagent"
        stats["messages"] += 1


def test_matcher_equals_reference_on_1200_cases() -> None:
    stats: Counter[str] = Counter()
    for seed in range(1200):
        run_case(seed, stats)
    # every rule was exercised, not just the easy path
    assert stats["messages"] >= 2500
    for key, minimum in {
        "tie": 50,
        "at_threshold_kept": 50,
        "budget_skip": 30,
        "mixed": 30,
        "nonempty": 500,
        "refresh": 300,
        "delete": 300,
        "subagent": 50,
        "best": 1500,
    }.items():
        assert stats[key] >= minimum, (key, stats)


def test_exact_threshold_kept_and_next_float_dropped() -> None:
    a, b = f32([1.0, 2.0, 3.0]), f32([3.0, 1.0, 0.5])
    s = ref_similarity(a.tolist(), b.tolist())
    index = StubIndex(MatchPolicy(defaults=MatchSettings(threshold=s)))
    index.upsert(upserted(7, "alpha", a))
    [hit] = index.match(message("alpha", b))
    assert hit.similarity == s and hit.stub_id == 7
    index.policy = MatchPolicy(defaults=MatchSettings(threshold=math.nextafter(s, 2.0)))
    assert index.match(message("alpha", b)) == []


def test_ties_by_id_then_channel_before_global_and_budget_skip() -> None:
    v = f32([0.6, 0.8, 0.0])
    index = StubIndex(MatchPolicy(defaults=MatchSettings(threshold=0.5, top_n=10, token_budget=1000)))
    index.upsert(upserted(5, None, v, tokens=100))
    index.upsert(upserted(5, "alpha", v * np.float32(2), tokens=100))
    index.upsert(upserted(3, None, v, tokens=950))
    index.upsert(upserted(9, "alpha", v, tokens=10))
    got = [(m.stub_channel, m.stub_id, m.rank) for m in index.match(message("alpha", v))]
    # 3 (global, 950 tokens) fits; 5/alpha (100) then does not fit (50 left) and is skipped, as is 5/global; 9 (10) fits
    assert got == [(None, 3, 1), ("alpha", 9, 2)]
    index.upsert(upserted(3, None, v, tokens=2000))  # now 3 never fits
    got = [(m.stub_channel, m.stub_id) for m in index.match(message("alpha", v))]
    assert got == [("alpha", 5), (None, 5), ("alpha", 9)]
    assert index.match(message("beta", v)) != [] and all(m.stub_channel is None for m in index.match(message("beta", v)))


def test_subagent_messages_get_nothing() -> None:
    v = f32([1.0, 0.0])
    index = StubIndex(MatchPolicy(defaults=MatchSettings(threshold=-1.0)))
    index.upsert(upserted(1, "alpha", v))
    index.upsert(upserted(2, None, v))
    assert len(index.match(message("alpha", v))) == 2
    assert index.match(message("alpha", v, origin="subagent")) == []
    assert index.match_many([message("alpha", v, origin="subagent"), message("alpha", v)])[0] == []
    # a subagent message with another model is not compared, so not rejected either
    assert index.match(message("alpha", v, origin="subagent", model="other")) == []


def test_matched_events_bump_telemetry() -> None:
    v = f32([1.0, 1.0])
    index = StubIndex(MatchPolicy(defaults=MatchSettings(threshold=0.9)))
    index.upsert(upserted(1, "alpha", v, match_count=4, last_matched_at_ms=9_000))
    m = message("alpha", v)
    events = to_matched_events(m, index.match(m))
    assert [(e.stub_id, e.rank, e.tokens_injected, e.event_time_ms) for e in events] == [(1, 1, 100, 2_000)]
    assert events == to_matched_events(m, index.match(m))  # deterministic ids
    for e in events:
        index.apply(e)
    rec = index.record("alpha", 1)
    assert rec is not None and rec.match_count == 5 and rec.last_matched_at_ms == 9_000
    index.apply(events[0].model_copy(update={"event_time_ms": 12_000}))
    rec = index.record("alpha", 1)
    assert rec is not None and rec.match_count == 6 and rec.last_matched_at_ms == 12_000
    index.apply(refreshed(1, "alpha", v, tokens=7, t=20_000))
    rec = index.record("alpha", 1)
    assert rec is not None and (rec.match_count, rec.archive_tokens, rec.last_refreshed_at_ms, rec.stub_text) == (6, 7, 20_000, "new hook")
    index.upsert(upserted(1, "alpha", v))  # None telemetry keeps the current values
    rec = index.record("alpha", 1)
    assert rec is not None and (rec.match_count, rec.last_refreshed_at_ms) == (6, 20_000)


def test_events_round_trip_through_json() -> None:
    v = f32([1.0, 2.0])
    m = message("alpha", v)
    evs = [upserted(1, None, v, refresh_source="file-watch"), refreshed(1, "a", v), StubDeleted(event_id="d", event_time_ms=0, stub_id=1), m]
    evs.append(StubMatched(event_id="x", event_time_ms=1, message_id="m", channel="a", stub_id=1, similarity=0.5, rank=1, tokens_injected=3))
    for ev in evs:
        assert parse_stub_event(ev.model_dump_json()) == ev
    with pytest.raises(RejectedInput) as ei:
        parse_stub_event(b"{not json")
    assert ei.value.reason == Reason.MALFORMED_JSON
    with pytest.raises(RejectedInput) as ei:
        parse_stub_event(b'{"type": "stub-exploded", "event_id": "e", "event_time_ms": 1}')
    assert ei.value.reason == Reason.WRONG_SHAPE


# ---------------------------------------------------------------- malformed input

GOOD = f32([0.5, -1.0, 2.0])


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


MALFORMED = [
    ("not-base64!!", 3, StubError.BAD_BASE64),
    ("AAAA=A", 3, StubError.BAD_BASE64),
    ("AAA", 3, StubError.BAD_BASE64),
    ("ÅÄÖ=", 3, StubError.BAD_BASE64),
    (_b64(b"\x00" * 5), 3, StubError.BAD_LENGTH),
    (_b64(b"\x00\x00\x80?" * 2 + b"\x01"), 2, StubError.BAD_LENGTH),
    (_b64(struct.pack("<2f", 1.0, 2.0)), 3, StubError.DIMENSION_MISMATCH),
    (_b64(struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)), 3, StubError.DIMENSION_MISMATCH),
    ("", 3, StubError.DIMENSION_MISMATCH),
    (_b64(struct.pack("<3f", 1.0, float("nan"), 3.0)), 3, StubError.NON_FINITE),
    (_b64(struct.pack("<3f", float("inf"), 1.0, 3.0)), 3, StubError.NON_FINITE),
    (_b64(struct.pack("<3f", 1.0, 1.0, float("-inf"))), 3, StubError.NON_FINITE),
    (_b64(struct.pack("<3f", 0.0, 0.0, 0.0)), 3, StubError.ZERO_VECTOR),
    (_b64(struct.pack("<3f", -0.0, 0.0, -0.0)), 3, StubError.ZERO_VECTOR),
]


def _assert_code(err: RejectedInput, code: StubError) -> None:
    assert err.reason == Reason.WRONG_SHAPE
    assert code_of(err) == code, err.detail
    assert err.detail.startswith(f"{code}: ")


@pytest.mark.parametrize(("b64", "dim", "code"), MALFORMED)
def test_malformed_embeddings_are_rejected_everywhere(b64: str, dim: int, code: StubError) -> None:
    with pytest.raises(RejectedInput) as ei:
        decode_embedding(b64, dim)
    _assert_code(ei.value, code)

    index = StubIndex(MatchPolicy(defaults=MatchSettings(threshold=-1.0)))
    index.upsert(upserted(1, "alpha", GOOD))
    bad_stub = upserted(2, "alpha", GOOD).model_copy(update={"embedding_b64": b64, "dim": dim})
    with pytest.raises(RejectedInput) as ei:
        index.upsert(bad_stub)
    _assert_code(ei.value, code)
    assert index.stub_ids("alpha") == [1] and index.record("alpha", 2) is None
    bad_refresh = refreshed(1, "alpha", GOOD).model_copy(update={"embedding_b64": b64, "dim": dim})
    with pytest.raises(RejectedInput) as ei:
        index.refresh(bad_refresh)
    _assert_code(ei.value, code)
    assert [m.similarity for m in index.match(message("alpha", GOOD))] == [pytest.approx(1.0)]

    for origin in ("main", "subagent"):
        for channel in ("alpha", "empty-channel"):
            bad_msg = message(channel, b64=b64, dim=dim, origin=origin)
            with pytest.raises(RejectedInput) as ei:
                index.match(bad_msg)
            _assert_code(ei.value, code)
            assert bad_msg.message_id in ei.value.detail
            with pytest.raises(RejectedInput) as ei:
                index.match_many([message("alpha", GOOD), bad_msg])
            _assert_code(ei.value, code)


def test_model_and_dimension_mismatches() -> None:
    index = StubIndex(MatchPolicy(defaults=MatchSettings(threshold=-1.0)))
    index.upsert(upserted(1, "alpha", GOOD))
    index.upsert(upserted(1, None, f32([1.0, 2.0]), model="global-model"))
    cases = [
        (message("alpha", GOOD, model="other"), StubError.MODEL_MISMATCH),
        (message("alpha", f32([1.0, 2.0, 3.0, 4.0])), StubError.DIMENSION_MISMATCH),
        (message("beta", GOOD), StubError.MODEL_MISMATCH),  # beta has no stubs, but the global set uses global-model
    ]
    for msg, code in cases:
        with pytest.raises(RejectedInput) as ei:
            index.match(msg)
        _assert_code(ei.value, code)
        with pytest.raises(RejectedInput) as ei:
            index.match_many([msg])
        _assert_code(ei.value, code)
    index.delete(StubDeleted(event_id="d", event_time_ms=1, stub_id=1))  # the global set is empty again
    assert [m.stub_id for m in index.match(message("alpha", GOOD))] == [1]
    assert index.match(message("beta", GOOD)) == []

    index.upsert(upserted(2, "alpha", GOOD))
    for ev, code in [
        (upserted(3, "alpha", GOOD, model="other"), StubError.MODEL_MISMATCH),
        (upserted(3, "alpha", f32([1.0, 2.0])), StubError.DIMENSION_MISMATCH),
        (refreshed(2, "alpha", f32([1.0, 2.0])), StubError.DIMENSION_MISMATCH),
    ]:
        with pytest.raises(RejectedInput) as ei:
            index.apply(ev)
        _assert_code(ei.value, code)
    # replacing the only stub of a scope may change its model
    index.upsert(upserted(4, "beta", GOOD))
    index.upsert(upserted(4, "beta", f32([1.0, 2.0]), model="new-model"))
    assert [m.stub_id for m in index.match(message("beta", f32([1.0, 2.0]), model="new-model"))] == [4]


def test_encode_rejects_non_vectors() -> None:
    with pytest.raises(RejectedInput) as ei:
        encode_embedding(np.zeros((2, 2)))
    _assert_code(ei.value, StubError.BAD_SHAPE)


@settings(max_examples=200, deadline=None)
@given(arrays(np.float32, st.integers(1, 64), elements=st.floats(-(2.0**100), 2.0**100, width=32, allow_subnormal=True)))
def test_encode_decode_round_trip(vec: np.ndarray) -> None:
    if not vec.any():
        with pytest.raises(RejectedInput):
            decode_embedding(encode_embedding(vec), len(vec))
        return
    out = decode_embedding(encode_embedding(vec), len(vec))
    assert out.dtype == np.float32 and out.tobytes() == vec.astype("<f4").tobytes()


@settings(max_examples=200, deadline=None)
@given(
    arrays(np.float32, 6, elements=st.floats(-1e6, 1e6, width=32)),
    st.lists(arrays(np.float32, 6, elements=st.floats(-1e6, 1e6, width=32)), min_size=1, max_size=8),
    st.floats(-1.0, 1.0),
    st.integers(0, 4),
)
def test_matcher_equals_reference_hypothesis(query: np.ndarray, stubs: list[np.ndarray], threshold: float, top_n: int) -> None:
    s = MatchSettings(threshold=threshold, top_n=top_n, token_budget=250)
    index, ref = StubIndex(MatchPolicy(defaults=s)), RefIndex()
    for i, v in enumerate(stubs):
        if v.any():
            scope = "alpha" if i % 2 else None
            index.upsert(upserted(i % 3, scope, v, tokens=(i * 70) % 200))
            ref.stubs[(scope, i % 3)] = (v.tolist(), (i * 70) % 200, "")
    if not query.any():
        return
    assert as_tuples(index.match(message("alpha", query))) == ref.match("alpha", query.tolist(), s)
