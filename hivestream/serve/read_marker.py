"""The note a running ``hivestream serve`` leaves beside its DuckDB file so that ``hivestream query``
and ``report`` in another process ask it instead of reading the snapshot: ``<db>.serve``, JSON
``{"format", "version", "pid", "port", "token"}`` and, optionally, ``"ingest": {"host", "port",
"review_token"}``, mode 0600.

``port`` is serve's read listener (always on 127.0.0.1, apart from the ingest routes); ``token`` a
random secret made at each start that the read routes require, so only who may read this file
(the file's owner) may read the memory through serve; ``hivestream`` proves it without sending it,
and believes only answers that prove it back (:mod:`hivestream.serve.read_proof`). ``ingest`` is
where serve takes events (for ``hivestream kb submit|approve|reject``) and, when serve runs on
loopback without a tokens file, its per-start review token (only a bearer of it may post
``experience-reviewed`` events there). The note is written atomically once serve listens and
removed at a clean stop; after a crash it stays, and a reader finds its process gone. Standard
library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

FORMAT = "hivestream-serve-reads"
VERSION = 1
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,512}")


def marker_path(db: str | Path) -> Path:
    """Where serve leaves its note for readers of ``db``: ``<db>.serve``."""
    return Path(f"{db}.serve")


@dataclass(frozen=True)
class IngestNote:
    """Where a running serve takes events: the host to connect to (a wildcard bind noted as
    loopback), its port and, on loopback without a tokens file, its review token (else ``None``)."""

    host: str
    port: int
    review_token: str | None = None


@dataclass(frozen=True)
class ReadMarker:
    """A running serve's read listener: its process id, its port on 127.0.0.1 and its read token;
    ``ingest``: where it takes events (``None`` in a note without it)."""

    pid: int
    port: int
    token: str
    ingest: IngestNote | None = None


def new_token() -> str:
    """A fresh read token (256 random bits, URL-safe text)."""
    return secrets.token_urlsafe(32)


def write_marker(db: str | Path, marker: ReadMarker) -> Path:
    """Write the note for ``db`` atomically, readable by its owner only (0600).

    Raises:
        OSError: when it cannot be written.
    """
    path = marker_path(db)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        note: dict[str, object] = {"format": FORMAT, "version": VERSION, "pid": marker.pid, "port": marker.port, "token": marker.token}
        if marker.ingest is not None:
            note["ingest"] = {"host": marker.ingest.host, "port": marker.ingest.port, "review_token": marker.ingest.review_token}
        os.write(fd, (json.dumps(note) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(path)
    return path


def read_marker(db: str | Path) -> ReadMarker | None:
    """The note for ``db``, or ``None`` when there is none or it is not one this code wrote for
    this user (another owner, group- or world-writable, another format, not JSON, a token not of
    :func:`new_token`'s URL-safe alphabet). An ``ingest`` entry that is not one this code writes is
    left out (``ingest`` ``None``)."""
    path = marker_path(db)
    try:
        st = path.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return None
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT or obj.get("version") != VERSION:
        return None
    pid, port, token = obj.get("pid"), obj.get("port"), obj.get("token")
    if not (isinstance(pid, int) and pid > 0 and isinstance(port, int) and 0 < port < 65536 and isinstance(token, str) and _TOKEN.fullmatch(token)):
        return None  # a token this code never makes (new_token's alphabet) would not even fit an HTTP header
    return ReadMarker(pid, port, token, _ingest_note(obj.get("ingest")))


_HOST = re.compile(r"[A-Za-z0-9.:_-]{1,255}")


def _ingest_note(obj: object) -> IngestNote | None:
    if not isinstance(obj, dict):
        return None
    host, port, review = obj.get("host"), obj.get("port"), obj.get("review_token")
    if not (isinstance(host, str) and _HOST.fullmatch(host) and isinstance(port, int) and 0 < port < 65536):
        return None
    if review is not None and not (isinstance(review, str) and _TOKEN.fullmatch(review)):
        return None
    return IngestNote(host, port, review)


def remove_marker(db: str | Path, token: str) -> None:
    """Remove the note for ``db`` if it is still the one holding ``token`` (never another's)."""
    found = read_marker(db)
    if found is not None and secrets.compare_digest(found.token, token):
        with contextlib.suppress(OSError):
            marker_path(db).unlink()


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (signal 0; one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
