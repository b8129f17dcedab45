"""A generated multi-day hook-event backlog: several gateways, channels and sessions, double capture.

Each turn of a conversation is captured twice, as in production: the OpenClaw gateway fires
``message:received`` / ``message:sent`` and the coding-agent backend behind it (Claude Code or
Codex) fires ``UserPromptSubmit`` / ``Stop`` 250–350 ms later / earlier. Some prompts are short
and re-sent across sessions and days ("continue", "yes, go ahead", …), some lines arrive late
(a gateway that flushes a spool minutes after an outage), and a few lines are bad input.

Lines are written in arrival order (event time plus up to 1 s of jitter, plus the late ones), as
a broker would hold them. The output is hook-event JSONL, the format ``hivestream run`` and
``hivestream produce`` import (native payloads with a ``timestamp`` / ``ts`` field). Deterministic
for a seed. Used by ``bench/`` and by the backlog tests.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DAY_MS = 86_400_000
START_MS = 1_790_000_000_000  # 2026-09-21 (UTC), a fixed epoch so runs are comparable
SHORT_PROMPTS = ("continue", "yes, go ahead", "ok", "thanks!", "run the tests again", "looks good, commit it")
_WORDS = (
    "kafka", "partition", "offset", "consumer", "group", "replay", "window", "watermark", "lateness", "frame", "memory", "agent",
    "gateway", "session", "channel", "dedup", "projection", "duckdb", "snapshot", "changelog", "table", "worker", "rebalance", "commit",
    "idempotent", "spool", "hook", "prompt", "reply", "capture", "source", "provenance", "body", "hash", "prefix", "telegram",
    "discord", "slack", "whatsapp", "deploy", "rollback", "migration", "schema", "index", "query", "latency", "throughput", "backlog",
    "retry", "timeout", "token", "budget",
)
_CHANNELS = ("telegram", "discord", "slack", "whatsapp")


@dataclass(frozen=True)
class BacklogSpec:
    """What to generate.

    Attributes:
        turns: conversation turns (each gives 4 capture events).
        days: event-time span of the backlog (days).
        span_ms: the span in ms instead, when not 0 (a dense backlog: each key group sees captures
            every few minutes, so lines that arrive minutes late are below their group's watermark).
        gateways: OpenClaw gateways (each serves some channels and sessions).
        sessions: conversation sessions (each bound to one gateway, channel and backend).
        short_share: share of prompts that are short re-sent ones (0..1).
        echo_share: share of replies that are one of those short texts too (an agent answering
            "ok": the same body as a prompt, one key under ``body``, two under ``body+event``).
        late_share: share of turns whose gateway lines arrive 2–10 min late (0..1).
        bad_every: one bad line (malformed JSON, no timestamp, empty body) every this many turns (0: none).
        body_chars: typical length of a prompt or reply (characters).
        seed: random seed.
    """

    turns: int = 50_000
    days: int = 12
    span_ms: int = 0
    gateways: int = 4
    sessions: int = 1_200
    short_share: float = 0.04
    echo_share: float = 0.0
    late_share: float = 0.01
    bad_every: int = 2_000
    body_chars: int = 300
    seed: int = 7


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    n = 0
    while n < chars:
        w = rng.choice(_WORDS)
        words.append(w)
        n += len(w) + 1
    return " ".join(words).capitalize() + f" ({rng.getrandbits(40):x})."


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def generate(spec: BacklogSpec) -> Iterator[tuple[int, bytes]]:
    """Yield ``(arrival_ms, line)`` pairs, one per line, in arrival order.

    Streamed: every line of turn ``k`` arrives at or after ``START_MS + k * step``, so the lines
    that arrived before that are final and leave the heap before turn ``k`` is generated (memory is
    the ~11 minutes of lines still in flight, not the backlog: 20,000,000 lines fit on a laptop).

    Returns:
        An iterator over 4 × ``spec.turns`` capture lines plus the bad lines.
    """
    rng = random.Random(spec.seed)
    sessions = []
    for i in range(spec.sessions):
        gw = f"gw-{i % spec.gateways + 1}"
        ch = _CHANNELS[(i // spec.gateways) % len(_CHANNELS)]
        backend = "claude-code" if rng.random() < 0.6 else "codex"
        sessions.append((gw, ch, f"{ch}:{gw}:chat-{i}", backend, f"{backend}-sess-{i:05d}"))
    span = spec.span_ms or spec.days * DAY_MS
    step = span / max(spec.turns, 1)
    out: list[tuple[int, int, bytes]] = []  # a heap by (arrival, seq)
    seq = 0

    def emit(arrival: int, line: bytes) -> None:
        nonlocal seq
        heapq.heappush(out, (arrival, seq, line))
        seq += 1

    for k in range(spec.turns):
        final = START_MS + int(k * step)
        while out and out[0][0] < final:
            arrival, _seq, line = heapq.heappop(out)
            yield arrival, line
        t = START_MS + int(k * step) + rng.randrange(0, max(int(step), 1))
        gw, ch, chat, backend, bsess = rng.choice(sessions)
        prompt = rng.choice(SHORT_PROMPTS) if rng.random() < spec.short_share else _text(rng, spec.body_chars)
        reply = rng.choice(SHORT_PROMPTS) if spec.echo_share and rng.random() < spec.echo_share else _text(rng, spec.body_chars)
        t_prompt_backend = t + rng.randint(250, 350)
        t_stop = t_prompt_backend + rng.randint(2_000, 60_000)
        t_sent = t_stop + rng.randint(250, 350)
        late = rng.random() < spec.late_share
        delay = rng.randint(120_000, 600_000) if late else 0
        mid = f"{gw}-{k}"
        gw_recv = {"type": "message", "action": "received", "sessionKey": f"agent:main:{chat}", "timestamp": _iso(t),
                   "context": {"from": chat, "content": prompt, "channelId": chat, "messageId": f"{mid}-in", "gatewayId": gw}}
        gw_sent = {"type": "message", "action": "sent", "sessionKey": f"agent:main:{chat}", "timestamp": _iso(t_sent),
                   "context": {"to": chat, "content": reply, "success": True, "channelId": chat, "messageId": f"{mid}-out", "gatewayId": gw}}
        base = {"session_id": bsess, "cwd": f"/workspace/{ch}-bot", "permission_mode": "default"}
        if backend == "codex":
            base = {**base, "turn_id": f"turn-{k}", "model": "gpt-5-codex", "transcript_path": None}
        prompt_ev = {**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt, "ts": _iso(t_prompt_backend)}
        stop_ev = {**base, "hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": reply, "ts": _iso(t_stop)}
        jitter = lambda: rng.randint(0, 1_000)  # noqa: E731 - network jitter of the arrival
        emit(t + jitter() + delay, json.dumps(gw_recv).encode())
        emit(t_prompt_backend + jitter(), json.dumps(prompt_ev).encode())
        emit(t_stop + jitter(), json.dumps(stop_ev).encode())
        emit(t_sent + jitter() + delay, json.dumps(gw_sent).encode())
        if spec.bad_every and k % spec.bad_every == spec.bad_every - 1:
            bad = (b'{"type": "message", "action": "sent", "context": {"content": "cut off',
                   json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": bsess, "prompt": "no time"}).encode(),
                   json.dumps({**gw_sent, "context": {**gw_sent["context"], "content": "   "}}).encode())[k // spec.bad_every % 3]
            emit(t_sent + 1, bad)
    while out:
        arrival, _seq, line = heapq.heappop(out)
        yield arrival, line


def write_backlog(path: Path, spec: BacklogSpec) -> int:
    """Write the backlog of ``spec`` to ``path`` as JSONL; returns the number of lines."""
    n = 0
    with path.open("wb") as f:
        for _arrival, line in generate(spec):
            f.write(line + b"\n")
            n += 1
    return n


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Write a generated hook-event backlog (4 capture events per turn, a few bad lines).")
    ap.add_argument("out", nargs="?", default="backlog.jsonl", help="the JSONL file to write (default backlog.jsonl)")
    ap.add_argument("turns", nargs="?", type=int, default=50_000, help="turns (default 50,000 = 200,000 events)")
    a = ap.parse_args()
    p = Path(a.out)
    print(write_backlog(p, BacklogSpec(turns=a.turns)), "lines written to", p)
