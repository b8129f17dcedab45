"""Checks of the numeric options of the servers (``serve``, ``ingest``): typer parses a number, these
say whether it can work, in one line naming the option, before anything is opened or bound.
Pure: each raises :class:`BadOption` or returns nothing."""

from __future__ import annotations

import math

MAX_PORT = 65535
MIN_BODY_BYTES = 1024
"""Smallest ``--max-body-bytes``: an ordinary hook payload is several hundred bytes, so a smaller
limit would answer every POST 413."""
RECORD_ROOM = 64 << 10
"""Room beside the largest body that a bound of stored bytes (the log, the spool) must leave: a
bound smaller than one body plus this could never take the largest body allowed."""


class BadOption(ValueError):
    """A numeric option that cannot work: one line naming the option, the value and why."""


def port(value: int, option: str = "--port") -> None:
    """A TCP port: 0 (any free one) to 65535 (a larger number would wrap around to another port)."""
    if not 0 <= value <= MAX_PORT:
        raise BadOption(f"{option} {value}: a TCP port is 0 (any free port) to {MAX_PORT}")


def seconds(option: str, value: float, *, zero: bool) -> None:
    """A finite number of seconds, more than 0 (or 0 as well when ``zero``)."""
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise BadOption(f"{option} {value:g}: expected a finite number of seconds {'of 0 or more' if zero else 'above 0'}")


def days(option: str, value: float) -> None:
    """A finite number of days, 0 or more."""
    if not math.isfinite(value) or value < 0:
        raise BadOption(f"{option} {value:g}: expected a finite number of days of 0 or more")


def byte_count(option: str, value: int, least: int) -> None:
    """A number of bytes of at least ``least``."""
    if value < least:
        raise BadOption(f"{option} {value}: expected at least {least} bytes")


def body_limit(option: str, value: int) -> None:
    """The largest request body: at least :data:`MIN_BODY_BYTES`."""
    if value < MIN_BODY_BYTES:
        raise BadOption(f"{option} {value}: expected at least {MIN_BODY_BYTES} bytes (a smaller limit refuses ordinary hook payloads)")


def bound_for_bodies(option: str, value: int, max_body_bytes: int) -> None:
    """A bound of stored bytes (the log, the spool) that can take the largest body allowed: at least
    ``max_body_bytes`` + :data:`RECORD_ROOM` (else every POST would be refused 503 while the
    server says it is ready)."""
    least = max_body_bytes + RECORD_ROOM
    if value < least:
        raise BadOption(f"{option} {value}: expected at least {least} bytes (--max-body-bytes {max_body_bytes} + {RECORD_ROOM}), "
                        "or no request could ever be stored")
