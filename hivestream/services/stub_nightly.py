"""The nightly stub refresh (NanoClaw's job at 03:20 UTC) as a thread of a long-running process.

:func:`next_run_ms` is the schedule (pure): the next time of day, in UTC, strictly after now.
:class:`Nightly` sleeps until then on an event (so stopping it is immediate), runs its job (a
callable that refreshes and records; its exceptions are logged in one line, never raised), and
goes back to sleep; a job that overruns a day skips the runs it missed rather than running twice.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable

from streams.model.clock import Clock, wall_clock_ms

log = logging.getLogger("hivestream.services.stubs")

DAY_MS = 86_400_000
DEFAULT_AT = "03:20"
"""The seed's refresh time (UTC)."""
_AT = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


def parse_at(text: str) -> int:
    """Milliseconds after UTC midnight of a time of day ``HH:MM`` (24 h).

    Raises:
        ValueError: ``text`` is not ``HH:MM`` from 00:00 to 23:59.
    """
    m = _AT.match(text.strip())
    if m is None:
        raise ValueError(f"the refresh time must be HH:MM in UTC (00:00 to 23:59), got {text!r}")
    return (int(m.group(1)) * 60 + int(m.group(2))) * 60_000


def next_run_ms(now_ms: int, at_ms: int) -> int:
    """The first instant strictly after ``now_ms`` (epoch ms) that is ``at_ms`` after a UTC midnight."""
    day = now_ms - now_ms % DAY_MS
    t = day + at_ms
    return t if t > now_ms else t + DAY_MS


class Nightly:
    """Runs ``job`` every day at ``at`` (``HH:MM`` UTC) in a daemon thread until :meth:`stop`.

    Args:
        job: the refresh (returns a one-line summary to log, or ``None``).
        at: the time of day (``HH:MM``, UTC).
        clock: epoch milliseconds.

    Raises:
        ValueError: a bad ``at``.
    """

    def __init__(self, job: Callable[[], str | None], at: str = DEFAULT_AT, clock: Clock = wall_clock_ms) -> None:
        self.job = job
        self.at_ms = parse_at(at)
        self.at = at
        self.clock = clock
        self.runs = 0
        self.last_summary: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hivestream-stub-nightly", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop sleeping and wait up to ``timeout_s`` for a run under way to finish (seconds)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.is_set():
            due = next_run_ms(self.clock(), self.at_ms)
            while not self._stop.is_set():
                left = due - self.clock()
                if left <= 0:
                    break
                self._stop.wait(min(left / 1000, 60.0))
            if self._stop.is_set():
                return
            try:
                self.last_summary = self.job()
                if self.last_summary:
                    log.info("nightly stub refresh: %s", self.last_summary)
            except Exception as e:  # a failed night is logged; the next one runs
                self.last_summary = f"failed: {type(e).__name__}: {e}"
                log.warning("nightly stub refresh failed: %s: %s", type(e).__name__, e)
            self.runs += 1
