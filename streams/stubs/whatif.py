"""What-if by replay: the same stub log under the recorded settings and under new ones.

Both runs replay the whole log in order (so every message meets the stubs as they were at its
point in the log) with :func:`~streams.stubs.replay.run_stub_events`. The report compares, per
channel, main-runtime messages, hit rate (messages with at least one match), matches and
tokens injected; and per stub, how many matches it gets under each setting. When the log
carries runtime-recorded :class:`StubMatched` events, those are summarised too ("logged") and
checked against the replay under the recorded settings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from streams.model.deadletter import RejectedInput
from streams.stubs.events import StubMatched
from streams.stubs.log import LogEntry, StubEventT
from streams.stubs.replay import MessageRecord, StubKey, StubRunResult, run_stub_events
from streams.stubs.settings import MatchPolicy


@dataclass(frozen=True, slots=True)
class ChannelStats:
    """One channel's outcome: main-runtime ``messages``, ``hits`` (messages with ≥ 1 match), ``matches`` and ``tokens`` injected (tokens)."""

    messages: int = 0
    hits: int = 0
    matches: int = 0
    tokens: int = 0

    @property
    def hit_rate(self) -> float:
        """``hits / messages`` (0.0 when there are no messages)."""
        return self.hits / self.messages if self.messages else 0.0


@dataclass(frozen=True, slots=True)
class ChannelComparison:
    """Per channel: ``recorded`` (replay with the recorded settings), ``new`` (what-if) and ``logged`` (runtime log, or ``None``)."""

    channel: str
    recorded: ChannelStats
    new: ChannelStats
    logged: ChannelStats | None = None


@dataclass(frozen=True, slots=True)
class StubChange:
    """A stub whose match count differs: ``recorded`` vs ``new`` matches; ``delta`` = new - recorded (``> 0`` gains)."""

    stub_channel: str | None
    stub_id: int
    title: str
    recorded: int
    new: int

    @property
    def delta(self) -> int:
        """``new - recorded`` (matches)."""
        return self.new - self.recorded


@dataclass
class WhatIfReport:
    """The comparison of two replays of one log.

    Attributes:
        recorded_policy, new_policy: the settings compared.
        channel: the channel filter, or ``None`` for all.
        channels: per channel comparison, by channel name.
        totals: the sums over ``channels``.
        stub_changes: stubs that gain or lose matches, largest change first.
        recorded_matches, new_matches: the matches of each replay (filtered to ``channel``).
        logged_matches: runtime-recorded matches in the log (filtered), ``[]`` when none.
        reproduces_logged: whether the recorded-settings replay equals ``logged_matches``
            exactly (message, stub, rank, similarity, tokens, time); ``None`` without logged matches.
        rejections: rejected log items (the same in both runs).
    """

    recorded_policy: MatchPolicy
    new_policy: MatchPolicy
    channel: str | None
    channels: list[ChannelComparison] = field(default_factory=list)
    totals: ChannelComparison | None = None
    stub_changes: list[StubChange] = field(default_factory=list)
    recorded_matches: list[StubMatched] = field(default_factory=list)
    new_matches: list[StubMatched] = field(default_factory=list)
    logged_matches: list[StubMatched] = field(default_factory=list)
    reproduces_logged: bool | None = None
    rejections: int = 0


def match_key(m: StubMatched) -> tuple[str, str, str | None, int, int, float, int, int]:
    """What two matches must share to be "the same match" (event ids are ignored)."""
    return (m.channel, m.message_id, m.stub_channel, m.stub_id, m.rank, m.similarity, m.tokens_injected, m.event_time_ms)


def what_if(
    events: Iterable[StubEventT | RejectedInput | LogEntry],
    recorded_policy: MatchPolicy,
    new_policy: MatchPolicy,
    channel: str | None = None,
) -> WhatIfReport:
    """Replay ``events`` under both policies and compare them (see the module docstring).

    Args:
        events: the log, in order (materialised once; it is replayed twice).
        recorded_policy: the settings the log was recorded with.
        new_policy: the settings to try.
        channel: only report messages (and their matches) of this channel.

    Returns:
        The :class:`WhatIfReport`. Never raises for bad input (it is counted in ``rejections``).
    """
    log = list(events)
    rec, new = run_stub_events(log, recorded_policy), run_stub_events(log, new_policy)

    def keep(m: StubMatched | MessageRecord) -> bool:
        return channel is None or m.channel == channel

    rec_m, new_m = [m for m in rec.matches if keep(m)], [m for m in new.matches if keep(m)]
    logged = [m for m in rec.logged if keep(m)]
    msgs = [m for m in rec.messages if keep(m) and m.origin == "main"]
    has_log = bool(rec.logged)
    names = sorted({m.channel for m in msgs} | {m.channel for m in rec_m + new_m + logged})
    rows = [
        ChannelComparison(c, _stats(c, msgs, rec_m), _stats(c, msgs, new_m), _stats(c, msgs, logged) if has_log else None)
        for c in names
    ]
    report = WhatIfReport(recorded_policy, new_policy, channel, rows, _total(rows, has_log), _changes(rec, new, rec_m, new_m),
                          rec_m, new_m, logged, rejections=len(rec.rejections))
    if has_log:
        report.reproduces_logged = sorted(map(match_key, rec_m), key=repr) == sorted(map(match_key, logged), key=repr)
    return report


def _stats(channel: str, msgs: Sequence[MessageRecord], matches: Sequence[StubMatched]) -> ChannelStats:
    mine = [m for m in matches if m.channel == channel]
    return ChannelStats(
        messages=sum(1 for m in msgs if m.channel == channel),
        hits=len({m.message_id for m in mine}),
        matches=len(mine),
        tokens=sum(m.tokens_injected for m in mine),
    )


def _total(rows: Sequence[ChannelComparison], has_log: bool) -> ChannelComparison:
    def add(stats: Iterable[ChannelStats | None]) -> ChannelStats:
        s = [x for x in stats if x is not None]
        return ChannelStats(sum(x.messages for x in s), sum(x.hits for x in s), sum(x.matches for x in s), sum(x.tokens for x in s))

    return ChannelComparison("(all)", add(r.recorded for r in rows), add(r.new for r in rows), add(r.logged for r in rows) if has_log else None)


def _changes(rec: StubRunResult, new: StubRunResult, rec_m: Sequence[StubMatched], new_m: Sequence[StubMatched]) -> list[StubChange]:
    a: Counter[StubKey] = Counter((m.stub_channel, m.stub_id) for m in rec_m)
    b: Counter[StubKey] = Counter((m.stub_channel, m.stub_id) for m in new_m)
    out = []
    for key in a.keys() | b.keys():
        if a[key] != b[key]:
            r = rec.stubs.get(key) or new.stubs.get(key)
            out.append(StubChange(key[0], key[1], r.title if r else "", a[key], b[key]))
    out.sort(key=lambda c: (-abs(c.delta), -c.delta, c.stub_channel or "", c.stub_id))
    return out
