"""The stub Kafka path without a broker: routing, the per-partition matcher with a restart, the
projector's fold under any interleaving of partitions, equal to the embedded runner."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from projections.stubs.projection import StubProjection, match_meta, stub_batch
from streams.kafka.topics import partition_for
from streams.model.deadletter import DeadLetter, RejectedInput
from streams.model.position import Position
from streams.stubs.events import StubDeleted, parse_stub_event
from streams.stubs.outcome import MessageProcessed, parse_output_record
from streams.stubs.output_fold import OutputFold
from streams.stubs.partition import Emit, StubPartition
from streams.stubs.routing import route_stub_line
from tests.projections.test_stub_projection import POLICY, T0, msg, refresh, stub
from tests.support.stub_kafka_scenario import CHANNELS, embedded, stub_scenario, stub_tables, write_scenario

TOPIC = "ns.stub-events"


def test_routing_keys_by_channel_and_broadcasts_global_stubs() -> None:
    v = np.ones(8)
    r = route_stub_line(msg("m1", "alpha", v, T0).model_dump_json().encode(), 4)
    assert r == route_stub_line(stub(1, "alpha", v, T0).model_dump_json().encode(), 4)
    assert r.key == b"alpha" and r.partitions == (partition_for(b"alpha", 4),)
    g = route_stub_line(stub(1, None, v, T0).model_dump_json().encode(), 4)
    assert g.key == b"" and g.partitions == (0, 1, 2, 3)
    assert route_stub_line(b"{not json", 4).partitions == (0,)
    assert {route_stub_line(msg("m", c, v, T0).model_dump_json().encode(), 4).partitions[0] for c in CHANNELS} != {0}
    with pytest.raises(ValueError):
        route_stub_line(b"{}", 0)


def run_partitions(lines: list[bytes], n: int, rng: random.Random, restarts: bool) -> dict[int, list[Emit | DeadLetter]]:
    """Route ``lines`` over ``n`` partitions and run each partition; with ``restarts`` the
    partition is rebuilt from its store at random points and re-processes a few records (at-least-once)."""
    parts: dict[int, list[bytes]] = {p: [] for p in range(n)}
    for raw in lines:
        for p in route_stub_line(raw, n).partitions:
            parts[p].append(raw)
    store: dict[str, object] = {}
    out: dict[int, list[Emit | DeadLetter]] = {}
    for p, recs in parts.items():
        part = StubPartition(p, POLICY, store)
        emitted: list[Emit | DeadLetter] = []
        off = 0
        while off < len(recs):
            emitted += part.process(recs[off], Position(TOPIC, p, off, 0), T0)
            off += 1
            if restarts and off < len(recs) and rng.random() < 0.05:
                part = StubPartition(p, POLICY, store)  # a new worker takes over from the committed offset
                off = max(0, off - rng.randint(1, 6))
        out[p] = emitted
    return out


def fold_into(db: Path, outputs: dict[int, list[Emit | DeadLetter]], rng: random.Random, restart_every: int = 0) -> None:
    """Fold the partitions' outputs in a random interleaving (each partition in order), in random
    batches, as the projector does; with ``restart_every`` the fold is rebuilt from the file."""
    cursors = dict.fromkeys(outputs, 0)
    sink = StubProjection(db)
    sink.check_meta(match_meta(POLICY.defaults))

    def new_fold() -> OutputFold:
        return OutputFold(sink.load_runner(POLICY), sink.applied_event_ids(), sink.match_keys(), sink.seen_messages())

    fold = new_fold()
    batches = 0
    while any(cursors[p] < len(o) for p, o in outputs.items()):
        positions: dict[tuple[str, int], int] = {}
        for _ in range(rng.randint(1, 4)):
            live = [p for p in outputs if cursors[p] < len(outputs[p])]
            if not live:
                break
            p = rng.choice(live)
            for _ in range(rng.randint(1, 5)):
                if cursors[p] >= len(outputs[p]):
                    break
                rec = outputs[p][cursors[p]]
                if isinstance(rec, Emit):
                    fold.feed(f"out[{p}]", cursors[p], rec.value, parse_output_record(rec.value))
                else:
                    fold.reject(f"{rec.source}[{rec.partition}]", rec.offset, rec.original(), RejectedInput(rec.reason, rec.detail), rec.event_id)
                cursors[p] += 1
                positions[("out", p)] = cursors[p]
        delta, applied = fold.drain()
        sink.apply(stub_batch(fold.runner, delta, lambda: T0, applied), positions)
        batches += 1
        if restart_every and batches % restart_every == 0:
            fold = new_fold()
    sink.close()


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("partitions", [1, 4])
def test_kafka_path_equals_the_embedded_runner_in_any_interleaving(tmp_path: Path, seed: int, partitions: int) -> None:
    log = write_scenario(tmp_path / "log.jsonl", stub_scenario(seed=seed))
    embedded(log, tmp_path / "embedded.duckdb")
    rng = random.Random(seed)
    lines = [raw for raw in log.read_bytes().split(b"\n") if raw.strip()]
    outputs = run_partitions(lines, partitions, rng, restarts=seed % 2 == 1)
    fold_into(tmp_path / "kafka.duckdb", outputs, rng, restart_every=3 if seed > 2 else 0)
    want, got = stub_tables(tmp_path / "embedded.duckdb"), stub_tables(tmp_path / "kafka.duckdb")
    assert want["stub_matches"] and want["stub_dead_letters"]
    assert any(r[0] == "" and r[-1] for r in want["stubs"])  # a deleted global stub with its telemetry
    for table in want:
        assert got[table] == want[table], table


def test_a_restarted_partition_re_emits_what_it_emitted_the_first_time() -> None:
    v = np.ones(16)
    store: dict[str, object] = {}
    part = StubPartition(0, POLICY, store)
    up = stub(1, "alpha", v, T0).model_dump_json().encode()
    m = msg("m1", "alpha", v, T0 + 1).model_dump_json().encode()
    first = part.process(up, Position(TOPIC, 0, 0, 0), T0) + part.process(m, Position(TOPIC, 0, 1, 0), T0)
    again = StubPartition(0, POLICY, store).process(m, Position(TOPIC, 0, 1, 0), T0)
    assert [e for e in first[1:]] == again and len(again) == 2
    done = parse_output_record(again[-1].value) if isinstance(again[-1], Emit) else None
    assert isinstance(done, MessageProcessed) and done.match_count == 1
    assert parse_stub_event(first[0].value if isinstance(first[0], Emit) else b"").event_id == parse_stub_event(up).event_id


def test_bad_records_are_dead_lettered_once_and_the_partition_goes_on() -> None:
    v = np.ones(16)
    parts = [StubPartition(p, POLICY, {}) for p in range(2)]
    zero_global = stub(5, None, np.zeros(16), T0).model_dump_json().encode()
    outs = [s.process(zero_global, Position(TOPIC, s.partition, 0, 0), T0) for s in parts]
    assert len(outs[0]) == 1 and isinstance(outs[0][0], DeadLetter) and "zero_vector" in outs[0][0].detail
    assert outs[1] == []  # partition 0 reports the broadcast copy
    for bad in (None, b"", b"{x", b'{"type": "nope"}'):
        out = parts[0].process(bad, Position(TOPIC, 0, 1, 0), T0)
        assert len(out) == 1 and isinstance(out[0], DeadLetter)
    ok = parts[0].process(stub(1, "alpha", v, T0).model_dump_json().encode(), Position(TOPIC, 0, 2, 0), T0)
    assert len(ok) == 1 and isinstance(ok[0], Emit)


def test_state_restored_ahead_of_the_offset_re_emits_state_events_instead_of_applying_them_again() -> None:
    """A kill -9 after the changelog got a refresh and the delete that followed it, but before the
    offset commit: the new worker reads the refresh again against a state without the stub. It
    re-emits the refresh (as the first time), not an ``unknown_stub`` dead letter; a state event
    rejected the first time is dead-lettered again with the same source offset (one row downstream)."""
    v = np.ones(16)
    records = [stub(4, None, v, T0), refresh(4, None, v, T0 + 1), StubDeleted(event_id="del-4", event_time_ms=T0 + 2, stub_id=4),
               refresh(9, None, v, T0 + 3)]
    raws = [r.model_dump_json().encode() for r in records]
    store: dict[str, object] = {}
    part = StubPartition(0, POLICY, store)
    first = [part.process(raw, Position(TOPIC, 0, off, 0), T0) for off, raw in enumerate(raws)]
    assert [type(o[0]) for o in first] == [Emit, Emit, Emit, DeadLetter] and "unknown_stub" in first[3][0].detail  # type: ignore[union-attr]
    restarted = StubPartition(0, POLICY, store)
    again = [restarted.process(raw, Position(TOPIC, 0, off, 0), T0) for off, raw in enumerate(raws) if off >= 1]
    assert again == first[1:]
    later = restarted.process(refresh(4, None, v, T0 + 4).model_dump_json().encode(), Position(TOPIC, 0, 4, 0), T0)
    assert isinstance(later[0], DeadLetter) and "unknown_stub" in later[0].detail  # a new record is still applied to the state


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_reader_of_every_partition_holds_the_stubs_of_the_log_in_any_interleaving(tmp_path: Path, seed: int) -> None:
    """What ``hivestream ingest`` keeps from ``stub-events``: each partition in order, the partitions interleaved at random,
    a global stub's broadcast copies counted once: the same stubs as the log applied in order."""
    from streams.stubs.live import LiveStubs
    from streams.stubs.routing import followed_state_event

    lines = write_scenario(tmp_path / "log.jsonl", stub_scenario(seed=seed, n_messages=60)).read_bytes().splitlines()
    want = LiveStubs(POLICY)
    for raw in lines:
        ev = followed_state_event(0, raw)
        if ev is not None:
            want.apply(ev)
    parts: dict[int, list[bytes]] = {p: [] for p in range(4)}
    for raw in lines:
        for p in route_stub_line(raw, 4).partitions:
            parts[p].append(raw)
    got, rng = LiveStubs(POLICY), random.Random(seed)
    while any(parts.values()):
        p = rng.choice([p for p, recs in parts.items() if recs])
        ev = followed_state_event(p, parts[p].pop(0))
        if ev is not None:
            got.apply(ev)
    assert len(want) > 0 and any(r.channel is None for r, _b64 in want.stubs())
    assert got.stubs() == want.stubs()
    assert followed_state_event(1, stub(1, None, np.ones(4, np.float32), T0).model_dump_json().encode()) is None  # a broadcast copy
    assert followed_state_event(0, msg("m", "alpha", np.ones(4, np.float32), T0).model_dump_json().encode()) is None
    assert followed_state_event(0, b"{not json") is None
