"""``hivestream hook RUNTIME`` and ``hivestream hook flush``: the command hook of agent runtimes.

Claude Code (command hooks), Codex (``hooks.json``) and Codex's legacy ``notify`` run it once per
hook firing: the payload comes on stdin, or as the last argument (``codex-notify``). It posts the
payload to ``$HIVESTREAM_INGEST_URL/v1/hooks/RUNTIME`` (``--url``; bearer token from
``HIVESTREAM_INGEST_TOKEN``) with a short timeout (``--timeout``, default 2 s). A payload without a
time field is stamped with ``event_time_ms`` first, so a later retry is the same event (same event
id). When the post fails (no server, timeout, 401, 408, 429, 5xx) the payload is written to the
local spool (``--spool-dir`` / ``HIVESTREAM_SPOOL_DIR``, default ``~/.hivestream/hook-spool``), one
fsync'd checksummed file per payload, renamed into place atomically; the next successful call
forwards up to ``--flush-max`` (default 20) spooled payloads within the same time budget, and
``hivestream hook flush`` drains them all. A payload the server rejects for good (400, 404, 422:
the server dead-lettered it) is not kept; a 413 is kept under ``rejected/`` for inspection.

Always exits 0 and writes nothing to stdout (a runtime may read a hook's stdout as a decision);
problems go to stderr in one line. Imports only the standard library and the spool record format,
so it starts fast (see ``bench/bench_ingest.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
import urllib.parse
from pathlib import Path

from hivestream.ingest.spool import fsync_dir
from streams.ingest.spool_format import decode_records, encode_record

RUNTIMES = ("claude-code", "codex", "codex-notify", "openclaw", "openclaw-plugin", "knowhub", "prefixed", "auto")
DEFAULT_URL = "http://127.0.0.1:8787"
FINAL = {400, 404, 422}  # the server answered for good and dead-lettered what it rejected
STALE_INFLIGHT_S = 300
MAX_STDIN_BYTES = 16 << 20
_TIME_FIELDS = ("event_time_ms", "timestamp", "ts", "time", "event_time", "received_at")


def default_spool_dir() -> Path:
    """``HIVESTREAM_SPOOL_DIR``, else ``~/.hivestream/hook-spool``."""
    env = os.environ.get("HIVESTREAM_SPOOL_DIR")
    return Path(env) if env else Path.home() / ".hivestream" / "hook-spool"


def stamp(body: bytes, now_ms: int) -> bytes:
    """``body`` with ``"event_time_ms": now_ms`` added when it is a JSON object without a time
    field (so a retried post is the same event); any other body unchanged."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return body
    if not isinstance(obj, dict) or any(obj.get(f) is not None for f in _TIME_FIELDS):
        return body
    obj["event_time_ms"] = now_ms
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def post(url: str, runtime: str, body: bytes, token: str | None, timeout_s: float) -> int:
    """POST ``body`` to ``url/v1/hooks/runtime``; the HTTP status, or 0 when no answer came.

    Plain ``http`` URLs use a minimal HTTP/1.1 exchange on a socket (``http.client`` alone costs
    tens of milliseconds to import); ``https`` uses :mod:`http.client`. Never raises for network
    errors (0 is returned).
    """
    u = urllib.parse.urlsplit(url)
    path = (u.path.rstrip("/") or "") + f"/v1/hooks/{runtime}"
    host = u.hostname or "127.0.0.1"
    headers = {"Host": u.netloc or host, "Content-Type": "application/json", "Content-Length": str(len(body)), "Connection": "close"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        if u.scheme == "https":
            import http.client

            conn = http.client.HTTPSConnection(host, u.port, timeout=timeout_s)
            try:
                conn.request("POST", path, body=body, headers=headers)
                resp = conn.getresponse()
                resp.read()
                return resp.status
            finally:
                conn.close()
        deadline = time.monotonic() + timeout_s
        with socket.create_connection((host, u.port or 80), timeout=timeout_s) as s:
            head = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
            s.sendall(head.encode("latin-1") + body)
            buf = b""
            while b"\r\n" not in buf:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = s.recv(4096)
                if not chunk:
                    return 0
                buf += chunk
            parts = buf.split(b"\r\n", 1)[0].split()
            return int(parts[1]) if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit() else 0
    except (OSError, ValueError):
        return 0
    except Exception as e:  # http.client.HTTPException for https
        print(f"hivestream hook: {type(e).__name__}: {e}", file=sys.stderr)
        return 0




def spool_write(spool: Path, runtime: str, body: bytes, sub: str = "") -> Path:
    """Write one payload durably as ``<spool>[/sub]/<ns>-<pid>.hook`` (tmp file, fsync, rename).

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


def _spool_somewhere(spool: Path, runtime: str, body: bytes, sub: str = "") -> Path:
    """:func:`spool_write` into ``spool``, or, when that fails (the path is a file, not writable, ...),
    into a per-user fallback spool under the temp directory; returns the file written.

    Raises:
        OSError: when neither can be written.
    """
    try:
        return spool_write(spool, runtime, body, sub)
    except OSError as e:
        import tempfile  # only on this rare path: the hook starts with the standard library's cheapest modules

        fallback = Path(tempfile.gettempdir()) / f"hivestream-hook-spool-{os.getuid()}"
        print(f"hivestream hook: cannot spool in {spool} ({e}); using {fallback} (flush it with --spool-dir)", file=sys.stderr)
        return spool_write(fallback, runtime, body, sub)


def spool_read(path: Path) -> tuple[str, bytes] | None:
    """``(runtime, body)`` of a spooled file, or ``None`` when it is torn or corrupt."""
    dec = decode_records(path.read_bytes())
    if len(dec.records) != 1 or dec.skipped_bytes:
        return None
    runtime, _, body = dec.records[0].partition(b"\n")
    return runtime.decode("utf-8", "replace"), body


def _reclaim_stale(spool: Path) -> None:
    now = time.time()
    for p in spool.glob(".inflight-*"):
        with contextlib.suppress(OSError):
            if now - p.stat().st_mtime > STALE_INFLIGHT_S:
                os.rename(p, spool / p.name.split("-", 2)[2])


def flush(spool: Path, url: str, token: str | None, timeout_s: float, max_items: int | None, deadline: float | None) -> tuple[int, int]:
    """Forward spooled payloads oldest first until one fails, ``max_items`` or ``deadline``.

    Each file is claimed by renaming it (so concurrent flushes never post one payload twice),
    deleted once the server answered 2xx (or rejected it for good), put back otherwise.

    Returns:
        ``(forwarded, left)``: payloads forwarded now and payloads still spooled.
    """
    if not spool.is_dir():
        return 0, 0
    _reclaim_stale(spool)
    done = 0
    for p in sorted(spool.glob("*.hook")):
        if (max_items is not None and done >= max_items) or (deadline is not None and time.monotonic() >= deadline):
            break
        claimed = spool / f".inflight-{os.getpid()}-{p.name}"
        try:
            os.rename(p, claimed)
        except OSError:
            continue  # another flush took it
        item = spool_read(claimed)
        if item is None:
            (spool / "corrupt").mkdir(exist_ok=True, mode=0o700)
            os.rename(claimed, spool / "corrupt" / p.name)
            continue
        status = post(url, item[0], item[1], token, timeout_s)
        if 200 <= status < 300 or status in FINAL:
            claimed.unlink()
            done += 1
        elif status == 413:
            (spool / "rejected").mkdir(exist_ok=True, mode=0o700)
            os.rename(claimed, spool / "rejected" / p.name)
        else:
            os.rename(claimed, p)
            break
    return done, sum(1 for _ in spool.glob("*.hook"))


def _options(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    opts: dict[str, str] = {}
    rest: list[str] = []
    it = iter(argv)
    for a in it:
        if a == "--detach":
            opts["detach"] = "1"
        elif a.startswith("--") and a[2:].split("=", 1)[0] in {"url", "spool-dir", "timeout", "flush-max", "chain"}:
            k, eq, v = a[2:].partition("=")
            opts[k] = v if eq else next(it, "")
        else:
            rest.append(a)
    return opts, rest


def _chain(spec: str, payload: bytes) -> None:
    """Start the user's earlier notify program (a JSON argv list) with the payload as last argument."""
    import subprocess

    try:
        argv = json.loads(spec)
        if isinstance(argv, list) and argv and all(isinstance(x, str) for x in argv):
            subprocess.Popen([*argv, payload.decode("utf-8", "replace")], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             start_new_session=True)
    except (ValueError, OSError) as e:
        print(f"hivestream hook: chained notify program failed: {e}", file=sys.stderr)


def _detach() -> str:
    """Fork a child in its own session that carries on (the payload is already read). Returns
    ``"parent"`` (return at once), ``"child"`` or ``"none"`` (no fork on this platform). A runtime
    that ends its process group when it exits (Claude Code ``-p`` with ``"async": true`` hooks)
    then cannot kill the post half-way."""
    if not hasattr(os, "fork"):
        return "none"
    if os.fork() > 0:
        return "parent"
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    return "child"


def main(argv: list[str]) -> int:
    """Run ``hivestream hook`` with ``argv`` (the words after ``hook``); returns the exit code.

    ``RUNTIME [--url U] [--spool-dir D] [--timeout S] [--flush-max N] [--chain JSON] [--detach] [PAYLOAD]``:
    always 0 (``--detach``: the post and any spooling go on in a detached child after the payload
    was read). ``flush [--url U] [--spool-dir D] [--timeout S]``: 0 when the spool is empty
    afterwards, 1 otherwise (a summary on stderr).
    """
    opts, rest = _options(argv)
    url = opts.get("url") or os.environ.get("HIVESTREAM_INGEST_URL") or DEFAULT_URL
    token = os.environ.get("HIVESTREAM_INGEST_TOKEN") or None
    spool = Path(opts["spool-dir"]) if opts.get("spool-dir") else default_spool_dir()
    try:
        timeout_s = float(opts.get("timeout") or 2.0)
        flush_max = int(opts.get("flush-max") or 20)
    except ValueError:
        timeout_s, flush_max = 2.0, 20
    if not rest or rest[0] in {"-h", "--help"}:
        print("usage: hivestream hook RUNTIME|flush [--url U] [--spool-dir D] [--timeout S] [PAYLOAD]", file=sys.stderr)
        return 0
    runtime = rest[0]
    if runtime == "flush":
        done, left = flush(spool, url, token, timeout_s, None, None)
        print(f"hivestream hook flush: forwarded {done}, {left} left in {spool}", file=sys.stderr)
        return 0 if left == 0 else 1
    if runtime not in RUNTIMES:
        print(f"hivestream hook: unknown runtime {runtime!r} (one of {', '.join(RUNTIMES)})", file=sys.stderr)
        return 0
    start = time.monotonic()
    role = "none"
    try:
        body = rest[-1].encode("utf-8", "surrogateescape") if len(rest) > 1 else sys.stdin.buffer.read(MAX_STDIN_BYTES) if not sys.stdin.isatty() else b""
        if opts.get("chain"):
            _chain(opts["chain"], body)
        if not body.strip():
            return 0
        body = stamp(body, time.time_ns() // 1_000_000)
        role = _detach() if opts.get("detach") else "none"
        if role == "parent":
            return 0
        status = post(url, runtime, body, token, timeout_s)
        if 200 <= status < 300:
            flush(spool, url, token, timeout_s, flush_max, start + timeout_s)
        elif status == 413:
            kept = _spool_somewhere(spool, runtime, body, "rejected")
            print(f"hivestream hook: payload of {len(body)} bytes is over the server's limit (HTTP 413); kept in {kept}", file=sys.stderr)
        elif status not in FINAL:
            kept = _spool_somewhere(spool, runtime, body)
            print(f"hivestream hook: ingest unavailable (HTTP {status or 'no answer'}); payload spooled in {kept}", file=sys.stderr)
    except Exception as e:  # the hook must never fail the agent's turn
        print(f"hivestream hook: {type(e).__name__}: {e}", file=sys.stderr)
    if role == "child":  # the detached child ends here, without the parent's interpreter cleanup
        sys.stderr.flush()
        os._exit(0)
    return 0
