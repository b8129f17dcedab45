"""One log line per kind of failure and interval, not one per request: a full disk under load fails
every POST, and a line for each (13,129 in one run) buries everything else in the log.

The first occurrence of a line is logged at once; the same line again within ``every_s`` is only
counted, and the next one after that carries the count (``... (and 41 more like it in the last
10 s)``); :meth:`RepeatedLines.flush` logs what is still counted (at stop). The server's
``/metrics`` counts every failure, whatever was logged. Pure but for the logger it is given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_LINES = 64
"""Distinct lines tracked at once (the oldest is forgotten beyond: a flood of distinct lines is logged as it comes)."""


@dataclass
class _Seen:
    since: float
    more: int = 0


class RepeatedLines:
    """Logs each distinct line at most once per ``every_s`` at ``level``, with the count of those it held back.

    Args:
        logger: where lines go.
        level: their level (``logging.ERROR``...).
        every_s: the interval (seconds).
        clock: monotonic seconds (injected in tests).
    """

    def __init__(self, logger: logging.Logger, level: int = logging.ERROR, every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.level = level
        self.every_s = every_s
        self.clock = clock
        self._seen: dict[str, _Seen] = {}

    def log(self, line: str) -> None:
        """Log ``line`` now, or count it when the same line was logged less than ``every_s`` ago."""
        now = self.clock()
        seen = self._seen.get(line)
        if seen is not None and now - seen.since < self.every_s:
            seen.more += 1
            return
        self.logger.log(self.level, "%s", line + self._tail(seen, now))
        self._seen.pop(line, None)
        self._seen[line] = _Seen(now)
        if len(self._seen) > MAX_LINES:
            oldest = next(iter(self._seen))
            self._emit_held(oldest, self._seen.pop(oldest), now)

    def flush(self) -> None:
        """Log the count of every line held back since it was last logged."""
        now = self.clock()
        for line, seen in list(self._seen.items()):
            self._emit_held(line, seen, now)
        self._seen.clear()

    def _emit_held(self, line: str, seen: _Seen, now: float) -> None:
        if seen.more:
            self.logger.log(self.level, "%s", f"{line} ({seen.more} more like it in the last {now - seen.since:.0f} s)")

    @staticmethod
    def _tail(seen: _Seen | None, now: float) -> str:
        return f" (and {seen.more} more like it in the last {now - seen.since:.0f} s)" if seen is not None and seen.more else ""
