"""The nightly stub refresh's schedule (03:20 UTC by default) and its thread."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest

from hivestream.services.stub_nightly import Nightly, next_run_ms, parse_at


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000)


class FakeClock:
    """Epoch ms that start at ``start`` and advance with real time."""

    def __init__(self, start: str) -> None:
        self.base, self.t0 = ms(start), time.monotonic()

    def __call__(self) -> int:
        return self.base + int((time.monotonic() - self.t0) * 1000)


def test_next_run() -> None:
    at = parse_at("03:20")
    assert next_run_ms(ms("2026-12-06T01:00:00"), at) == ms("2026-12-06T03:20:00")
    assert next_run_ms(ms("2026-12-06T03:20:00"), at) == ms("2026-12-07T03:20:00")  # strictly after: never twice
    assert next_run_ms(ms("2026-12-31T23:59:59"), at) == ms("2027-01-01T03:20:00")
    for bad in ("3:20", "24:00", "03:60", "x", ""):
        with pytest.raises(ValueError, match="HH:MM"):
            parse_at(bad)


def test_the_thread_runs_the_job_when_due_and_stops_at_once() -> None:
    clock = FakeClock("2026-12-06T03:19:59.700")
    ran = threading.Event()

    def job() -> str:
        ran.set()
        return "2 refreshed"

    n = Nightly(job, "03:20", clock=clock)
    n.start()
    assert ran.wait(5)
    n.stop(timeout_s=5)
    assert n.runs == 1 and n.last_summary == "2 refreshed"  # and not again: the next run is a day later


def test_a_failing_job_is_logged_not_raised() -> None:
    clock = FakeClock("2026-12-06T03:19:59.800")
    done = threading.Event()

    def job() -> str:
        done.set()
        raise OSError("disk gone")

    n = Nightly(job, clock=clock)
    n.start()
    assert done.wait(5)
    n.stop()
    assert n.last_summary == "failed: OSError: disk gone"
