"""``hivestream kb submit|approve|reject`` and ``hivestream stubs import`` on a file a running serve
holds: the events go through that serve (``POST /v1/hooks/knowhub``, ``POST /v1/stub-events`` on the
ingest address its note ``<db>.serve`` names, :mod:`hivestream.serve.read_marker`), into its log, and
its dedup loop applies them.

The bearer token: the note's review token (serve on loopback without a tokens file: it may post
reviews and anything else), else ``$HIVESTREAM_INGEST_TOKEN`` (a token of serve's tokens file: with
the ``review`` scope for a review or a stub write, the ``hooks`` scope for a submission). After the
``2xx`` the event is durable in serve's log; :func:`send` then waits a few seconds for the loop to apply it
(serve's read listener: ``applied`` reaching the log's length), so a ``kb pending`` or ``kb search``
right after sees it. Only ``http.client``; every failure is one line without the token.
"""

from __future__ import annotations

import http.client
import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hivestream.hooks.config import TOKEN_ENV
from hivestream.serve.read_client import ServeUnreachable, ask, prove
from hivestream.serve.read_marker import ReadMarker, marker_path, process_alive, read_marker

POST_TIMEOUT_S = 30.0
"""How long the event's ``POST`` waits for serve's answer (seconds)."""
WAIT_APPLIED_S = 10.0
"""How long :func:`send` waits for serve's loop to apply the event (seconds; it is durable already)."""


class NotSent(Exception):
    """Serve did not take the event (nothing of it is in its log, or it was dead-lettered there); one line."""


@dataclass(frozen=True)
class Sent:
    """Events serve took: its pid, whether its loop applied them within :data:`WAIT_APPLIED_S`, and
    how many of the lines it dead-lettered (answered in a ``200`` beside the ones it accepted)."""

    pid: int
    applied: bool
    rejected: int = 0


def running_serve(db: Path) -> ReadMarker | None:
    """The note of the serve holding ``db`` when there is one and its process runs; ``None`` otherwise
    (no note, or a note left by a serve that is gone: the file is then free to open)."""
    m = read_marker(db)
    return m if m is not None and process_alive(m.pid) else None


def _detail(answer: bytes) -> str:
    try:
        obj = json.loads(answer)
    except ValueError:
        return ""
    if not isinstance(obj, dict):
        return ""
    results = obj.get("results")
    if isinstance(results, list) and results and isinstance(results[0], dict) and results[0].get("status") == "rejected":
        return f"{results[0].get('reason')}: {results[0].get('detail')}"[:500]
    return str(obj.get("detail") or obj.get("error") or "")[:500]


def send(db: Path, m: ReadMarker, line: bytes, *, review: bool, wait_s: float = WAIT_APPLIED_S) -> Sent:
    """Post one KnowHub event line to the serve of note ``m`` (holding ``db``) and wait up to
    ``wait_s`` seconds for its loop to apply it.

    Raises:
        NotSent: the note names no ingest address (a serve of an older version), its serve does not
            prove itself on its read listener (a stale note: :func:`hivestream.serve.read_client.prove`), no token with
            the authority needed is at hand, serve did not answer, refused the token or the
            scope, could not make it durable (503), or dead-lettered it (422); one line.
    """
    return send_lines(db, m, [line], KNOWHUB_PATH, review=review, wait_s=wait_s, strict=True)


KNOWHUB_PATH = "/v1/hooks/knowhub"
"""Where KnowHub event lines are posted."""
STUB_EVENTS_PATH = "/v1/stub-events"
"""Where memory-stub events are posted (:mod:`hivestream.serve.stub_route`)."""
BODY_BYTES = 512 << 10
"""Most bytes of lines one request carries (serve's default body limit is 1 MiB); a longer line goes alone."""


def send_lines(db: Path, m: ReadMarker, lines: Iterable[bytes], path: str, *, review: bool, wait_s: float = WAIT_APPLIED_S,
               body_bytes: int = BODY_BYTES, strict: bool = False) -> Sent:
    """Post event lines (JSON, no ``\\n``) to ``path`` of the serve of note ``m`` (holding ``db``), as
    NDJSON bodies of at most ``body_bytes`` bytes in order (a line that is not UTF-8 in a body of its
    own, so it spoils no other), then wait up to ``wait_s`` seconds for its loop to apply them. Lines
    are read as they are posted (a large import never sits in memory). A body serve dead-lettered
    whole (``400``, ``422``) counts as that many rejected lines unless ``strict``.

    Raises:
        NotSent: as :func:`send` (a dead-lettered body only when ``strict``); the lines posted before
            a refused request stay in serve's log (the message says how many).
    """
    where = f"the hivestream serve (pid {m.pid}) holding {db}"
    if m.ingest is None:
        raise NotSent(f"{where} noted no ingest address in {marker_path(db)} (an older version): restart it, then retry")
    try:  # the note may be stale and its ports another process's: nothing, the review token least, goes to one that is not serve
        prove(db)
    except ServeUnreachable as e:
        raise NotSent(f"{e}; nothing was sent") from None
    token = m.ingest.review_token or os.environ.get(TOKEN_ENV) or None
    if m.ingest.review_token is None and token is None:
        scope = "review" if review else "hooks"
        raise NotSent(f"{where} takes events only with a token of its tokens file: set {TOKEN_ENV} to one with the {scope} scope, then retry")
    sent = rejected = 0
    for body, n in _bodies(lines, body_bytes):
        try:
            rejected += _post(db, m, where, path, body, token, None if strict else n)
        except NotSent as e:
            raise NotSent(f"{e}" + (f" ({sent} events sent before it are in serve's log)" if sent else "")) from None
        sent += n
    return Sent(m.pid, _wait_applied(db, wait_s), rejected)


def _bodies(lines: Iterable[bytes], body_bytes: int) -> Iterator[tuple[bytes, int]]:
    """NDJSON bodies of ``lines`` in order, each at most ``body_bytes`` (a longer line alone), with their line counts."""
    batch: list[bytes] = []
    size = 0
    for line in lines:
        if not _utf8(line):
            if batch:
                yield b"\n".join(batch), len(batch)
                batch, size = [], 0
            yield line, 1
            continue
        if batch and size + len(line) + 1 > body_bytes:
            yield b"\n".join(batch), len(batch)
            batch, size = [], 0
        batch.append(line)
        size += len(line) + 1
    if batch:
        yield b"\n".join(batch), len(batch)


def _utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _post(db: Path, m: ReadMarker, where: str, path: str, body: bytes, token: str | None, lines: int | None = None) -> int:
    """One ``POST`` of ``body``; on a ``200``, how many of its lines serve dead-lettered; on a ``400``
    or ``422`` that dead-lettered it, ``lines`` (when given).

    Raises:
        NotSent: for anything else (one line, never the token).
    """
    assert m.ingest is not None
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPConnection(m.ingest.host, m.ingest.port, timeout=POST_TIMEOUT_S)
    try:
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        status, answer = resp.status, resp.read()
    except (OSError, http.client.HTTPException, ValueError) as e:
        raise NotSent(f"{where} did not answer on {m.ingest.host}:{m.ingest.port} ({type(e).__name__}); nothing was sent: "
                      f"retry when it runs") from None
    finally:
        conn.close()
    if status == 401:
        whose = f"the token in {TOKEN_ENV}" if m.ingest.review_token is None else f"the review token of {marker_path(db)}"
        raise NotSent(f"{where} refused {whose} (HTTP 401); nothing was written")
    if status == 403:
        raise NotSent(f"{where} refused the event (HTTP 403): {_detail(answer)}")
    if status == 404:
        raise NotSent(f"{where} has no route {path} (an older version): restart it, then retry")
    if status == 413:
        raise NotSent(f"{where} refused a request of {len(body)} bytes as too large (HTTP 413: {_detail(answer)}); nothing of it was written")
    if status == 503:
        raise NotSent(f"{where} cannot take events right now (HTTP 503: {_detail(answer)}); nothing was written: retry in a few seconds")
    if lines is not None and status in (400, 422) and _dead_lettered(answer):
        return lines
    if status == 422:
        raise NotSent(f"{where} dead-lettered the event: {_detail(answer)}")
    if status != 200:
        raise NotSent(f"{where} answered HTTP {status} ({_detail(answer)})")
    try:
        return int(json.loads(answer).get("rejected", 0))
    except (ValueError, AttributeError, TypeError):
        return 0


def _dead_lettered(answer: bytes) -> bool:
    """Whether an answer says its payloads were dead-lettered (so they are in serve's log)."""
    try:
        obj = json.loads(answer)
    except ValueError:
        return False
    return isinstance(obj, dict) and bool(obj.get("dead_lettered"))


def _wait_applied(db: Path, wait_s: float) -> bool:
    """Whether serve's loop applied everything its log held once the event was in it, within ``wait_s``
    (serve's read listener: ``applied`` and ``log_records`` of a named query's answer)."""
    deadline = time.monotonic() + wait_s
    body = json.dumps({"set": "kb-review", "name": "experience-count"}).encode()
    target: int | None = None
    while True:
        try:
            got = ask(db, "POST", "/v1/query", body, timeout_s=POST_TIMEOUT_S)
            if got is None or got[0] != 200:
                return False
            obj = json.loads(got[1])
            applied, records = int(obj["applied"]), int(obj["log_records"])
        except (ServeUnreachable, ValueError, KeyError, TypeError):
            return False
        target = records if target is None else target
        if applied >= target:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
