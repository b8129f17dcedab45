"""The hook-event log of ``hivestream serve`` in-process: format, reader, writer (bound, torn tail, a
failing disk, retention, the directory lock), the group-commit sink, and the service files."""

from __future__ import annotations

import asyncio
import errno
import os
import plistlib
import random
from pathlib import Path

import pytest

from hivestream.serve.log_sink import LogSink
from hivestream.serve.log_writer import HookLog, LogBusy, LogFull, Retention
from hivestream.serve.progress import Progress
from hivestream.serve.service import install, systemd_unit
from streams.ingest.hook_log import (
    DEAD_LETTER,
    HOOK_EVENTS,
    MARKER,
    Bound,
    LogReader,
    LogRecord,
    decode_log_payload,
    encode_log_record,
    is_log_dir,
    read_chunks,
    read_marker,
    scan,
    segments,
)
from streams.kafka.topics import Topics
from streams.model.deadletter import DeadLetter


def _entries(n: int, tag: str = "e", size: int = 40) -> list[tuple[int, bytes, bytes]]:
    return [(HOOK_EVENTS if i % 7 else DEAD_LETTER, f"k{i}".encode(), f"{tag}-{i}-".encode() + b"v" * size) for i in range(n)]


def _values(d: Path) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for chunk in read_chunks(d) for r in chunk]


def test_records_round_trip_and_a_corrupt_one_shifts_no_other_offset() -> None:
    recs = [encode_log_record(i, 1000 + i, i % 2, f"k{i}".encode(), f"value {i}".encode()) for i in range(5)]
    sc = scan(b"".join(recs))
    assert [(r.offset, r.time_ms, r.kind, r.key, r.value) for r in sc.records] == [
        (i, 1000 + i, i % 2, f"k{i}".encode(), f"value {i}".encode()) for i in range(5)]
    assert sc.skipped == [] and sc.end == sum(map(len, recs))
    broken = bytearray(b"".join(recs))
    broken[len(recs[0]) + len(recs[1]) + 20] ^= 0xFF  # a flipped bit in record 2
    sc = scan(bytes(broken))
    assert [r.offset for r in sc.records] == [0, 1, 3, 4]
    assert len(sc.skipped) == 1 and sc.skipped[0][0] == len(recs[0]) + len(recs[1])
    with pytest.raises(ValueError):
        decode_log_payload(b"short")
    with pytest.raises(ValueError):
        encode_log_record(0, 0, 9, b"", b"")


def test_append_roll_reopen_and_the_reader_follows_the_durable_bound(tmp_path: Path) -> None:
    d = tmp_path / "log"
    hl = HookLog(d, segment_bytes=2_000)
    assert is_log_dir(d) and read_marker(d) == hl.log_id
    reader = LogReader(d)
    got: list[int] = []
    expected = 0
    rnd = random.Random(3)
    for _ in range(40):
        groups = [_entries(rnd.randint(1, 9), tag=f"g{expected}") for _ in range(rnd.randint(1, 4))]
        firsts = hl.append(groups, 5)
        for g, first in zip(groups, firsts, strict=True):
            assert first == expected
            expected += len(g)
        nxt, bound = hl.durable()
        assert nxt == expected
        for r in reader.read(len(got), bound=bound, max_bytes=rnd.choice([50, 700, 1 << 20])):
            got.append(r.offset)
        while len(got) < nxt:  # a small budget reads in several calls
            more = reader.read(len(got), bound=bound, max_bytes=300)
            assert more, "no progress"
            got.extend(r.offset for r in more)
    assert got == list(range(expected))
    assert len(segments(d)) > 5
    hl.close()
    again = HookLog(d, segment_bytes=2_000)
    assert again.next_offset == expected and again.torn is None and again.log_id == hl.log_id
    again.append([_entries(3, tag="after")], 6)
    assert [o for o, _v in _values(d)] == list(range(expected + 3))
    again.close()


def test_a_second_writer_is_refused(tmp_path: Path) -> None:
    hl = HookLog(tmp_path / "log")
    try:
        with pytest.raises(LogBusy, match="held by another hivestream serve"):
            HookLog(tmp_path / "log")
    finally:
        hl.close()
    HookLog(tmp_path / "log").close()  # free again once the first is closed


def test_a_foreign_marker_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "log"
    d.mkdir()
    (d / MARKER).write_text('{"format": "something-else"}')
    with pytest.raises(ValueError, match="not a hivestream hook-event log"):
        HookLog(d)


def test_the_bound_refuses_a_group_whole_and_keeps_the_others(tmp_path: Path) -> None:
    hl = HookLog(tmp_path / "log", max_bytes=1_500)
    res = hl.append([_entries(3), _entries(40), _entries(2)], 1)
    assert res[0] == 0 and isinstance(res[1], LogFull) and res[2] == 3
    assert hl.next_offset == 5 and hl.size_bytes <= 1_500
    assert [o for o, _v in _values(tmp_path / "log")] == [0, 1, 2, 3, 4]
    hl.close()


@pytest.mark.parametrize("cut", ["half", "zeros", "header"])
def test_a_torn_tail_is_cut_off_at_open_and_handed_over(tmp_path: Path, cut: str) -> None:
    d = tmp_path / "log"
    hl = HookLog(d)
    hl.append([_entries(10)], 1)
    hl.close()
    seg = segments(d)[-1].path
    whole = seg.stat().st_size
    rec = encode_log_record(10, 2, HOOK_EVENTS, b"k", b"never acknowledged " * 20)
    torn = {"half": rec[: len(rec) // 2], "zeros": rec[:20] + b"\0" * (len(rec) - 20), "header": rec[:7]}[cut]
    with seg.open("ab") as f:
        f.write(torn)
    again = HookLog(d)
    assert again.torn is not None and again.torn.data == torn and again.torn.at == whole
    assert seg.stat().st_size == whole and again.next_offset == 10
    again.append([_entries(2, tag="next")], 3)
    assert [o for o, _v in _values(d)] == list(range(12))
    again.close()


def test_a_failing_disk_is_truncated_back_and_nothing_is_promised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "log"
    hl = HookLog(d)
    hl.append([_entries(4)], 1)
    size = hl.size_bytes
    real_write = os.write
    calls = {"n": 0}

    def full_disk(fd: int, data: bytes | memoryview) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data)[: len(data) // 3])  # part of it reaches the file
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("hivestream.serve.log_writer.os.write", full_disk)
    with pytest.raises(OSError, match="No space"):
        hl.append([_entries(5, tag="lost")], 2)
    monkeypatch.setattr("hivestream.serve.log_writer.os.write", real_write)
    assert hl.next_offset == 4 and hl.size_bytes == size and segments(d)[-1].path.stat().st_size == size
    assert hl.append([_entries(2, tag="ok")], 3) == [4]
    vals = _values(d)
    assert [o for o, _v in vals] == list(range(6)) and not any(v.startswith(b"lost") for _o, v in vals)
    hl.close()


def test_retention_deletes_only_applied_sealed_segments(tmp_path: Path) -> None:
    d = tmp_path / "log"
    hl = HookLog(d, segment_bytes=1_000)
    for i in range(30):
        hl.append([_entries(3, tag=f"r{i}")], i)
    segs = segments(d)
    assert len(segs) >= 6
    assert hl.apply_retention(10**9, Retention()) == []  # no policy: keep everything
    applied = segs[4].base  # the first four segments are applied
    gone = hl.apply_retention(applied, Retention(max_bytes=1))
    assert gone == [s.path.name for s in segs[:4]]
    assert segments(d)[0].base == segs[4].base
    assert hl.apply_retention(10**9, Retention(max_age_ms=10**12), now_ms=0) == []  # nothing old enough
    gone = hl.apply_retention(10**9, Retention(max_age_ms=1), now_ms=10**15)
    assert segments(d) == [segs[-1]] and len(gone) == len(segs) - 5  # the active segment stays
    assert next(o for o, _v in _values(d)) == segs[-1].base
    hl.close()


def test_the_sink_shares_an_fsync_between_requests_and_refuses_only_what_passes_the_bound(tmp_path: Path) -> None:
    topics = Topics("t")
    hl = HookLog(tmp_path / "log", max_bytes=6_000)
    appends: list[int] = []
    real = hl.append

    def counted(groups: list[list[tuple[int, bytes, bytes]]], t: int) -> list[int | LogFull]:
        appends.append(len(groups))
        return real(groups, t)

    hl.append = counted  # type: ignore[method-assign]
    sink = LogSink(hl, topics, Progress())

    async def main() -> list[object]:
        bg = asyncio.get_running_loop().create_task(sink.background())
        try:
            small = [[(topics.hook_events, b"k", b"x" * 50)] for _ in range(20)]
            big = [(topics.dead_letter, b"k", b"y" * 9_000)]
            return await asyncio.gather(*(sink.write(r) for r in [*small, big]), return_exceptions=True)
        finally:
            bg.cancel()

    out = asyncio.run(main())
    assert out[:20] == ["log"] * 20 and isinstance(out[20], LogFull)
    assert sum(appends) == 21 and len(appends) < 21  # requests joined groups
    assert [o for o, _v in _values(tmp_path / "log")] == list(range(20))
    ready, body = sink.health()
    assert ready and body["log_records"] == 20 and body["pending"] == 20
    hl.close()


def test_service_files(tmp_path: Path) -> None:
    argv = ["/opt/hive stream/bin/hivestream", "serve", "--db", "/data/50%/memory.duckdb", "--port", "8787"]
    unit = systemd_unit(argv, Path("/data"))
    assert 'ExecStart="/opt/hive stream/bin/hivestream" serve --db /data/50%%/memory.duckdb --port 8787' in unit
    assert "Restart=always" in unit and "WantedBy=default.target" in unit
    done = install("linux", argv, Path("/data"), tmp_path, {"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert done.path == tmp_path / "cfg" / "systemd" / "user" / "hivestream-serve.service" and done.path.read_text() == unit
    assert any("enable --now" in c for c in done.commands)
    mac = install("darwin", argv, Path("/data"), tmp_path)
    plist = plistlib.loads(mac.path.read_bytes())
    assert plist["ProgramArguments"] == argv and plist["KeepAlive"] is True and plist["RunAtLoad"] is True
    assert any("launchctl bootstrap" in c for c in mac.commands)
    with pytest.raises(ValueError, match="no user service manager"):
        install("win32", argv, Path("/data"), tmp_path)


def test_the_reader_dead_letters_a_corrupt_stretch_in_a_sealed_segment(tmp_path: Path) -> None:
    d = tmp_path / "log"
    hl = HookLog(d, segment_bytes=500)
    for i in range(6):
        hl.append([_entries(4, tag=f"c{i}")], i)
    hl.close()
    first = segments(d)[0].path
    data = bytearray(first.read_bytes())
    data[30] ^= 0xFF
    first.write_bytes(bytes(data))
    notes: list[str] = []
    recs = [r for chunk in read_chunks(d, 0, notes.append) for r in chunk]
    assert [r.offset for r in recs] == list(range(24))  # record 0's bytes are a dead letter at its offset, none shifted
    dl = DeadLetter.model_validate_json(recs[0].value)
    assert recs[0].kind == DEAD_LETTER and dl.reason == "corrupt_record" and dl.offset == 0 and dl.original() == bytes(data[:len(dl.original())])
    assert "offset 0 lost" in dl.detail and dl.source == f"log:{read_marker(d)}"
    assert len(notes) == 1 and first.name in notes[0] and "corrupt" in notes[0]
    assert LogReader(d).read(5, bound=Bound(segments(d)[0].base, 0)) == []  # the bound stops it in the first segment


def _payload_sizes(n: int, rnd: random.Random) -> list[tuple[int, bytes, bytes]]:
    return [(HOOK_EVENTS, f"k{i}".encode(), f"r{i}:".encode() + b"v" * rnd.choice([10, 200, 3_000, 40_000])) for i in range(n)]


def test_a_fresh_reader_starts_deep_inside_a_segment(tmp_path: Path) -> None:
    """A restart whose position lies megabytes into a segment reads from there, whatever the budget."""
    d = tmp_path / "log"
    hl = HookLog(d)  # one 16 MiB segment
    for g in range(300):
        hl.append([[(HOOK_EVENTS, f"k{g}-{i}".encode(), f"{g}-{i}:".encode() + b"x" * 2_000) for i in range(20)]], g)
    nxt, bound = hl.durable()
    assert nxt == 6_000 and len(segments(d)) == 1 and bound.end > 11 << 20
    for start in (0, 2_100, 4_000, 5_999):
        for budget in (1, 50_000, 4 << 20):
            got = LogReader(d).read(start, bound=bound, max_bytes=budget)
            assert got and got[0].offset == start and got[0].value.startswith(f"{start // 20}-{start % 20}:".encode())
    assert LogReader(d).read(6_000, bound=bound) == []
    assert [r.offset for chunk in read_chunks(d, 4_321, chunk_bytes=1 << 20) for r in chunk] == list(range(4_321, 6_000))
    hl.close()


@pytest.mark.parametrize("seed", range(6))
def test_every_offset_comes_back_once_from_any_start_and_any_budget(tmp_path: Path, seed: int) -> None:
    """Random records (some longer than the budget), corrupted in sealed segments and in the durable part
    of the one being written: every offset below the durable end is a record or a ``corrupt_record``
    dead letter, exactly once, the same for a fresh reader at any start as for one reading on."""
    rnd = random.Random(seed)
    d = tmp_path / "log"
    hl = HookLog(d, segment_bytes=rnd.choice([30_000, 200_000]))
    for _ in range(rnd.randint(20, 60)):
        hl.append([_payload_sizes(rnd.randint(1, 6), rnd)], 7)
    nxt, bound = hl.durable()
    segs = segments(d)
    assert len(segs) > 2
    for _ in range(rnd.randint(1, 4)):  # flip bytes anywhere in the durable part
        seg = rnd.choice(segs)
        data = bytearray(seg.path.read_bytes())
        size = bound.end if seg.base == bound.base else len(data)
        if size:
            data[rnd.randrange(size)] ^= 0x5A
            seg.path.write_bytes(bytes(data))
    whole = LogReader(d)
    seen: list[int] = []
    while len(seen) < nxt:
        more = whole.read(len(seen), bound=bound, max_bytes=rnd.choice([1, 5_000, 1 << 20]))
        assert more, f"stuck at {len(seen)} of {nxt}"
        seen += [r.offset for r in more]
    assert seen == list(range(nxt))
    ref = {r.offset: r for r in LogReader(d).read(0, bound=bound, max_bytes=1 << 30)}
    assert sorted(ref) == list(range(nxt))
    for r in ref.values():
        if r.kind == HOOK_EVENTS:
            assert r.value.startswith(b"r") and r.key == f"k{r.value[1:r.value.index(b':')].decode()}".encode()
        else:
            assert DeadLetter.model_validate_json(r.value).reason == "corrupt_record"
    for start in rnd.sample(range(nxt), min(nxt, 15)):
        fresh = LogReader(d)
        got: list[LogRecord] = []
        while (not got or got[-1].offset < nxt - 1):
            more = fresh.read(got[-1].offset + 1 if got else start, bound=bound, max_bytes=rnd.choice([1, 70_000]))
            assert more
            got += more
        assert [(r.offset, r.kind, r.value) for r in got] == [(o, ref[o].kind, ref[o].value) for o in range(start, nxt)]
    hl.close()


def test_a_removed_segment_is_one_dead_letter_and_nothing_after_it_is_lost(tmp_path: Path) -> None:
    d = tmp_path / "log"
    hl = HookLog(d, segment_bytes=400)
    for i in range(12):
        hl.append([_entries(3, tag=f"m{i}")], i)
    hl.close()
    segs = segments(d)
    segs[2].path.unlink()
    notes: list[str] = []
    recs = [r for chunk in read_chunks(d, 0, notes.append) for r in chunk]
    missing = [r for r in recs if r.kind == DEAD_LETTER and r.value.startswith(b"{") and DeadLetter.model_validate_json(r.value).reason == "corrupt_record"]
    assert len(missing) == 1 and missing[0].offset == segs[2].base
    assert "missing" in DeadLetter.model_validate_json(missing[0].value).detail
    kept = {r.offset for r in recs}
    assert kept == set(range(segs[2].base + 1)) | set(range(segs[3].base, 36))
