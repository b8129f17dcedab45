"""``produce LOGDIR`` over a serve log holding stub events (:func:`hivestream.serve.handoff.log_records`):
each stub record goes where ``stubs produce`` puts the same line (keyed by channel, a global stub
event to every partition), hook events and dead letters as before; no partition count, no guess."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hivestream.serve.handoff import HandoffReport, log_records
from hivestream.serve.log_writer import HookLog
from streams.ingest.hook_log import DEAD_LETTER, HOOK_EVENTS, STUB_EVENTS
from streams.kafka.topics import Topics, partition_for
from tests.projections.test_stub_projection import msg, stub


def _log(tmp_path: Path) -> tuple[Path, bytes, bytes]:
    rng = np.random.default_rng(1)
    glob = stub(1, None, rng.standard_normal(8), 1_000).model_dump_json().encode()
    chan = msg("m1", "ops", rng.standard_normal(8), 2_000).model_dump_json().encode()
    d = tmp_path / "log"
    hl = HookLog(d)
    try:
        hl.append([[(HOOK_EVENTS, b"k", b'{"hook": 1}'), (STUB_EVENTS, b"", glob), (STUB_EVENTS, b"ops", chan),
                    (DEAD_LETTER, b"", b'{"dl": 1}')]], 5_000)
    finally:
        hl.close()
    return d, glob, chan


def test_stub_records_go_where_stubs_produce_puts_them(tmp_path: Path) -> None:
    d, glob, chan = _log(tmp_path)
    t = Topics("hs")
    asked: list[int] = []
    report = HandoffReport()

    def partitions() -> int:
        asked.append(1)
        return 4

    recs = list(log_records(d, t, report, partitions))
    assert asked == [1]  # asked once, at the first stub event
    assert recs[0] == (t.hook_events, b"k", b'{"hook": 1}')
    assert recs[1:5] == [(t.stub_events, b"", glob, p) for p in range(4)]  # a global stub event: every partition
    assert recs[5] == (t.stub_events, b"ops", chan, partition_for(b"ops", 4))
    assert recs[6] == (t.dead_letter, b"", b'{"dl": 1}')
    assert report.sent == {"hook-events": 1, "stub-events": 2, "dead-letter": 1} and (report.first, report.last) == (0, 3)


def test_a_log_with_stub_events_needs_the_stub_topics_partition_count(tmp_path: Path) -> None:
    d, _glob, _chan = _log(tmp_path)
    with pytest.raises(ValueError, match="memory-stub events"):
        list(log_records(d, Topics("hs"), HandoffReport()))
