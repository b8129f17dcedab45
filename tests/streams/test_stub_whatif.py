"""What-if by replay: the recorded settings reproduce the runtime's matches; new settings equal a fresh run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hivestream.embedded.stubs import run_stub_logs
from streams.stubs.events import MessageEmbedded, StubMatched
from streams.stubs.log import StubEventT, read_log, write_log
from streams.stubs.matcher import StubIndex, to_matched_events
from streams.stubs.replay import run_stub_events
from streams.stubs.settings import MatchPolicy, MatchSettings
from streams.stubs.whatif import ChannelStats, match_key, what_if
from tests.projections.test_stub_projection import HOUR, POLICY, T0, db_matches, mix, msg, refresh, scenario, stub

NEW = MatchPolicy(defaults=MatchSettings(threshold=0.5, top_n=3, token_budget=400))


def runtime_log(events: list[StubEventT], policy: MatchPolicy) -> list[StubEventT]:
    """What the NanoClaw runtime would have logged: each message followed by its stub-matched events.

    An independent simulation straight on StubIndex (not through the replay module).
    """
    index = StubIndex(policy)
    out: list[StubEventT] = []
    for ev in events:
        out.append(ev)
        if isinstance(ev, MessageEmbedded):
            matched = to_matched_events(ev, index.match(ev))
            for m in matched:
                index.apply(m)
            out += [m.model_copy(update={"event_id": f"runtime-{m.event_id}"}) for m in matched]
        else:
            index.apply(ev)
    return out


def test_recorded_settings_reproduce_the_recorded_matches_exactly() -> None:
    log = runtime_log(scenario(seed=3), POLICY)
    logged = [e for e in log if isinstance(e, StubMatched)]
    assert len(logged) > 10
    report = what_if(log, POLICY, POLICY)
    assert report.reproduces_logged is True
    assert [match_key(m) for m in report.recorded_matches] == [match_key(m) for m in logged]
    assert [match_key(m) for m in report.new_matches] == [match_key(m) for m in logged]
    assert report.stub_changes == []
    assert report.totals is not None and report.totals.logged == report.totals.recorded == report.totals.new
    # logged matches are not applied to the replay's state: counts are not doubled
    res = run_stub_events(log, POLICY)
    assert res.stubs[("alpha", 3)].match_count == sum(1 for m in logged if (m.stub_channel, m.stub_id) == ("alpha", 3))


def test_other_recorded_settings_do_not_reproduce_the_log() -> None:
    log = runtime_log(scenario(seed=3), POLICY)
    assert what_if(log, NEW, POLICY).reproduces_logged is False


def test_new_settings_equal_a_fresh_run(tmp_path: Path) -> None:
    log = runtime_log(scenario(seed=4), POLICY)
    path = tmp_path / "log.jsonl"
    write_log(path, log)
    report = what_if(list(read_log(path)), POLICY, NEW)
    run_stub_logs([read_log(path)], tmp_path / "fresh.duckdb", NEW)
    fresh = db_matches(tmp_path / "fresh.duckdb")
    assert [(m.message_id, m.channel, m.stub_channel or "", m.stub_id, m.similarity, m.rank, m.tokens_injected, m.event_time_ms, m.event_id)
            for m in report.new_matches] == fresh
    assert len(fresh) != len(report.recorded_matches)  # the settings do make a difference here
    # per stub: the changes are exactly the differences of the two runs' counts
    for c in report.stub_changes:
        assert c.recorded == sum(1 for m in report.recorded_matches if (m.stub_channel, m.stub_id) == (c.stub_channel, c.stub_id))
        assert c.new == sum(1 for m in report.new_matches if (m.stub_channel, m.stub_id) == (c.stub_channel, c.stub_id))
        assert c.delta != 0 and c.title
    assert report.stub_changes and any(c.delta > 0 for c in report.stub_changes)


def test_per_channel_numbers_on_a_small_case() -> None:
    rng = np.random.default_rng(1)
    a, b, g = (rng.standard_normal(64) for _ in range(3))
    events: list[StubEventT] = [
        stub(1, "alpha", a, T0, tokens=300), stub(2, "beta", b, T0, tokens=200), stub(7, None, g, T0, tokens=150),
        msg("m1", "alpha", mix(rng, a, 0.8), T0 + 1),  # 0.8: matches stub 1 under both
        msg("m2", "alpha", mix(rng, a, 0.55), T0 + 2),  # 0.55: only under the new threshold 0.5
        msg("m3", "beta", mix(rng, b, 0.9), T0 + 3),  # beta: stub 2
        msg("m4", "beta", mix(rng, g, 0.65), T0 + 4),  # the global stub from beta
        msg("m5", "beta", mix(rng, g, 0.9), T0 + 5, origin="subagent"),  # never matches, not counted
        msg("m6", "alpha", rng.standard_normal(64), T0 + 6),  # nothing
    ]
    r = what_if(events, MatchPolicy(defaults=MatchSettings(threshold=0.6)), MatchPolicy(defaults=MatchSettings(threshold=0.5)))
    by = {c.channel: c for c in r.channels}
    assert by["alpha"].recorded == ChannelStats(messages=3, hits=1, matches=1, tokens=300)
    assert by["alpha"].new == ChannelStats(messages=3, hits=2, matches=2, tokens=600)
    assert by["beta"].recorded == by["beta"].new == ChannelStats(messages=2, hits=2, matches=2, tokens=350)
    assert by["alpha"].logged is None and r.reproduces_logged is None
    assert abs(by["alpha"].new.hit_rate - 2 / 3) < 1e-12 and ChannelStats().hit_rate == 0.0
    assert [(c.stub_channel, c.stub_id, c.recorded, c.new, c.delta) for c in r.stub_changes] == [("alpha", 1, 1, 2, 1)]
    only_beta = what_if(events, MatchPolicy(defaults=MatchSettings(threshold=0.6)), MatchPolicy(defaults=MatchSettings(threshold=0.5)), "beta")
    assert [c.channel for c in only_beta.channels] == ["beta"] and only_beta.stub_changes == []
    # top-n 0 loses everything; a budget below 200 tokens keeps only the global stub (150 tokens)
    recorded = MatchPolicy(defaults=MatchSettings(threshold=0.6))
    none = what_if(events, recorded, MatchPolicy(defaults=MatchSettings(threshold=0.6, top_n=0)))
    assert none.totals is not None and none.totals.new.matches == 0
    assert {(c.stub_channel, c.stub_id): c.delta for c in none.stub_changes} == {("alpha", 1): -1, ("beta", 2): -1, (None, 7): -1}
    small = what_if(events, recorded, MatchPolicy(defaults=MatchSettings(threshold=0.6, token_budget=199)))
    assert [(c.stub_id, c.delta) for c in small.stub_changes] == [(1, -1), (2, -1)]
    assert small.totals is not None and (small.totals.recorded.tokens, small.totals.new.tokens) == (650, 150)


def test_stubs_as_they_were_at_each_message_time() -> None:
    rng = np.random.default_rng(2)
    old, new = rng.standard_normal(64), rng.standard_normal(64)
    events: list[StubEventT] = [
        msg("before", "alpha", old, T0 - 1),  # the stub does not exist yet
        stub(1, "alpha", old, T0),
        msg("old", "alpha", old, T0 + 1),
        refresh(1, "alpha", new, T0 + HOUR),
        msg("old-again", "alpha", old, T0 + HOUR + 1),  # after the refresh the old text no longer matches
        msg("new", "alpha", new, T0 + HOUR + 2),
    ]
    r = what_if(events, POLICY, POLICY)
    assert [m.message_id for m in r.recorded_matches] == ["old", "new"]
    res = run_stub_events(events, POLICY)
    assert res.stubs[("alpha", 1)].last_refreshed_at_ms == T0 + HOUR and res.stubs[("alpha", 1)].match_count == 2
    assert [m.message_id for m in res.unmatched] == ["before", "old-again"]


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**16), threshold=st.floats(0.3, 0.9), top_n=st.integers(0, 4), budget=st.integers(0, 800))
def test_what_if_new_side_is_a_plain_run(seed: int, threshold: float, top_n: int, budget: int) -> None:
    events = scenario(seed=seed, n_messages=20)
    new = MatchPolicy(defaults=MatchSettings(threshold=threshold, top_n=top_n, token_budget=budget))
    r = what_if(events, POLICY, new)
    # each side equals the runtime's own matching (StubIndex on the events, not the replay module what_if runs)
    assert [match_key(m) for m in r.new_matches] == [match_key(m) for m in runtime_log(events, new) if isinstance(m, StubMatched)]
    assert [match_key(m) for m in r.recorded_matches] == [match_key(m) for m in runtime_log(events, POLICY) if isinstance(m, StubMatched)]
    assert r.recorded_matches
    assert r.totals is not None and r.totals.new.matches == len(r.new_matches)
    assert sum(c.delta for c in r.stub_changes) == len(r.new_matches) - len(r.recorded_matches)
