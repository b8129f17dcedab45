"""A ``serve`` start that fails leaves nothing behind: the port is tried before anything is created,
and what the start created (the log directory, the DuckDB file, its snapshot, heartbeat and
report) is removed again when it fails before it listens, so no request was answered and nothing
acknowledged can be in them.

Only what this start provably made is removed: the log directory when it did not exist and this
start held its lock, the DuckDB file (with its WAL) when it did not exist and this start held it,
and the files published beside it that did not exist (the publisher writes them only while the
file is held). Whatever existed before the start stays as it was.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path

from projections.reading import heartbeat_path, snapshot_path


def probe_listen(host: str, port: int) -> None:
    """Whether ``host:port`` can be listened on now: bind and close a socket on each of its
    addresses (``SO_REUSEADDR``, as the server binds); nothing for port 0 (any free port).

    Raises:
        OSError: ``"cannot listen on HOST:PORT: REASON"`` (in use, no such address).
    """
    if port == 0:
        return
    try:
        infos = {(i[0], i[1], i[2], i[4]) for i in socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)}
        for family, kind, proto, addr in infos:
            with socket.socket(family, kind, proto) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                s.bind(addr)
    except OSError as e:
        raise OSError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


def _published(db: Path, report: Path | None) -> list[Path]:
    snap, beat = snapshot_path(db), heartbeat_path(db)
    out = [snap, Path(f"{snap}.tmp"), Path(f"{snap}.tmp.wal"), beat, Path(f"{beat}.tmp")]
    if report is not None:
        out += [report, report.with_name(report.name + ".tmp")]
    return out


@dataclass
class StartUndo:
    """What one start may create, taken before it creates anything (:meth:`before`); mark what it
    holds (:attr:`log_held`, :attr:`db_held`) and that it listens (:attr:`listening`) as it goes."""

    log_dir: Path | None
    db: Path | None
    published: list[Path] = field(default_factory=list)
    log_held: bool = False
    db_held: bool = False
    listening: bool = False

    @classmethod
    def before(cls, db: Path, log_dir: Path, report: Path | None) -> StartUndo:
        """The paths of ``db``'s start that do not exist yet."""
        return cls(None if log_dir.exists() else log_dir, None if db.exists() else db,
                   [p for p in _published(db, report) if not p.exists()])

    def remove(self) -> None:
        """Remove what the start created, unless it listened (then nothing). Never raises."""
        if self.listening:
            return
        if self.log_dir is not None and self.log_held:
            shutil.rmtree(self.log_dir, ignore_errors=True)
        if self.db_held:
            doomed = list(self.published)
            if self.db is not None:
                doomed += [self.db, Path(f"{self.db}.wal")]
            for p in doomed:
                with contextlib.suppress(OSError):
                    p.unlink(missing_ok=True)
