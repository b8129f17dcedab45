"""The one wall clock of hivestream. It only stamps dead letters and snapshots, never event time."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]
"""A clock: returns epoch milliseconds. Injected everywhere so tests can fix it."""


def wall_clock_ms() -> int:
    """The wall clock in epoch ms."""
    return time.time_ns() // 1_000_000
