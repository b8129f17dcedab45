"""Benchmark ``hivestream report`` on 200,000 generated hook events.

The events model a month of many gateways fronting backends: each turn's prompt and reply captured
by both the OpenClaw gateway (channel ``gw-<n>``) and the backend (Claude Code or Codex, 250 ms /
350 ms apart), some prompts re-sent later ("continue" and friends), some turns whose gateway
``message:sent`` hook was broken (one-sided), and tool calls of which a quarter are memory tools
(hive-mind recall/save, KnowHub, mem0), some failing or returning nothing. They are written by the
embedded runner (the anchor, measured in the same run), then the report is written from the file.

Usage: ``python bench/bench_report.py [--events 200000] [--runs 3]``; prints the runner's seconds (one
run) and the report's (median of ``--runs``) and their ratio. Target: the report in under 10 s.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hivestream.embedded.frames import EmbeddedRunner  # noqa: E402
from hivestream.report import write_report_files  # noqa: E402
from streams.model.deadletter import RejectedInput  # noqa: E402
from streams.model.events import PROMPT, STOP, HookEvent  # noqa: E402

T0 = 1_790_000_000_000  # 2026-09-21
DAY = 86_400_000
SHORT = ["continue", "go on", "yes", "ok, do it", "run the tests again", "thanks"]
MEMORY_TOOLS = [("mcp__hive-mind__recall_memory", {"query": "deploy steps"}), ("mcp__hive-mind__save_memory", {"content": "uses port 8443"}),
                ("kb_search", {"query": "consumer lag"}), ("mcp__openmemory__add_memories", {"text": "prefers tabs", "project": "p"})]


def generate(n: int, seed: int = 12) -> Iterator[tuple[int, bytes, HookEvent | RejectedInput]]:
    """``n`` hook events as importer items (offset, raw line, event), in event-time order per session."""
    rng = random.Random(seed)
    out = 0
    session = 0
    while out < n:
        session += 1
        backend = "claude-code" if session % 2 else "codex"
        sid, gw = f"sess-{session:06d}", f"openclaw-gateway:gw-{session % 40}"
        project = f"proj-{session % 12}"
        t = T0 + rng.randrange(30 * DAY)
        broken = rng.random() < 0.03
        for turn in range(rng.randint(3, 12)):
            if out >= n:
                break
            t += rng.randint(20_000, 900_000)
            prompt = rng.choice(SHORT) if rng.random() < 0.15 else f"prompt {session}/{turn}: {rng.getrandbits(48):x}"
            reply = f"reply {session}/{turn}: {rng.getrandbits(64):x}"
            evs = [HookEvent(event_id=f"g{out}", source="openclaw", event_type=PROMPT, native_event="message:received", session=gw,
                             event_time_ms=t - 250, body=prompt),
                   HookEvent(event_id=f"b{out}", source=backend, event_type=PROMPT, native_event="UserPromptSubmit", session=sid,
                             project=project, event_time_ms=t, body=prompt)]
            for k in range(rng.randint(0, 4)):
                name, args = rng.choice(MEMORY_TOOLS) if rng.random() < 0.25 else ("Bash", {"command": "ls"})
                roll = rng.random()
                response: object = [{"type": "text", "text": "[]" if roll < 0.2 else '[{"id": 1}]'}]
                raw = {"hook_event_name": "PostToolUse" if roll > 0.05 else "PostToolUseFailure", "session_id": sid,
                       "tool_name": name, "tool_input": args, "tool_response": response}
                evs.append(HookEvent(event_id=f"t{out}-{k}", source=backend, event_type="post-tool-use", native_event=raw["hook_event_name"],
                                     session=sid, event_time_ms=t + 1000 * (k + 1), raw=raw))
            evs.append(HookEvent(event_id=f"s{out}", source=backend, event_type=STOP, native_event="Stop", session=sid, project=project,
                                 event_time_ms=t + 8000, body=reply))
            if not broken:
                evs.append(HookEvent(event_id=f"m{out}", source="openclaw", event_type=STOP, native_event="message:sent", session=gw,
                                     event_time_ms=t + 8350, body=reply))
            for ev in evs:
                if out >= n:
                    break
                yield out, b"{}", ev
                out += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    report: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        t = time.perf_counter()
        runner = EmbeddedRunner(db)
        try:
            runner.run_items("generated", generate(args.events))
        finally:
            runner.close()
        ing = time.perf_counter() - t
        rep = runner.report
        for _ in range(args.runs):
            t = time.perf_counter()
            page = write_report_files(db, None, None, Path(tmp) / "report.html")
            report.append(time.perf_counter() - t)
        size = page.stat().st_size
    rpt = statistics.median(report)
    print(f"python {platform.python_version()}, {platform.machine()}, {args.events:,} events "
          f"({rep.captures:,} captures, {rep.frames_created:,} frames, {rep.duplicates:,} duplicates), {args.runs} runs")
    print(f"embedded runner (anchor): {ing:.2f} s ({args.events / ing:,.0f} events/s)")
    print(f"report written:           median {rpt:.2f} s, {size / 1e6:.1f} MB page (target < 10 s)")
    print(f"ratio report / runner: {rpt / ing:.3f}")


if __name__ == "__main__":
    main()
