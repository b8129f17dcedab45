"""An adversarial review of the frames worker's prefix-safe changelog (:mod:`streams.frames.changelog`).

:mod:`tests.test_dedup_changelog_order` cuts every flush of generated logs after every prefix; the
scenarios here go where those logs do not. The answer compared for an event id is what the
projector stores for it: (kind, frame id, frame time, late flag) of the run that emits it last.
"""

from __future__ import annotations

from collections.abc import Mapping

from streams.frames.capture import Capture, to_capture
from streams.frames.changelog import PartitionChangelog, is_marker_key, marker_key, marker_value
from streams.frames.dedup import DedupCore, group_of_key
from streams.model.body_hash import KeyStrategy
from streams.model.events import from_prefixed
from streams.model.tracked_state import TrackedState
from tests.test_dedup_changelog_order import simulate

W, L = 1_000, 300


def mk(eid: str, key: str, t: int, offset: int, partition: int = 0) -> Capture:
    """A capture of ``key`` at event time ``t`` read at ``(partition, offset)``."""
    return Capture(event_id=eid, key=key, body_hash="", content="", source="s", session="s", event_type="stop", parent=None,
                   project=None, importance="normal", event_time_ms=t, partition=partition, offset=offset)


def hex_key(group: int, i: int) -> str:
    """A ``body`` dedup key (64 hex) in key group ``group``."""
    return f"{group:08x}{i:056x}"


# --- a dedup key that starts like a marker -----------------------------------------------------------


def tilde_key() -> str:
    """The ``body+event`` dedup key of a capture whose ``[hm …]`` prefix names the event ``~watermarks``."""
    ev = from_prefixed("[hm src:x event:~watermarks] the same turn", event_time_ms=1000)
    c = to_capture(ev, strategy=KeyStrategy("body+event"))
    assert c is not None
    return c.key


def test_a_body_event_key_that_starts_like_a_marker_is_a_dedup_key() -> None:
    """An event type is any token, so a ``body+event`` key can start with ``~watermarks:``; it ends
    with its 64-hex body hash, never with a partition number, and is no marker."""
    key = tilde_key()
    assert key.startswith("~watermarks:")
    assert not is_marker_key(key) and not is_marker_key("~watermarks:" + "1" * 64) and not is_marker_key("~x:" + "0" * 64)
    assert all(is_marker_key(marker_key(p)) for p in (0, 7, 255, 2**31 - 1))


def test_a_key_that_starts_like_a_marker_survives_a_restore() -> None:
    """Its entry comes back from the changelog, so a record processed again after a kill is a touch
    of the first capture's frame again (the restore dropped the entry: a frame of its own)."""
    key = tilde_key()
    log = [mk("a", key, 1000, 0), mk("b", key, 1100, 1), mk("c", hex_key(0, 1), 1200, 2)]
    expected = simulate(log, [(1, 1), (3, 3)])
    assert expected["b"] == ("touched", "a", 1000, False)
    for cut in range(4):
        assert simulate(log, [(1, 1), (3, 3)], {1: cut}) == expected, cut

    def make_core(state: TrackedState, watermarks: Mapping[int, int] | None) -> DedupCore:
        return DedupCore(W, allowed_lateness_ms=L, state=state, watermarks=watermarks)

    entry = {"f": [["a", 1000, 2000, False, ["a"]]], "g": 1000, "p": [0, 0]}
    items = [(key, entry), (marker_key(0), marker_value({group_of_key(key): 1000}))]
    assert dict(PartitionChangelog.restore(0, items, lambda _k: True, make_core).state) == {key: entry}
