"""The command hook's local spool: one fsync'd checksummed file per payload, and its flush.

Layout of a spool directory (``--spool-dir``, ``HIVESTREAM_SPOOL_DIR``, default
``~/.hivestream/hook-spool``; and the per-user fallback spool under the temp directory that the
hook writes to when that one is unusable):

* ``<ns>-<pid>-<hex>.hook``: pending payloads, oldest first (written as ``.tmp-<name>``, fsync'd,
  renamed into place; only names of exactly this shape are read, and only regular files);
* ``retry/``: payloads whose post failed on their own (404, 500, ...): kept apart, retried after
  the pending ones, so they never block them;
* ``rejected/``: payloads refused for good but not kept whole by the server (413, truncated dead
  letter): kept for inspection, never posted again;
* ``corrupt/``: torn or corrupt files;
* ``.inflight-<pid>-<name>``: a payload a flush has claimed (by an atomic rename, so concurrent
  flushes never post one payload twice); put back when that process is gone or after
  :data:`STALE_INFLIGHT_S`.

Which answer deletes a payload is :mod:`hivestream.hooks.delivery`'s rule. Standard library only
(the hook starts fast).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from hivestream.hooks.delivery import Verdict, verdict_of
from streams.ingest.fsync import fsync_dir
from streams.ingest.spool_format import decode_records, encode_record

STALE_INFLIGHT_S = 300
_NAME = re.compile(r"^\d{20}-\d+-[0-9a-f]{6}\.hook$")
_INFLIGHT = re.compile(r"^\.inflight-(\d+)-(\d{20}-\d+-[0-9a-f]{6}\.hook)$")

Send = Callable[[str, bytes], tuple[int, bytes]]
"""Posts ``(runtime, body)``; returns ``(status, answer body)``, status 0 when no answer came."""


def fallback_spool_dir() -> Path:
    """The per-user fallback spool under the temp directory (``$TMPDIR``)."""
    import tempfile  # only on rare paths: the hook starts with the standard library's cheapest modules

    return Path(tempfile.gettempdir()) / f"hivestream-hook-spool-{os.getuid()}"


def spool_write(spool: Path, runtime: str, body: bytes, sub: str = "") -> Path:
    """Write one payload durably as ``<spool>[/sub]/<ns>-<pid>-<hex>.hook`` (tmp file, fsync, rename).

    Raises:
        OSError: when the directory or file cannot be written.
    """
    d = spool / sub if sub else spool
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(3).hex()}.hook"
    tmp = d / f".tmp-{name}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, encode_record(runtime.encode() + b"\n" + body))
        os.fsync(fd)
    finally:
        os.close(fd)
    final = d / name
    os.rename(tmp, final)
    fsync_dir(d)
    return final


def spool_somewhere(spool: Path, runtime: str, body: bytes, sub: str = "") -> Path:
    """:func:`spool_write` into ``spool``, or, when that fails (the path is a file, not writable,
    ...), into :func:`fallback_spool_dir` (which ``hook flush`` forwards too); returns the file.

    Raises:
        OSError: when neither can be written.
    """
    try:
        return spool_write(spool, runtime, body, sub)
    except OSError as e:
        fallback = fallback_spool_dir()
        print(f"hivestream hook: cannot spool in {spool} ({e}); using {fallback} (hook flush forwards it too)", file=sys.stderr)
        return spool_write(fallback, runtime, body, sub)


def spool_read(path: Path) -> tuple[str, bytes] | None:
    """``(runtime, body)`` of a spooled file, or ``None`` when it is torn or corrupt."""
    dec = decode_records(path.read_bytes())
    if len(dec.records) != 1 or dec.skipped_bytes:
        return None
    runtime, _, body = dec.records[0].partition(b"\n")
    return runtime.decode("utf-8", "replace"), body


def pending(d: Path) -> list[Path]:
    """The pending payload files of directory ``d``, oldest first (regular files named like a
    spool file; temp, in-flight and other files and directories are ignored)."""
    try:
        with os.scandir(d) as it:
            names = [e.name for e in it if _NAME.match(e.name) and e.is_file(follow_symlinks=False)]
    except OSError:
        return []
    return [d / n for n in sorted(names)]


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def reclaim_stale(d: Path, now: float | None = None) -> None:
    """Put back ``d``'s in-flight files whose flush process is gone or that are older than
    :data:`STALE_INFLIGHT_S` (a claim touches its file, so the age counts from the claim)."""
    now = time.time() if now is None else now
    try:
        with os.scandir(d) as it:
            found = [(e.name, m) for e in it if (m := _INFLIGHT.match(e.name)) and e.is_file(follow_symlinks=False)]
    except OSError:
        return
    for name, m in found:
        p = d / name
        with contextlib.suppress(OSError):
            if not _alive(int(m.group(1))) or now - p.stat().st_mtime > STALE_INFLIGHT_S:
                os.rename(p, d / m.group(2))


class FlushResult:
    """What one flush did: payloads delivered (or dead-lettered whole), payloads that failed
    this time (kept under ``retry/``), set aside under ``rejected/``, and still spooled.

    A plain class, not a dataclass: :mod:`dataclasses` (with :mod:`inspect`) is the costliest import
    the hook would otherwise pay at every start.
    """

    __slots__ = ("failed", "forwarded", "left", "set_aside")

    def __init__(self, forwarded: int = 0, failed: int = 0, set_aside: int = 0, left: int = 0) -> None:
        self.forwarded, self.failed, self.set_aside, self.left = forwarded, failed, set_aside, left

    def _fields(self) -> tuple[int, int, int, int]:
        return self.forwarded, self.failed, self.set_aside, self.left

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FlushResult) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was

    def __repr__(self) -> str:
        return f"FlushResult(forwarded={self.forwarded}, failed={self.failed}, set_aside={self.set_aside}, left={self.left})"


def _move(src: Path, d: Path, sub: str, name: str) -> None:
    (d / sub).mkdir(exist_ok=True, mode=0o700)
    os.rename(src, d / sub / name)


def _dirs(spools: list[Path]) -> list[tuple[Path, Path]]:
    """``(directory to read, its spool root)``: each spool's pending files, then its ``retry/``."""
    out: list[tuple[Path, Path]] = []
    for s in dict.fromkeys(spools):
        out += [(s, s), (s / "retry", s)]
    return out


def flush(spools: list[Path], send: Send, max_items: int | None, deadline: float | None) -> FlushResult:
    """Forward the payloads of ``spools`` oldest first (each spool's pending files, then its
    ``retry/``), each once, until the server fails, ``max_items`` posts or ``deadline``.

    Each file is claimed by an atomic rename (so concurrent flushes never post one payload twice)
    and then handled by :func:`~hivestream.hooks.delivery.verdict_of`: deleted when delivered or
    dead-lettered whole, moved to ``rejected/`` when set aside, to ``retry/`` when it failed on
    its own (the flush goes on), put back when the server failed (the flush stops).
    """
    res = FlushResult()
    posts = 0
    stopped = False
    tried: set[str] = set()  # a payload that failed is not posted again in the same flush
    for d, root in _dirs(spools):
        if stopped:
            break
        if not d.is_dir():
            continue
        reclaim_stale(d)
        for p in pending(d):
            if p.name in tried:
                continue
            if (max_items is not None and posts >= max_items) or (deadline is not None and time.monotonic() >= deadline):
                stopped = True
                break
            claimed = d / f".inflight-{os.getpid()}-{p.name}"
            try:
                os.rename(p, claimed)
                os.utime(claimed)
            except OSError:
                continue  # another flush took it
            try:
                item = spool_read(claimed)
            except OSError:
                item = None
            if item is None:
                _move(claimed, root, "corrupt", p.name)
                continue
            posts += 1
            tried.add(p.name)
            status, answer = send(item[0], item[1])
            v = verdict_of(status, answer)
            if v in (Verdict.DELIVERED, Verdict.DEAD_LETTERED):
                claimed.unlink()
                res.forwarded += 1
            elif v is Verdict.SET_ASIDE:
                _move(claimed, root, "rejected", p.name)
                res.set_aside += 1
                print(f"hivestream hook: a spooled payload was refused whole (HTTP {status}); kept in {root / 'rejected'}", file=sys.stderr)
            elif v is Verdict.RETRY:
                _move(claimed, root, "retry", p.name)
                res.failed += 1
                print(f"hivestream hook: a spooled payload failed (HTTP {status}); kept in {root / 'retry'}", file=sys.stderr)
            else:
                os.rename(claimed, p)
                stopped = True
                break
    res.left = sum(len(pending(d)) for d, _root in _dirs(spools))
    return res
