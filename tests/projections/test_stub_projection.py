"""The stub projection: DuckDB equals the pure replay, re-runs apply nothing twice, bad input is dead-lettered, queries answer."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest

from hivestream.embedded.stubs import run_stub_logs
from projections.stubs.projection import StubMetaMismatch, stored_settings
from projections.stubs.queries import STUB_QUERIES, run_stub_query
from streams.model.deadletter import Reason, RejectedInput
from streams.stubs.events import MessageEmbedded, StubDeleted, StubRefreshed, StubUpserted, encode_embedding
from streams.stubs.log import LogEntry, StubEventT, read_log, source_name, write_log
from streams.stubs.replay import StubRunResult, run_stub_events
from streams.stubs.settings import MatchPolicy, MatchSettings

MODEL = "test-embed"
T0 = 1_777_900_000_000  # 2026-05-04T13:06:40Z
HOUR = 3_600_000
POLICY = MatchPolicy(defaults=MatchSettings(threshold=0.6, top_n=2, token_budget=500))


def b64(v: np.ndarray) -> str:
    return encode_embedding(v.astype(np.float32))


def stub(sid: int, channel: str | None, v: np.ndarray, t: int, tokens: int = 100, **kw: object) -> StubUpserted:
    return StubUpserted(event_id=f"up-{channel}-{sid}-{t}", event_time_ms=t, stub_id=sid, channel=channel, title=f"stub {sid}",
                        stub_text=f"hook {sid}", archive_path=f"/archive/{channel}/{sid}.md", archive_tokens=tokens,
                        embedding_b64=b64(v), model=MODEL, dim=v.shape[0], **kw)  # type: ignore[arg-type]


def refresh(sid: int, channel: str | None, v: np.ndarray, t: int, tokens: int = 100) -> StubRefreshed:
    return StubRefreshed(event_id=f"re-{channel}-{sid}-{t}", event_time_ms=t, stub_id=sid, channel=channel, stub_text=f"hook {sid} v2",
                         archive_tokens=tokens, embedding_b64=b64(v), model=MODEL, dim=v.shape[0])


def msg(mid: str, channel: str, v: np.ndarray, t: int, origin: str = "main") -> MessageEmbedded:
    return MessageEmbedded(event_id=f"msg-{channel}-{mid}", event_time_ms=t, channel=channel, message_id=mid,
                           embedding_b64=b64(v), model=MODEL, dim=v.shape[0], origin=origin)  # type: ignore[arg-type]


def mix(rng: np.random.Generator, target: np.ndarray, weight: float) -> np.ndarray:
    """A vector whose similarity to ``target`` is roughly ``weight`` (64+ dims: random vectors are near-orthogonal)."""
    noise = rng.standard_normal(target.shape[0])
    noise -= noise @ target / (target @ target) * target
    return weight * target / np.linalg.norm(target) + np.sqrt(max(0.0, 1 - weight**2)) * noise / np.linalg.norm(noise)


def scenario(seed: int = 7, dim: int = 64, n_messages: int = 60) -> list[StubEventT]:
    """Two channels plus global stubs; messages near the stubs at similarities spread around 0.6;
    a refresh, a delete and a re-upsert mid-log; subagent messages and unrelated messages."""
    rng = np.random.default_rng(seed)
    stubs = {("alpha", i): rng.standard_normal(dim) for i in (1, 2, 3)}
    stubs |= {("beta", i): rng.standard_normal(dim) for i in (1, 2)}
    stubs |= {(None, i): rng.standard_normal(dim) for i in (1, 2)}
    events: list[StubEventT] = [
        stub(i, c, v, T0 - 48 * HOUR, tokens=100 * i + (50 if c is None else 0), match_count=5 if i == 1 else None,
             last_matched_at_ms=T0 - 30 * HOUR if i == 1 else None)
        for (c, i), v in stubs.items()
    ]
    keys = list(stubs)
    for n in range(n_messages):
        t = T0 + n * 60_000
        if n == n_messages // 3:
            stubs[("alpha", 2)] = rng.standard_normal(dim)
            events.append(refresh(2, "alpha", stubs[("alpha", 2)], t - 1, tokens=250))
        if n == n_messages // 2:
            events.append(StubDeleted(event_id="del-beta-2", event_time_ms=t - 1, stub_id=2, channel="beta"))
        if n == 2 * n_messages // 3:
            events.append(stub(2, "beta", stubs[("beta", 2)], t - 1, tokens=120))
        ch, sid = keys[int(rng.integers(len(keys)))]
        channel = ch or str(rng.choice(["alpha", "beta"]))
        v = rng.standard_normal(dim) if n % 9 == 0 else mix(rng, stubs[(ch, sid)], float(rng.uniform(0.45, 0.9)))
        events.append(msg(f"m{n}", channel, v, t, origin="subagent" if n % 11 == 5 else "main"))
    return events


def db_matches(db: Path) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("""SELECT message_id, channel, stub_channel, stub_id, similarity, rank, tokens_injected, event_time_ms, event_id
                              FROM stub_matches ORDER BY event_time_ms, rank""").fetchall()
    finally:
        con.close()


def pure_matches(res: StubRunResult) -> list[tuple[object, ...]]:
    return sorted(((m.message_id, m.channel, m.stub_channel or "", m.stub_id, m.similarity, m.rank, m.tokens_injected, m.event_time_ms, m.event_id)
                   for m in res.matches), key=lambda r: (r[7], r[5]))


def db_rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def snapshot(db: Path) -> dict[str, list[tuple[object, ...]]]:
    return {t: db_rows(db, f"SELECT * FROM {t} ORDER BY ALL") for t in ("stubs", "stub_vectors", "stub_matches", "stub_messages", "stub_positions")}


def fixed_clock() -> int:
    return T0


def test_projection_equals_pure_replay(tmp_path: Path) -> None:
    events = scenario()
    log = tmp_path / "log.jsonl"
    write_log(log, events)
    res = run_stub_events(events, POLICY)
    assert res.matches and res.unmatched and not res.rejections
    report = run_stub_logs([read_log(log)], tmp_path / "p.duckdb", POLICY, batch_size=7, clock=fixed_clock)
    db = tmp_path / "p.duckdb"
    assert db_matches(db) == pure_matches(res)
    assert report.matches == len(res.matches) and report.items == len(events)
    msgs = db_rows(db, "SELECT channel, message_id, origin, matched, match_count, tokens_injected, best_similarity FROM stub_messages ORDER BY event_time_ms")
    assert msgs == [(m.channel, m.message_id, m.origin, m.matched, m.match_count, m.tokens_injected, m.best_similarity) for m in res.messages]
    assert {(c, i) for c, i, *_ in db_rows(db, "SELECT channel, message_id FROM stub_messages WHERE origin = 'main' AND NOT matched")} == {
        (m.channel, m.message_id) for m in res.unmatched}
    assert all(not m.matched and m.best_similarity is None for m in res.messages if m.origin == "subagent")
    stubs = db_rows(db, "SELECT channel, stub_id, match_count, last_matched_at_ms, last_refreshed_at_ms, archive_tokens, deleted FROM stubs ORDER BY ALL")
    want = sorted((c or "", i, r.match_count, r.last_matched_at_ms, r.last_refreshed_at_ms, r.archive_tokens, (c, i) in res.deleted)
                  for (c, i), r in res.stubs.items())
    assert stubs == want
    # imported starting counts survive: match_count = imported + matches in this log
    for (c, i), r in res.stubs.items():
        n = sum(1 for m in res.matches if (m.stub_channel, m.stub_id) == (c, i))
        assert r.match_count == (5 if i == 1 else 0) + n
    assert stored_settings(db) == POLICY.defaults


def test_rerun_applies_nothing_twice_and_resumes_after_a_crash(tmp_path: Path) -> None:
    events = scenario(seed=11)
    stubs_log, msgs_log = tmp_path / "stubs.jsonl", tmp_path / "messages.jsonl"
    first_msg = next(n for n, e in enumerate(events) if isinstance(e, MessageEmbedded))
    write_log(stubs_log, events[:first_msg])
    write_log(msgs_log, events[first_msg:])
    res = run_stub_events(events, POLICY)
    one = tmp_path / "one.duckdb"
    run_stub_logs([read_log(stubs_log), read_log(msgs_log)], one, POLICY, batch_size=5, clock=fixed_clock)
    before = snapshot(one)
    again = run_stub_logs([read_log(stubs_log), read_log(msgs_log)], one, POLICY, batch_size=5, clock=fixed_clock)
    assert (again.items, again.skipped, again.matches) == (0, len(events), 0)
    assert snapshot(one) == before

    # separate invocations per file: the stub state is restored from the tables
    two = tmp_path / "two.duckdb"
    run_stub_logs([read_log(stubs_log)], two, POLICY, clock=fixed_clock)
    run_stub_logs([read_log(msgs_log)], two, POLICY, batch_size=3, clock=fixed_clock)
    assert snapshot(two) == before

    # a crash after some committed batches: the re-run continues where the last batch committed
    three = tmp_path / "three.duckdb"

    def crashing() -> object:
        for n, e in enumerate(read_log(msgs_log)):
            if n == 23:
                raise KeyboardInterrupt
            yield e

    run_stub_logs([read_log(stubs_log)], three, POLICY, clock=fixed_clock)
    with pytest.raises(KeyboardInterrupt):
        run_stub_logs([crashing()], three, POLICY, batch_size=4, clock=fixed_clock)  # type: ignore[list-item]
    assert 0 < len(db_rows(three, "SELECT * FROM stub_messages")) < len(res.messages)
    rerun = run_stub_logs([read_log(msgs_log)], three, POLICY, batch_size=4, clock=fixed_clock)
    assert rerun.skipped == 20  # five batches of four committed before the crash
    assert snapshot(three) == before
    assert db_matches(three) == pure_matches(res)


def test_repeated_message_counts_once(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    v = rng.standard_normal(64)
    m = msg("m1", "alpha", v, T0)
    events: list[StubEventT] = [stub(1, "alpha", v, T0 - 1), m, m.model_copy(update={"event_id": "other"})]
    res = run_stub_events(events, POLICY)
    assert (len(res.matches), res.repeated, res.stubs[("alpha", 1)].match_count) == (1, 1, 1)
    log = tmp_path / "log.jsonl"
    write_log(log, events)
    run_stub_logs([read_log(log)], tmp_path / "p.duckdb", POLICY)
    write_log(tmp_path / "again.jsonl", [m])  # the same message in another file: still once
    assert run_stub_logs([read_log(tmp_path / "again.jsonl")], tmp_path / "p.duckdb", POLICY).repeated == 1
    assert db_rows(tmp_path / "p.duckdb", "SELECT match_count FROM stubs") == [(1,)]


def test_malformed_input_is_dead_lettered_and_the_run_goes_on(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    v, w = rng.standard_normal(64), rng.standard_normal(64)
    good = [stub(1, "alpha", v, T0), msg("ok1", "alpha", v, T0 + 1)]
    bad_b64 = msg("bad1", "alpha", v, T0 + 2).model_copy(update={"embedding_b64": "!!not base64!!"})
    short = msg("bad2", "alpha", v, T0 + 3).model_copy(update={"dim": 65})
    zero = stub(2, "alpha", np.zeros(64), T0 + 4)
    other_model = msg("bad3", "alpha", v, T0 + 5).model_copy(update={"model": "other"})
    unknown = refresh(9, "alpha", w, T0 + 6)
    log = tmp_path / "log.jsonl"
    write_log(log, [*good, bad_b64, short, zero, other_model, unknown])
    with log.open("ab") as fh:
        fh.write(b'{"type": "message-embedded", "oops"\n\xff\xfe not utf8\n\n')
    write_log(tmp_path / "more.jsonl", [msg("ok2", "alpha", v, T0 + 10)])
    db = tmp_path / "p.duckdb"
    report = run_stub_logs([read_log(log), read_log(tmp_path / "more.jsonl")], db, POLICY, clock=fixed_clock)
    dls = db_rows(db, "SELECT src_offset, reason, split_part(detail, ':', 1), event_key, time_ms FROM stub_dead_letters ORDER BY src_offset")
    assert [(o, r, c) for o, r, c, _k, _t in dls] == [
        (2, "wrong_shape", "bad_base64"), (3, "wrong_shape", "dimension_mismatch"), (4, "wrong_shape", "zero_vector"),
        (5, "wrong_shape", "model_mismatch"), (6, "wrong_shape", "unknown_stub"), (7, "malformed_json", dls[5][2]), (8, "malformed_json", dls[6][2]),
    ]
    assert dls[0][3] == bad_b64.event_id and dls[5][3] == "" and dls[0][4] == T0
    assert report.dead_letters["bad_base64"] == 1 and sum(report.dead_letters.values()) == 7
    assert db_rows(db, "SELECT message_id, matched FROM stub_messages ORDER BY ALL") == [("ok1", True), ("ok2", True)]
    assert db_rows(db, "SELECT count(*) FROM stubs") == [(1,)]
    # dead letters are idempotent too
    run_stub_logs([read_log(log)], db, POLICY, clock=fixed_clock)
    assert len(db_rows(db, "SELECT * FROM stub_dead_letters")) == 7
    original = db_rows(db, "SELECT original FROM stub_dead_letters WHERE src_offset = 8")[0][0]
    assert original == b"\xff\xfe not utf8"
    con = duckdb.connect(str(db), read_only=True)
    _cols, rows = run_stub_query(con, "dead-letters")
    con.close()
    assert {r[0] for r in rows} == {"bad_base64", "dimension_mismatch", "zero_vector", "model_mismatch", "unknown_stub", "malformed_json"}


def test_other_settings_on_the_same_file_are_refused(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    write_log(log, scenario(n_messages=3))
    run_stub_logs([read_log(log)], tmp_path / "p.duckdb", POLICY)
    with pytest.raises(StubMetaMismatch, match="threshold"):
        run_stub_logs([read_log(log)], tmp_path / "p.duckdb", MatchPolicy(defaults=MatchSettings(threshold=0.7, top_n=2, token_budget=500)))


def test_shares_a_file_with_the_frames_projection(tmp_path: Path) -> None:
    from projections.frames.projection import FramesProjection

    db = tmp_path / "both.duckdb"
    FramesProjection(db).close()
    log = tmp_path / "log.jsonl"
    write_log(log, scenario(n_messages=5))
    run_stub_logs([read_log(log)], db, POLICY)
    FramesProjection(db).close()
    assert db_rows(db, "SELECT count(*) FROM frames") == [(0,)] and db_rows(db, "SELECT count(*) FROM stub_messages") == [(5,)]


def test_rejected_entries_keep_their_position() -> None:
    err = RejectedInput(Reason.MALFORMED_JSON, "x")
    res = run_stub_events([LogEntry("f", 41, b"{", err)], POLICY)
    assert [(r.source, r.offset, r.raw) for r in res.rejections] == [("f", 41, b"{")]
    assert source_name(Path("x.jsonl")).startswith("file:/")


# ------------------------------------------------------------------------------------ queries


def query(db: Path, name: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return run_stub_query(con, name)[1]
    finally:
        con.close()


def test_named_queries_on_a_constructed_case(tmp_path: Path) -> None:
    rng = np.random.default_rng(21)
    vs = [rng.standard_normal(64) for _ in range(6)]
    day = 24 * HOUR
    newest = T0 + 5 * day  # the newest event: the last message
    events: list[StubEventT] = [
        stub(1, "alpha", vs[0], T0, refresh_source="file-watch", last_refreshed_at_ms=newest - 3 * day),  # stale, matched
        stub(2, "alpha", vs[1], T0, refresh_source="scheduler-db-query", last_refreshed_at_ms=newest - 20 * HOUR),  # fresh, matched
        stub(3, "alpha", vs[2], T0, refresh_source="manual"),  # manual: never stale; never matched
        stub(4, "alpha", vs[3], T0, refresh_source="none"),  # NULL: never stale; never matched
        stub(5, "alpha", vs[4], T0, refresh_source="script", last_refreshed_at_ms=newest - 25 * HOUR),  # within the grace, matched
        stub(6, None, vs[5], T0, refresh_source="script", last_refreshed_at_ms=newest - 27 * HOUR, match_count=4),  # stale, imported count
    ]
    for d in range(2):  # day 0: 3 main messages (2 hits), 1 subagent; day 1: 2 main messages (1 hit)
        base = T0 + (d + 4) * day
        if d == 0:
            events += [msg("a", "alpha", vs[0], base), msg("b", "alpha", mix(rng, vs[1], 0.7), base + 1),
                       msg("c", "alpha", mix(rng, vs[2], 0.55), base + 2), msg("s", "alpha", vs[2], base + 3, origin="subagent")]
        else:
            events += [msg("d", "alpha", vs[4], base), msg("e", "alpha", mix(rng, vs[0], 0.2), newest)]
    log = tmp_path / "log.jsonl"
    write_log(log, events)
    db = tmp_path / "q.duckdb"
    run_stub_logs([read_log(log)], db, MatchPolicy(defaults=MatchSettings(threshold=0.6, top_n=1, token_budget=1000)))

    assert [(c, i) for c, i, *_ in query(db, "never-matched")] == [("alpha", 3), ("alpha", 4)]
    stale = query(db, "stale")
    assert [(c, i, h) for c, i, _t, _s, _r, h in stale] == [("alpha", 1, 72.0), ("(global)", 6, 27.0)]
    d0, d1 = "2026-05-08", "2026-05-09"
    assert query(db, "hit-rate") == [(d0, "alpha", 3, 2, 0.667), (d1, "alpha", 2, 1, 0.5)]
    assert query(db, "tokens-per-day") == [(d0, "alpha", 2, 2, 200), (d1, "alpha", 1, 1, 100)]
    top = query(db, "top-stubs")
    assert [(c, i, n, p) for c, i, _t, n, p, *_ in top[:4]] == [("(global)", 6, 4, 0), ("alpha", 1, 1, 1), ("alpha", 2, 1, 1), ("alpha", 5, 1, 1)]
    near = query(db, "similarity-near-threshold")
    # message b sits near 0.70 (matched, at/above), c near 0.55 (below); a and d are ~1.0 and e ~0.2: outside ±0.10
    assert [(m, k, s) for _b, m, k, s in near] == [(1, 0, "below"), (1, 1, "at/above")]
    assert abs(float(near[0][0]) - 0.55) < 0.03 and abs(float(near[1][0]) - 0.70) < 0.03
    assert query(db, "dead-letters") == []
    assert set(STUB_QUERIES) == {"never-matched", "stale", "hit-rate", "similarity-near-threshold", "tokens-per-day", "top-stubs", "dead-letters"}
