"""When the projector's next snapshot for readers is due (``projections.frames.snapshot.SnapshotPacing``)."""

from __future__ import annotations

import pytest

from projections.frames.snapshot import SNAPSHOT_GAP_PER_COPY_S, SNAPSHOT_RETRY_CAP_S, SnapshotPacing


def test_the_first_snapshot_is_due_at_once_and_never_when_off() -> None:
    assert SnapshotPacing(2.0).due(0.0, quiet=False)
    assert SnapshotPacing(2.0).due(0.0, quiet=True)
    assert not SnapshotPacing(0.0).due(1e9, quiet=True)


def test_a_quick_copy_keeps_every_s() -> None:
    p = SnapshotPacing(2.0)
    p.published(10.0, 0.01)
    assert not p.due(11.9, quiet=False)
    assert p.due(12.01, quiet=False)


@pytest.mark.parametrize("took", [0.5, 1.0, 3.0])
def test_a_slow_copy_spaces_the_next_one_while_records_come(took: float) -> None:
    p = SnapshotPacing(2.0)
    p.published(100.0, took)
    end = 100.0 + took
    gap = max(2.0, SNAPSHOT_GAP_PER_COPY_S * took)
    assert not p.due(end + gap - 0.01, quiet=False)
    assert p.due(end + gap, quiet=False)
    # copying takes at most a tenth of the time while busy
    assert took / (took + gap) <= 1 / (1 + SNAPSHOT_GAP_PER_COPY_S) + 1e-9


def test_a_quiet_stream_is_published_after_every_s_whatever_the_last_copy_took() -> None:
    p = SnapshotPacing(2.0)
    p.published(100.0, 3.0)  # a slow copy: busy gap 27 s
    assert not p.due(104.9, quiet=True)
    assert p.due(105.0, quiet=True)
    assert not p.due(105.0, quiet=False)


def test_a_copy_cut_under_load_is_followed_by_one_at_once_when_the_stream_goes_quiet() -> None:
    p = SnapshotPacing(2.0)
    p.published(100.0, 0.3, quiet=False)  # records were in flight: this copy is not the burst's end
    assert not p.due(100.5, quiet=False)
    assert p.due(100.5, quiet=True)  # the burst ended: its end is published now, not at 102.3
    p.published(100.5, 0.3, quiet=True)
    assert not p.due(101.0, quiet=True)  # a trickle of quiet copies keeps every_s
    assert not p.due(102.7, quiet=True)
    assert p.due(102.8, quiet=True)


def test_failures_in_a_row_double_the_pause_up_to_the_cap_and_a_success_resets_it() -> None:
    p = SnapshotPacing(1.0)
    pauses = [p.failed(10.0) for _ in range(9)]
    assert pauses == [2, 4, 8, 16, 32, 64, SNAPSHOT_RETRY_CAP_S, SNAPSHOT_RETRY_CAP_S, SNAPSHOT_RETRY_CAP_S]
    assert not p.due(10.0 + SNAPSHOT_RETRY_CAP_S - 0.01, quiet=True)  # a quiet stream waits out the pause too
    assert p.due(10.0 + SNAPSHOT_RETRY_CAP_S, quiet=False)
    p.published(200.0, 0.1)
    assert p.failures == 0 and p.due(201.1, quiet=False)
