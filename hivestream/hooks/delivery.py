"""The delivery rule every hivestream client follows (pure: an answer in, a decision out).

A payload leaves a client's spool only on an answer that proves it is stored or dead-lettered:

* a ``2xx`` whose body is the server's own JSON answer (``"accepted"``, an integer, and
  ``"durable"``: ``broker``, ``spool`` or ``log``): the server made every accepted payload durable
  and dead-lettered the rest. A ``2xx`` without it (another web server behind a wrong URL, a
  proxy's ``204``) proves nothing and is retried later;
* a ``400`` or ``422`` whose body is the server's own JSON verdict saying it dead-lettered the
  payload (``"dead_lettered": N`` with ``N >= 1``) and did not truncate the dead letter
  (``"truncated": false``, exactly; ``true`` means the dead letter keeps only the first 256 KiB,
  so the client keeps the whole payload apart, under ``rejected/``, as it does after a ``413``).

Anything else keeps the payload: ``404`` (a wrong URL path, a misspelt runtime, a proxy), ``500``
or any other status is a failure of this payload (kept apart under ``retry/`` and retried later,
so it does not block the ones behind it); no answer, ``401``, ``403``, ``408``, ``429``, ``502``,
``503`` and ``504`` are failures of the server or the path to it (kept, and the flush stops: the
next payloads would fail the same way). The OpenClaw handler
(:mod:`hivestream.hooks.openclaw_template`) follows the same rule in JavaScript.
"""

from __future__ import annotations

import json
from enum import StrEnum

STOP_STATUSES = frozenset({0, 401, 403, 408, 429, 502, 503, 504})
"""Statuses (0: no answer) that say the server, not the payload, is the problem."""


DURABLE_PLACES = frozenset({"broker", "spool", "log"})
"""Where the server says it made a 2xx-answered request durable (``ingest``: broker or spool; ``serve``: its log)."""


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class Verdict(StrEnum):
    """What a client does with a payload after one post."""

    DELIVERED = "delivered"
    """Stored: delete it."""
    DEAD_LETTERED = "dead_lettered"
    """Refused for good and dead-lettered whole by the server: delete it."""
    SET_ASIDE = "set_aside"
    """Refused for good but not kept whole (413, truncated dead letter): keep it under ``rejected/``."""
    RETRY = "retry"
    """This payload failed (404, 500, ...): keep it apart, retry later, go on with the next."""
    STOP = "stop"
    """The server failed (no answer, 401, 503, ...): keep it and stop for now."""


def verdict_of(status: int, body: bytes) -> Verdict:
    """The :class:`Verdict` of one answer.

    Args:
        status: the HTTP status, 0 when no answer came.
        body: the answer's body (possibly cut short; unparseable bodies prove nothing).
    """
    if status == 413:
        return Verdict.SET_ASIDE
    if 200 <= status < 300 or status in (400, 422):
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):
            answer = None
        if not isinstance(answer, dict):
            return Verdict.RETRY
        if 200 <= status < 300:
            ours = _is_int(answer.get("accepted")) and answer.get("durable") in DURABLE_PLACES
            return Verdict.DELIVERED if ours else Verdict.RETRY
        n = answer.get("dead_lettered")
        if isinstance(n, int) and not isinstance(n, bool) and n >= 1:
            if answer.get("truncated") is True:
                return Verdict.SET_ASIDE
            if answer.get("truncated") is False:
                return Verdict.DEAD_LETTERED
        return Verdict.RETRY
    if status in STOP_STATUSES:
        return Verdict.STOP
    return Verdict.RETRY
