"""Frame analytics: each query on a small hand-made projection with the answer worked out by
hand here, and on the real corpus."""

from __future__ import annotations

import json
import random
from pathlib import Path

import duckdb
import numpy as np
import pytest

from hivestream.embedded.frames import EmbeddedRunner, run_files
from projections.frames.analytics import ANALYTICS_QUERIES, GATEWAY_SCOPE, ONE_SIDED_SQL, day, whatif_counts, whatif_frames, window_label
from projections.frames.queries import QUERIES
from projections.frames.schema import DDL
from projections.named_query import run_query
from streams.importers.files import import_file
from streams.model.events import HookEvent
from streams.settings import Settings
from tests.support.corpus import CORPUS, claude_files, codex_files
from tests.support.session_sets import SessionSet, corpus_only

D1 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
D2 = D1 + 86_400_000  # 2026-01-02
GW, TG = "openclaw-gateway:gw-a", "openclaw-gateway:tg"

# frame: (key, first source, session, event type, project, body)
FRAMES = {
    "F1": ("K1", "openclaw", GW, "user-prompt-submit", None, "fix the bug"),
    "F2": ("K2", "claude-code", "s1", "stop", "alpha", "fixed it"),
    "F3": ("K3", "openclaw", GW, "user-prompt-submit", None, "and the tests"),
    "F4": ("K4", "claude-code", "s1", "stop", "alpha", "tests pass"),
    "F5": ("K5", "codex", "s2", "user-prompt-submit", "beta", "continue"),
    "F6": ("K5", "codex", "s2", "user-prompt-submit", "beta", "continue"),
    "F7": ("K7", "openclaw", TG, "user-prompt-submit", None, "hello"),
    "F8": ("K8", "claude-code", "s1", "stop", "alpha", "done"),
}
# capture: (id, frame, source, session, time, duplicate)
CAPTURES = [
    ("c1", "F1", "openclaw", GW, D1 + 1000, False), ("c2", "F1", "claude-code", "s1", D1 + 1250, True),
    ("c3", "F2", "claude-code", "s1", D1 + 5000, False), ("c4", "F2", "openclaw", GW, D1 + 5350, True),
    ("c5", "F3", "openclaw", GW, D1 + 9000, False),
    ("c6", "F4", "claude-code", "s1", D2 + 100, False),
    ("c7", "F5", "codex", "s2", D2 + 1000, False), ("c8", "F5", "codex", "s2", D2 + 401_000, True),
    ("c9", "F6", "codex", "s2", D2 + 2_000_000, False),
    ("c10", "F7", "openclaw", TG, D1 + 20_000, False),
    ("c11", "F8", "claude-code", "s1", D1 + 30_000, False),
    *[(f"c{12 + i}", "F8", "openclaw", GW, D1 + 30_000 + lag, True) for i, lag in enumerate((100, 200, 300, 400))],
]


@pytest.fixture
def hand(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """The hand-made projection: 8 frames, 15 captures, built with W = 10 min."""
    con = duckdb.connect(str(tmp_path / "hand.duckdb"))
    for stmt in DDL:
        con.execute(stmt)
    con.execute("INSERT INTO meta VALUES ('window_ms', '600000'), ('key_strategy', 'body')")
    for fid, (key, src, sess, et, proj, body) in FRAMES.items():
        caps = [c for c in CAPTURES if c[1] == fid]
        times = [c[4] for c in caps]
        prefix = f"[hm session:{sess} src:{src} event:{et}" + (f" project:{proj}" if proj else "") + "] "
        con.execute("INSERT INTO frames VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, 'normal', ?, ?, ?, ?, ?)",
                    [fid, key, key, prefix + body, src, sess, et, proj, times[0], min(times), max(times), len(caps),
                     sorted({c[2] for c in caps})])
    con.executemany("INSERT INTO frame_captures VALUES (?, ?, ?, ?, 'x', ?, ?, 0, 0, false)", [list(c) for c in CAPTURES])
    return con


def q(con: duckdb.DuckDBPyConnection, name: str) -> list[tuple[object, ...]]:
    return run_query(con, name, ANALYTICS_QUERIES)[1]


def test_duplicate_share_per_day(hand: duckdb.DuckDBPyConnection) -> None:
    # day 1: c1-c5, c10, c11-c15 = 11 captures, duplicates c2, c4, c12-c15 = 6; day 2: c6-c9 = 4, duplicate c8
    assert q(hand, "duplicate-share-per-day") == [("2026-01-01", 11, 6, round(6 / 11, 4)), ("2026-01-02", 4, 1, 0.25)]


def test_duplicate_share_per_pair(hand: duckdb.DuckDBPyConnection) -> None:
    # day 1: claude-code captured c2, c3, c11 (3), openclaw c1, c4, c5, c10, c12-c15 (8)
    assert q(hand, "duplicate-share-per-pair") == [
        ("2026-01-01", "claude-code", "openclaw", 5, 8, 0.625),  # c4 and c12-c15 on claude-code's frames F2, F8
        ("2026-01-01", "openclaw", "claude-code", 1, 3, 0.3333),  # c2 on F1
        ("2026-01-02", "codex", "codex", 1, 3, 0.3333),  # c8 on F5, of c7, c8, c9
    ]


def test_duplicate_share_per_project(hand: duckdb.DuckDBPyConnection) -> None:
    # F1 has no project of its own (the gateway wrote it first): s1 captured it too and first-wrote alpha frames -> alpha.
    # F3 and F7 were captured by gateway sessions only -> (none).
    assert q(hand, "duplicate-share-per-project") == [
        ("alpha", 10, 6, 0.6),  # F1 (c1, c2), F2 (c3, c4), F4 (c6), F8 (c11-c15)
        ("beta", 3, 1, 0.3333),  # F5, F6
        ("(none)", 2, 0, 0.0),  # c5, c10
    ]


def test_duplicate_share_per_channel(hand: duckdb.DuckDBPyConnection) -> None:
    # gw-a: c1, c4, c5, c12-c15 = 7 captures, 5 duplicates, all of claude-code's frames; tg: c10
    assert q(hand, "duplicate-share-per-channel") == [("gw-a", 7, 5, round(5 / 7, 4), 5), ("tg", 1, 0, 0.0, 0)]


def test_one_sided_turns(hand: duckdb.DuckDBPyConnection) -> None:
    # gw-a and s1 are paired (F1, F2, F8). F3: only gw-a captured it -> the backend's capture is missing;
    # F4: only s1 -> the gateway's is missing. F5/F6 (s2) and F7 (tg) are in unpaired sessions: not counted.
    assert q(hand, "one-sided-turns") == [("2026-01-01", "openclaw", "backend", 1), ("2026-01-02", "claude-code", "gateway", 1)]


def test_capture_lag(hand: duckdb.DuckDBPyConnection) -> None:
    # claude-code -> openclaw lags: c4 350, c12-c15 100, 200, 300, 400 -> sorted 100 200 300 350 400;
    # nearest rank: p50 = 3rd (300), p95 = 5th (400)
    assert q(hand, "capture-lag") == [
        ("claude-code", "openclaw", 5, 300, 400, 400),
        ("codex", "codex", 1, 400_000, 400_000, 400_000),
        ("openclaw", "claude-code", 1, 250, 250, 250),
    ]


def test_window_whatif(hand: duckdb.DuckDBPyConnection) -> None:
    # keys K1-K4, K7, K8 stay one frame each for every W here (their captures are <= 400 ms apart): 6 frames.
    # K5 (c7 at 1 s, c8 at 401 s, c9 at 2,000 s of day 2): 3 frames below 400 s, 2 at 10 min, 1 from 1 h on.
    rows = q(hand, "window-whatif")
    assert [(r[0], r[2], r[3], r[4], r[5]) for r in rows] == [
        ("1 s", 15, 9, 6, False), ("10 s", 15, 9, 6, False), ("1 min", 15, 9, 6, False), ("10 min", 15, 8, 7, True),
        ("1 h", 15, 7, 8, False), ("1 day", 15, 7, 8, False), ("unbounded", 15, 7, 8, False)]


def test_whatif_counts_and_labels() -> None:
    assert whatif_counts(["a", "a", "a", "b"], [0, 10, 21, 5], 10) == (3, 1)  # a: 0 anchors, 10 joins, 21 > 0 + 10 anchors anew
    assert whatif_counts(["a", "a", "a"], [0, 10, 21], 0) == (1, 2)
    assert [window_label(w) for w in (0, 1500, 1000, 120_000, 7_200_000, 86_400_000)] == ["unbounded", "1500 ms", "1 s", "2 min", "2 h", "1 day"]


def test_memory_growth(hand: duckdb.DuckDBPyConnection) -> None:
    # day 1: F2, F8 (claude-code, alpha); F1 (openclaw, alpha); F3, F7 (openclaw, none). Day 2: F4 (claude-code, alpha); F5, F6 (codex, beta)
    assert q(hand, "memory-growth") == [
        ("2026-01-01", "claude-code", "alpha", 2, 2), ("2026-01-01", "openclaw", "(none)", 2, 2), ("2026-01-01", "openclaw", "alpha", 1, 1),
        ("2026-01-02", "claude-code", "alpha", 1, 3), ("2026-01-02", "codex", "beta", 2, 2),
    ]


def test_resent_short_bodies(hand: duckdb.DuckDBPyConnection) -> None:
    # "continue" (K5) became F5 (2 captures) and F6 (1 capture), first at 00:00:01, last at 00:33:20 on day 2
    assert q(hand, "resent-short-bodies") == [("continue", 2, 3, 1, "2026-01-02 00:00", "2026-01-02 00:33")]


# --- the real corpus ------------------------------------------------------------------------------
needs_corpus = pytest.mark.skipif(not CORPUS.exists(), reason=corpus_only("the figures of the window table of docs/dedup.md"))


@pytest.fixture(scope="module")
def corpus_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("corpus") / "c.duckdb"
    run_files([*claude_files(), *codex_files()], db, gateway=True)
    return db


@needs_corpus
def test_queries_on_the_corpus(corpus_db: Path, tmp_path: Path) -> None:
    con = duckdb.connect(str(corpus_db), read_only=True)
    cols, rows = run_query(con, "totals", QUERIES)
    total = {k: int(v) for k, v in zip(cols, rows[0], strict=True)}  # type: ignore[call-overload]
    # the window table of docs/dedup.md, produced by the tool: 126 frames / 116 duplicates up to 10 s, 124 / 118 at 1 min, 120 / 122 from 10 min on
    whatif = {r[0]: (r[3], r[4], r[5]) for r in q(con, "window-whatif")}
    assert whatif["1 s"] == whatif["10 s"] == (126, 116, False) and whatif["1 min"] == (124, 118, False)
    assert whatif["10 min"] == (120, 122, True) and whatif["unbounded"] == (120, 122, False)
    assert whatif["10 min"][0] == total["frames"]
    # every share query accounts for every capture and duplicate
    for name in ("duplicate-share-per-day", "duplicate-share-per-project"):
        rows = q(con, name)
        assert sum(int(r[-3]) for r in rows) == total["captures"] and sum(int(r[-2]) for r in rows) == total["duplicates"]  # type: ignore[call-overload]
    pairs = q(con, "duplicate-share-per-pair")
    assert sum(int(r[3]) for r in pairs) == total["duplicates"]  # type: ignore[call-overload]
    channels = q(con, "duplicate-share-per-channel")
    assert channels and all(str(c[0]).startswith("gw-") for c in channels)
    # the gateway double capture: received 250 ms before each prompt, sent 350 ms after each reply
    lag = {(r[0], r[1]): r[2:] for r in q(con, "capture-lag")}
    assert lag[("openclaw", "codex")][1] == 250 and lag[("codex", "openclaw")][1] == 350
    assert lag[("openclaw", "codex")][3] == 486_934  # the prompt a Codex user sent again 487 s later, within W = 10 min
    assert all(int(v[3]) <= 600_000 for v in lag.values())  # type: ignore[call-overload]
    # every imported turn has its gateway mirror: no one-sided turn; within 10 min no short body was re-sent beyond W
    assert q(con, "one-sided-turns") == [] and q(con, "resent-short-bodies") == []
    growth = q(con, "memory-growth")
    last: dict[tuple[object, object], int] = {}
    for r in growth:
        last[(r[1], r[2])] = int(r[4])  # type: ignore[call-overload]
    assert sum(last.values()) == total["frames"]
    con.close()
    # with W = 1 s the two prompts sent twice (409 s and 487 s apart) are two frames each, both captured twice
    db1 = tmp_path / "w1.duckdb"
    rep = run_files([*claude_files(), *codex_files()], db1, gateway=True, settings=Settings(window_ms=1000))
    assert rep.frames_created == whatif["1 s"][0]
    con1 = duckdb.connect(str(db1), read_only=True)
    assert [(r[1], r[2]) for r in q(con1, "resent-short-bodies")] == [(2, 4), (2, 4)]
    con1.close()


def test_one_sided_turns_with_a_broken_sent_hook(sessions: SessionSet, tmp_path: Path) -> None:
    """The gateway's message:sent hook of one Codex session is broken: each of that session's replies is one-sided."""
    files = sessions.codex_files()
    target = files[0]
    dropped = 0

    def broken(items: list[tuple[int, bytes, object]]) -> list[tuple[int, bytes, object]]:
        nonlocal dropped
        kept = []
        for it in items:
            ev = it[2]
            if isinstance(ev, HookEvent) and ev.native_event == "message:sent":
                dropped += 1
                continue
            kept.append(it)
        return kept

    runner = EmbeddedRunner(tmp_path / "b.duckdb")
    try:
        for p in files:
            _fmt, items = import_file(p, gateway=True)
            runner.run_items(f"file:{p}", broken(list(items)) if p == target else items)  # type: ignore[arg-type]
    finally:
        runner.close()
    con = duckdb.connect(str(tmp_path / "b.duckdb"), read_only=True)
    rows = q(con, "one-sided-turns")
    con.close()
    assert dropped > 0
    assert {(r[1], r[2]) for r in rows} == {("codex", "gateway")}
    assert sum(int(r[3]) for r in rows) == dropped  # type: ignore[call-overload]


def test_frame_queries_are_listed_with_a_description() -> None:
    from hivestream.cli.app import ALL_QUERIES

    for name in (*ANALYTICS_QUERIES, *QUERIES, "memory-reads-per-write", "memory-empty-reads", "memory-tool-errors"):
        assert name in ALL_QUERIES and len(ALL_QUERIES[name].description) > 20


# The one-sided-turns definition as a self-join of each frame's captures: the reference the
# aggregated query must agree with (it is quadratic in one body's captures).
_GW_SQL = f"starts_with(c.session, '{GATEWAY_SCOPE}')"
ONE_SIDED_REFERENCE = f"""
WITH cap AS (SELECT c.frame_id, c.source, c.session, {_GW_SQL} AS gw FROM frame_captures c),
turn AS (SELECT f.frame_id, f.first_seen_ms, bool_or(cap.gw) AS has_gw, bool_or(NOT cap.gw) AS has_be
         FROM frames f JOIN cap USING (frame_id)
         WHERE f.event_type IN ('user-prompt-submit', 'stop') GROUP BY f.frame_id, f.first_seen_ms),
paired AS (SELECT a.session FROM cap a JOIN cap b USING (frame_id) WHERE a.gw <> b.gw GROUP BY a.session)
SELECT {day("t.first_seen_ms")} AS day, cap.source,
       CASE WHEN cap.gw THEN 'backend' ELSE 'gateway' END AS missing_side,
       count(DISTINCT t.frame_id) AS turns
FROM turn t JOIN cap USING (frame_id)
WHERE t.has_gw <> t.has_be AND cap.session IN (SELECT session FROM paired)
GROUP BY ALL ORDER BY day, cap.source, missing_side"""


def _generated(con: duckdb.DuckDBPyConnection, seed: int, hot_captures: int) -> int:
    """Random frames and captures over gateway, backend and session-less captures, and one body
    captured ``hot_captures`` times by both sides; returns the capture count."""
    rng = random.Random(seed)
    for stmt in DDL:
        con.execute(stmt)
    sessions = [f"{GATEWAY_SCOPE}ch{i}" for i in range(6)] + [f"s{i}" for i in range(10)] + [None]
    sources = ["claude-code", "codex", "openclaw"]
    frames, caps = [], []
    for f in range(400):
        t0 = D1 + rng.randrange(5 * 86_400_000)
        et = rng.choice(["user-prompt-submit", "stop", "stop", "user-prompt-submit", "pre-tool-use"])
        n = hot_captures if f == 0 else rng.choice([1, 1, 1, 2, 2, 3, 5])
        for i in range(n):
            caps.append((f"e{f}-{i}", f"F{f}", rng.choice(sources), rng.choice(sessions), t0 + i * 10, i > 0))
        frames.append((f"F{f}", f"K{f}", f"K{f}", "body", "claude-code", "s0", et, None, None, "normal", t0, t0, t0 + n * 10, n,
                       sorted(sources)))
    con.executemany("INSERT INTO frames VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", frames)
    con.executemany("INSERT INTO frame_captures VALUES (?, ?, ?, ?, 'x', ?, ?, 0, 0, false)", [list(c) for c in caps])
    return len(caps)


def _max_operator_rows(con: duckdb.DuckDBPyConnection, sql: str, out: Path) -> int:
    """The largest row count any operator of ``sql``'s plan produced (DuckDB's JSON profile)."""
    con.execute("SET enable_profiling = 'json'")
    con.execute(f"SET profiling_output = '{out.as_posix()}'")
    try:
        con.execute(sql).fetchall()
    finally:
        con.execute("RESET enable_profiling")
    rows = 0
    stack = list(json.loads(out.read_text())["operator"])
    while stack:
        op = stack.pop()
        rows = max(rows, int(op.get("intermediate_rows", 0)))
        stack.extend(op.get("children", []))
    return rows


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_sided_turns_agrees_with_the_self_join_definition(seed: int) -> None:
    """On random projections with one body captured 1,500 times by both sides, the query gives the
    reference's rows, and no operator of its plan makes more rows than a few per capture (the
    reference's self-join makes ~560,000 for that body alone)."""
    con = duckdb.connect()
    _generated(con, seed, 1_500)
    want = con.execute(ONE_SIDED_REFERENCE).fetchall()
    assert want, "the generated data has one-sided turns"
    assert q(con, "one-sided-turns") == want


def test_one_sided_turns_is_linear_in_one_bodys_captures(tmp_path: Path) -> None:
    """One body captured 4,000 times by both sides: no operator of the query's plan makes more rows
    than four per capture or frame (a self-join of that body's captures would make ~4,000,000)."""
    con = duckdb.connect()
    n = _generated(con, 7, 4_000)
    assert _max_operator_rows(con, ONE_SIDED_SQL, tmp_path / "profile.json") <= 4 * (n + 400)


@pytest.mark.parametrize("seed", [5, 6])
def test_whatif_frames_gives_the_greedy_loop_s_counts(seed: int) -> None:
    """On random captures (ties, one key captured 3,000 times, keys captured once) the array version
    gives what the per-capture loop gives, for every window."""
    rng = random.Random(seed)
    caps = [(rng.randrange(300), 1_790_000_000_000 + rng.randrange(0, 4 * 3_600_000, 250)) for _ in range(4_000)]
    caps += [(7, 1_790_000_000_000 + rng.randrange(0, 86_400_000, 100)) for _ in range(3_000)]
    caps += [(1_000 + i, 1_790_000_000_000 + i) for i in range(200)]
    rng.shuffle(caps)
    windows = [1, 250, 1_000, 60_000, 600_000, 3_600_000, 0]
    by_key_time = sorted(caps)
    want = [whatif_counts([str(k) for k, _t in by_key_time], [t for _k, t in by_key_time], w)[0] for w in windows]
    got = whatif_frames(np.array([k for k, _t in caps], dtype=np.int64), np.array([t for _k, t in caps], dtype=np.int64), windows)
    assert got == want
    assert whatif_frames(np.zeros(0, np.int64), np.zeros(0, np.int64), windows) == [0] * len(windows)
    top = np.iinfo(np.int64).max  # times at the end of BIGINT: t + W must not wrap around
    assert whatif_frames(np.array([1, 1]), np.array([top - 5, top]), [10, 3]) == [1, 2]
