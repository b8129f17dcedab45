"""Event-time parsing: ISO-8601 strings and epoch numbers to epoch milliseconds."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from streams.model.deadletter import Reason, RejectedInput

# Epoch values below this are taken as seconds, at or above as milliseconds
# (1e11 s is the year 5138; 1e11 ms is 1973).
_SECONDS_LIMIT = 100_000_000_000
MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


def parse_time_ms(value: object) -> int:
    """Parse an event time to epoch milliseconds (UTC).

    Accepts ISO-8601 strings (``2026-02-23T12:54:34.123Z``, with offset, or naive = UTC) and
    epoch numbers in seconds or milliseconds (see ``_SECONDS_LIMIT``); numeric strings too.

    Raises:
        RejectedInput: ``bad_timestamp`` when missing, unparseable, negative or out of range.
    """
    if value is None or isinstance(value, bool):
        raise RejectedInput(Reason.BAD_TIMESTAMP, f"missing or invalid event time: {value!r}")
    if isinstance(value, str):
        s = value.strip()
        try:
            return parse_time_ms(float(s)) if s and s.lstrip("-").replace(".", "", 1).isdigit() else _iso(s)
        except RejectedInput:
            raise
        except (ValueError, OverflowError) as e:
            raise RejectedInput(Reason.BAD_TIMESTAMP, f"unparseable event time {value!r}: {e}") from e
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise RejectedInput(Reason.BAD_TIMESTAMP, f"event time out of range: {value!r}")
        ms = round(value * 1000) if value < _SECONDS_LIMIT else int(value)
        if ms > MAX_MS:
            raise RejectedInput(Reason.BAD_TIMESTAMP, f"event time out of range: {value!r}")
        return ms
    raise RejectedInput(Reason.BAD_TIMESTAMP, f"event time has type {type(value).__name__}")


def _iso(s: str) -> int:
    dt = datetime.fromisoformat(s.replace("Z", "+00:00") if s.endswith("Z") else s)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    ms = int(dt.timestamp() * 1000)
    if ms < 0 or ms > MAX_MS:
        raise RejectedInput(Reason.BAD_TIMESTAMP, f"event time out of range: {s!r}")
    return ms


def iso_ms(ms: int) -> str:
    """Format epoch ms as ISO-8601 UTC with millisecond precision and a ``Z`` suffix."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
