"""``hivestream hook RUNTIME`` and ``hivestream hook flush``: the command hook of agent runtimes.

Claude Code (command hooks), Codex (``hooks.json``) and Codex's legacy ``notify`` run it once per
hook firing: the payload comes on stdin, or as the last argument (``codex-notify``). It posts the
payload to ``$HIVESTREAM_INGEST_URL/v1/hooks/RUNTIME`` (``--url``; bearer token from
``HIVESTREAM_INGEST_TOKEN``) with a short timeout (``--timeout``, default 2 s). A payload without a
time field is stamped with ``event_time_ms`` first, so a later retry is the same event (same event
id); a Claude Code ``Stop`` without ``last_assistant_message`` gets it from its transcript
(:mod:`streams.importers.transcript_tail`). The answer is judged by :mod:`hivestream.hooks.delivery`: the payload is dropped only after a
2xx or the server's JSON verdict that it was dead-lettered whole; otherwise it is written to the
local spool (:mod:`hivestream.hooks.hook_spool`; ``--spool-dir`` / ``HIVESTREAM_SPOOL_DIR``,
default ``~/.hivestream/hook-spool``) with one stderr line. The next successful call forwards up to
``--flush-max`` (default 20) spooled payloads within the same time budget, and ``hivestream hook
flush`` drains them all (the fallback spool too).

Always exits 0. stdout stays empty (a runtime reads a hook's stdout as a decision) except for one
case: when the server's 2xx verdict on a Claude Code or Codex payload carries
``"additional_context"`` (the archived sections a prompt's memory stubs matched:
:mod:`hivestream.services.stubs`), the hook prints it as the runtime's hook output
(``hookSpecificOutput.additionalContext``, :func:`streams.ingest.hook_output.hook_output`), which
both runtimes add to the model's context. Problems go to stderr in one line. Imports only the standard library and the spool record format,
so it starts fast (see ``bench/bench_ingest.py``).
"""

from __future__ import annotations

import _socket  # the C module: `socket` itself costs milliseconds more at every start (enum tables, selectors)
import json
import os
import sys
import time
import urllib.parse
from pathlib import Path

from hivestream.hooks.delivery import Verdict, verdict_of
from hivestream.hooks.hook_spool import fallback_spool_dir, flush, spool_read, spool_somewhere, spool_write
from streams.importers.transcript_tail import with_transcript_reply
from streams.ingest.hook_output import CONTEXT_EVENTS, hook_output

__all__ = ["main", "post", "spool_read", "spool_write", "stamp"]

RUNTIMES = ("claude-code", "codex", "codex-notify", "openclaw", "openclaw-plugin", "knowhub", "prefixed", "auto")
CONTEXT_RUNTIMES = frozenset({"claude-code", "codex"})
"""The runtimes whose command hook prints a verdict's ``additional_context`` as hook output."""
DEFAULT_URL = "http://127.0.0.1:8787"
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


MAX_ANSWER_BYTES = 1 << 20


def _parse_answer(raw: bytes) -> tuple[int, bytes]:
    """``(status, body)`` of a raw HTTP/1.1 answer (``(0, b"")`` when it has no status line)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split()
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        return 0, b""
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        if k.strip().lower() == b"content-length" and v.strip().isdigit():
            body = body[: int(v.strip())]
    return int(parts[1]), body


def post(url: str, runtime: str, body: bytes, token: str | None, timeout_s: float) -> tuple[int, bytes]:
    """POST ``body`` to ``url/v1/hooks/runtime``; ``(status, answer body)``, ``(0, b"")`` when no
    answer came (the body is read up to 1 MiB within the same timeout; cut short, it proves nothing).

    Plain ``http`` URLs use a minimal HTTP/1.1 exchange on a socket (``http.client`` alone costs
    tens of milliseconds to import); ``https`` uses :mod:`http.client`. Never raises for network
    errors.
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
                return resp.status, resp.read(MAX_ANSWER_BYTES)
            finally:
                conn.close()
        deadline = time.monotonic() + timeout_s
        s = _connect(host, u.port or 80, timeout_s)
        try:
            head = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
            s.sendall(head.encode("latin-1") + body)
            buf = b""
            while len(buf) < MAX_ANSWER_BYTES:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    chunk = s.recv(65536)
                except TimeoutError:
                    break  # what came so far: a status without its whole body proves nothing
                if not chunk:
                    break
                buf += chunk
                status, answer = _parse_answer(buf)
                if status and b"\r\n\r\n" in buf and _complete(buf):
                    return status, answer
            return _parse_answer(buf)
        finally:
            s.close()
    except (OSError, ValueError):
        return 0, b""
    except Exception as e:  # http.client.HTTPException for https
        print(f"hivestream hook: {type(e).__name__}: {e}", file=sys.stderr)
        return 0, b""


def _print_context(payload: bytes, answer: bytes) -> None:
    """Print the runtime's hook output with the verdict's ``additional_context`` (a string), if there is one."""
    try:
        ctx = json.loads(answer).get("additional_context")
        event = json.loads(payload).get("hook_event_name") if isinstance(ctx, str) and ctx else None
    except (ValueError, AttributeError, RecursionError):
        return
    if isinstance(ctx, str) and ctx and event in CONTEXT_EVENTS:
        sys.stdout.write(json.dumps(hook_output(event, ctx), ensure_ascii=False) + "\n")
        sys.stdout.flush()


def _connect(host: str, port: int, timeout_s: float) -> _socket.socket:
    """A TCP connection to ``host:port`` as :func:`socket.create_connection` makes it (every address
    of the name in turn, the last error raised), on the C socket module. An ASCII host name is
    resolved as bytes, so the ``idna`` codec is not imported for it.

    Raises:
        OSError: when no address accepts the connection (``TimeoutError`` past ``timeout_s``).
    """
    name: str | bytes = host.encode("ascii") if host.isascii() else host
    err: OSError | None = None
    for family, kind, proto, _canon, addr in _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM):
        s = _socket.socket(family, kind, proto)
        try:
            s.settimeout(timeout_s)
            s.connect(addr)
            return s
        except OSError as e:
            err = e
            s.close()
    raise err if err is not None else OSError(f"getaddrinfo returned no address for {host!r}")


def _complete(raw: bytes) -> bool:
    """True when ``raw`` holds a whole answer according to its ``Content-Length``."""
    head, _, body = raw.partition(b"\r\n\r\n")
    for ln in head.split(b"\r\n")[1:]:
        k, _, v = ln.partition(b":")
        if k.strip().lower() == b"content-length" and v.strip().isdigit():
            return len(body) >= int(v.strip())
    return False


def _options(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    opts: dict[str, str] = {}
    rest: list[str] = []
    it = iter(argv)
    for a in it:
        if a == "--detach":
            opts["detach"] = "1"
        elif a == "--hivestream-managed":  # the marker ``hooks install`` writes (hivestream.hooks.config.MARK_ARG)
            continue
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


def _number(text: str | None, kind: type[float] | type[int], default: float, low: float, high: float) -> float:
    """``text`` as a ``kind`` in [``low``, ``high``], else ``default`` (a hook never fails on its options:
    ``--timeout inf`` or ``0`` would make every post fail, and ``nan`` compares with nothing)."""
    try:
        value = kind(text) if text else default
    except (ValueError, OverflowError):
        return default
    return value if low <= value <= high else default  # NaN fails both comparisons


def main(argv: list[str]) -> int:
    """Run ``hivestream hook`` with ``argv`` (the words after ``hook``); returns the exit code.

    ``session-start``: print the KnowHub start-of-task reminder as ``SessionStart`` hook output
    (:mod:`hivestream.hooks.knowhub_reminder`); always 0.
    ``RUNTIME [--url U] [--spool-dir D] [--timeout S] [--flush-max N] [--chain JSON] [--detach] [PAYLOAD]``:
    always 0 (``--detach``: the post and any spooling go on in a detached child after the payload
    was read). A ``--timeout`` outside 0.05..600 s or not a number is the default 2 s, a
    ``--flush-max`` outside 0..10000 the default 20. ``flush [--url U] [--spool-dir D] [--timeout S]``: 0 when the spool is empty
    afterwards, 1 otherwise (a summary on stderr).
    """
    opts, rest = _options(argv)
    url = opts.get("url") or os.environ.get("HIVESTREAM_INGEST_URL") or DEFAULT_URL
    token = os.environ.get("HIVESTREAM_INGEST_TOKEN") or None
    spool = Path(opts["spool-dir"]) if opts.get("spool-dir") else default_spool_dir()
    timeout_s = _number(opts.get("timeout"), float, 2.0, 0.05, 600.0)
    flush_max = int(_number(opts.get("flush-max"), int, 20, 0, 10_000))
    if not rest or rest[0] in {"-h", "--help"}:
        print("usage: hivestream hook RUNTIME|flush [--url U] [--spool-dir D] [--timeout S] [PAYLOAD]", file=sys.stderr)
        return 0
    runtime = rest[0]
    if runtime == "session-start":  # the KnowHub reminder (``--knowhub``): prints hook output, posts nothing
        from hivestream.hooks.knowhub_reminder import main as reminder

        return reminder()

    def send(rt: str, payload: bytes) -> tuple[int, bytes]:
        return post(url, rt, payload, token, timeout_s)

    if runtime == "flush":
        fallback = fallback_spool_dir()
        try:
            res = flush([spool, fallback], send, None, None)
        except OSError as e:  # e.g. retry/ is a file: one line, the payloads stay where they are
            print(f"hivestream hook flush: {e}", file=sys.stderr)
            return 1
        also = f" (and {fallback})" if fallback.is_dir() and fallback != spool else ""
        failed = f"; {res.failed} failed this time, kept in retry/" if res.failed else ""
        print(f"hivestream hook flush: forwarded {res.forwarded}, {res.left} left in {spool}{also}{failed}", file=sys.stderr)
        return 0 if res.left == 0 else 1
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
        if runtime == "claude-code":  # a Stop without its reply: read from the transcript here, the only place that can
            body = with_transcript_reply(body)
        status, answer = post(url, runtime, body, token, timeout_s)
        v = verdict_of(status, answer)
        if v is Verdict.DELIVERED:
            if runtime in CONTEXT_RUNTIMES and role == "none":
                _print_context(body, answer)
            flush([spool], send, flush_max, start + timeout_s)
        elif v is Verdict.DEAD_LETTERED:
            print(f"hivestream hook: the server refused the payload (HTTP {status}) and dead-lettered it", file=sys.stderr)
        elif v is Verdict.SET_ASIDE:
            kept = spool_somewhere(spool, runtime, body, "rejected")
            print(f"hivestream hook: payload of {len(body)} bytes refused whole by the server (HTTP {status}); kept in {kept}", file=sys.stderr)
        else:
            kept = spool_somewhere(spool, runtime, body)
            print(f"hivestream hook: not delivered (HTTP {status or 'no answer'}); payload spooled in {kept}", file=sys.stderr)
    except Exception as e:  # the hook must never fail the agent's turn
        print(f"hivestream hook: {type(e).__name__}: {e}", file=sys.stderr)
    if role == "child":  # the detached child ends here, without the parent's interpreter cleanup
        sys.stderr.flush()
        os._exit(0)
    return 0
