"""A stub log for the Kafka-path tests: six channels over the partitions, global stubs refreshed
and deleted mid-log, channel stubs refreshed/deleted/re-created, subagent and repeated messages,
malformed lines; plus the embedded reference and table dumps to compare with."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np

from hivestream.embedded.stubs import run_stub_logs
from streams.stubs.events import StubDeleted
from streams.stubs.log import StubEventT, read_log, write_log
from tests.projections.test_stub_projection import HOUR, POLICY, T0, mix, msg, refresh, stub

CHANNELS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
BAD = [
    b'{"type": "message-embedded", "oops"',
    b"\xff\xfe not utf8",
    b'{"type": "stub-upserted", "schema_version": 9}',
]


def stub_scenario(seed: int = 11, dim: int = 64, n_messages: int = 240) -> list[StubEventT]:
    """The log, in order (see the module docstring)."""
    rng = np.random.default_rng(seed)
    vecs: dict[tuple[str | None, int], np.ndarray] = {(c, i): rng.standard_normal(dim) for c in CHANNELS for i in (1, 2)}
    vecs |= {(None, i): rng.standard_normal(dim) for i in (1, 2, 3)}
    events: list[StubEventT] = [
        stub(i, c, v, T0 - 48 * HOUR, tokens=80 * i + (40 if c is None else 0), match_count=4 if i == 1 else None,
             last_matched_at_ms=T0 - 30 * HOUR if i == 1 else None)
        for (c, i), v in vecs.items()
    ]
    keys = list(vecs)
    deleted: set[tuple[str | None, int]] = set()
    for n in range(n_messages):
        t = T0 + n * 30_000
        if n == n_messages // 4:
            vecs[(None, 2)] = rng.standard_normal(dim)
            events.append(refresh(2, None, vecs[(None, 2)], t - 1, tokens=210))
        if n == n_messages // 3:
            events.append(StubDeleted(event_id="del-global-3", event_time_ms=t - 1, stub_id=3, channel=None))
            deleted.add((None, 3))
        if n == n_messages // 2:
            events.append(StubDeleted(event_id="del-gamma-2", event_time_ms=t - 1, stub_id=2, channel="gamma"))
            deleted.add(("gamma", 2))
        if n == 2 * n_messages // 3:
            events.append(stub(2, "gamma", vecs[("gamma", 2)], t - 1, tokens=120))
            deleted.discard(("gamma", 2))
            vecs[("beta", 1)] = rng.standard_normal(dim)
            events.append(refresh(1, "beta", vecs[("beta", 1)], t, tokens=90))
        ch, sid = keys[int(rng.integers(len(keys)))]
        channel = ch or CHANNELS[int(rng.integers(len(CHANNELS)))]
        v = rng.standard_normal(dim) if n % 9 == 0 else mix(rng, vecs[(ch, sid)], float(rng.uniform(0.45, 0.95)))
        events.append(msg(f"m{n}", channel, v, t, origin="subagent" if n % 13 == 5 else "main"))
        if n % 37 == 3:  # the runtime re-sent a message: same channel and id
            events.append(events[-1])
    return events


def write_scenario(path: Path, events: list[StubEventT], bad: list[bytes] = BAD, seed: int = 3) -> Path:
    """The log as JSONL with the ``bad`` lines at seeded positions."""
    write_log(path, events)
    lines = path.read_bytes().split(b"\n")[:-1]
    rnd = np.random.default_rng(seed)
    for b in bad:
        lines.insert(int(rnd.integers(len(lines) + 1)), b)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def embedded(log: Path, db: Path) -> None:
    """The embedded stub runner on ``log`` into ``db`` (the reference)."""
    run_stub_logs([read_log(log)], db, POLICY)


def stub_tables(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Comparable rows of the stub tables (positions and dead-letter inputs/offsets left out)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in ("stubs", "stub_vectors", "stub_matches", "stub_messages")}
        out["stub_dead_letters"] = con.execute("SELECT reason, detail, event_key, original FROM stub_dead_letters ORDER BY ALL").fetchall()
        return out
    finally:
        con.close()


def message_outcomes(bootstrap: str, topic: str) -> set[tuple[str, str]]:
    """(channel, message id) of every ``message-processed`` record on ``topic`` (``stub-matches``)."""
    import json

    from tests.support.kafka_harness import topic_values

    return {(d["channel"], d["message_id"]) for d in map(json.loads, topic_values(bootstrap, topic)) if d.get("type") == "message-processed"}
