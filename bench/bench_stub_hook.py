"""Benchmark: the answer time of a prompt's stub context (embed with the local MiniLM, match, read archives, build the block).

For 100, 1,000 and 10,000 stubs of one channel (384-dim all-MiniLM-L6-v2 vectors: the ten sample
stubs of ``hivestream/samples/stubs/texts.json`` embedded for real, the rest random unit vectors, so
real prompts match a real stub and the matcher scans every row) and prompts of 10 and 250 words,
times ``StubService.inject_within`` (what serve's hook route awaits) per prompt and prints p50 and
p99 in milliseconds, beside the anchor of the same run: the same call on a service with no stubs
(the answer every prompt got before, nothing embedded). ``--runs`` rounds interleave the
configurations; each prompt is one call, one at a time (no overlap), after ``--warmup`` calls.

The embedder is the default of :func:`~streams.stubs.embedder_choice.make_embedder` (128 word
pieces, numpy's BLAS limited to one thread while it embeds); ``--numpy-threads`` leaves BLAS as
numpy starts it (two threads here), which a busy machine makes several times slower.

``--through-serve`` times the whole hook instead: a ``hivestream serve`` per stub count (the stubs
put into its file beforehand, restored by its stub projection at start; the local MiniLM, loaded by
serve), each prompt posted as Claude Code's own ``http`` hook posts it (``UserPromptSubmit`` with the
``X-Hivestream-Hook`` header, on one kept-alive connection) and timed to its answer, which is made
durable (fsync) before it is sent; the anchor is a serve whose file holds no stub (the hook as it was
before: nothing embedded).

``--ingest-load N`` (with ``--through-serve``): N more clients post distinct ``Stop`` captures to the
same serve as fast as it answers while the prompts are timed (the hook under ingest load; the anchor
under the same load).

Usage: ``python bench/bench_stub_hook.py [--prompts 200] [--warmup 10] [--runs 3] [--through-serve [--ingest-load 8]]`` (needs ``make install-minilm``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from hivestream.services.stubs import Prompt, StubService
from streams.stubs.embedder import DIM, MODEL_NAME, MiniLMEmbedder
from streams.stubs.embedder_choice import EmbedderSettings
from streams.stubs.events import StubUpserted, encode_embedding
from streams.stubs.live import LiveStubs

TEXTS = Path(__file__).resolve().parent.parent / "hivestream" / "samples" / "stubs" / "texts.json"
FILLER = " ".join(["we also talked about the plan for next week and what the team should look at first before the review on thursday",
                   "and whether the notes from the last meeting are still right about the order of the tasks"]).split(" ")


def prompts(messages: list[str], words: int, n: int) -> list[str]:
    """``n`` prompts of about ``words`` words: a sample message, padded with filler words to length (cut when longer)."""
    out = []
    for i in range(n):
        base = messages[i % len(messages)].split()
        pad = [FILLER[(i + j) % len(FILLER)] for j in range(max(0, words - len(base)))]
        out.append(" ".join((base + pad)[:words]))
    return out


def service(emb: MiniLMEmbedder, stub_vecs: np.ndarray, archives: list[Path], n: int, rng: np.random.Generator) -> StubService:
    """A service holding ``n`` stubs of channel ``bench``: the real sample stubs first, random unit vectors after."""
    live = LiveStubs()
    for i in range(n):
        if i < len(stub_vecs):
            v = stub_vecs[i]
        else:
            v = rng.standard_normal(DIM).astype(np.float32)
            v /= np.linalg.norm(v)
        live.apply(StubUpserted(event_id=f"b{i}", event_time_ms=0, stub_id=i + 1, channel="bench", archive_path=str(archives[i % len(archives)]),
                                archive_tokens=300, embedding_b64=encode_embedding(v), model=MODEL_NAME, dim=DIM))
    return StubService(live, emb, budget_s=30.0, workers=1)


def timed(svc: StubService, texts: list[str], warmup: int) -> tuple[list[float], int]:
    """Milliseconds per call and how many answers carried context."""
    for t in texts[:warmup]:
        svc.inject_within(Prompt(t, "bench", "claude-code", "w", 0))
    out, hits = [], 0
    for i, t in enumerate(texts):
        t0 = time.perf_counter()
        got = svc.inject_within(Prompt(t, "bench", "claude-code", f"m{i}", i))
        out.append((time.perf_counter() - t0) * 1000)
        hits += got.context is not None
    return out, hits


def load(port: int, clients: int, stop: threading.Event, posted: list[int]) -> list[threading.Thread]:
    """``clients`` threads posting distinct Claude Code ``Stop`` captures to serve as fast as it answers, until ``stop``."""
    import http.client

    def one(c: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        i = 0
        while not stop.is_set():
            body = json.dumps({"hook_event_name": "Stop", "session_id": f"load-{c}", "cwd": "/w/load", "stop_hook_active": False,
                               "last_assistant_message": f"load reply {c}-{i}: the window is read from settings.py"}).encode()
            conn.request("POST", "/v1/hooks/claude-code", body, {"Content-Type": "application/json"})
            conn.getresponse().read()
            posted[c] += 1
            i += 1
        conn.close()

    threads = [threading.Thread(target=one, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    return threads


def serve_cell(tmp: Path, n: int, stub_vecs: np.ndarray, archives: list[Path], texts: list[str], warmup: int, rng: np.random.Generator,
               ingest_clients: int = 0) -> tuple[list[float], int]:
    """Milliseconds per hook post to a serve whose file holds ``n`` stubs, and how many answers carried context
    (with ``ingest_clients`` other clients posting captures to the same serve meanwhile: :func:`load`)."""
    import http.client

    from hivestream.embedded.stubs import run_stub_logs
    from streams.stubs.log import entries
    sys.path.insert(0, str(TEXTS.parents[3]))  # the repository: its test harness starts serve
    from tests.support.serve_harness import ServeProc

    db = tmp / f"serve-{n}-{len(texts[0].split())}.duckdb"
    events = []
    for i in range(n):
        v = stub_vecs[i] if i < len(stub_vecs) else rng.standard_normal(DIM).astype(np.float32)
        events.append(StubUpserted(event_id=f"b{i}", event_time_ms=0, stub_id=i + 1, channel="bench", archive_path=str(archives[i % len(archives)]),
                                   archive_tokens=300, embedding_b64=encode_embedding(v / np.linalg.norm(v)), model=MODEL_NAME, dim=DIM))
    run_stub_logs([entries(events)], db, bind_settings=False)
    proc = ServeProc(db, "--no-report", "--snapshot-every", "0", "--stub-refresh-at", "off")
    if n:  # the local model loads in the background once a stub exists: wait until answers carry context
        warm = http.client.HTTPConnection("127.0.0.1", proc.port, timeout=30)
        deadline = time.monotonic() + 120
        for t in itertools.cycle(texts):
            body = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": t, "cwd": "/w/bench", "session_id": "w"}).encode()
            warm.request("POST", "/v1/hooks/claude-code", body, {"Content-Type": "application/json", "X-Hivestream-Hook": "1"})
            if b"additionalContext" in warm.getresponse().read() or time.monotonic() > deadline:
                break
        warm.close()
    stop = threading.Event()
    posted = [0] * ingest_clients
    loaders = load(proc.port, ingest_clients, stop, posted)
    t_start = time.perf_counter()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", proc.port, timeout=30)
        out, hits = [], 0
        for i, t in enumerate([*texts[:warmup], *texts]):
            body = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": t, "cwd": "/w/bench", "session_id": "s",
                               "transcript_path": "/tmp/t.jsonl"}).encode()
            t0 = time.perf_counter()
            conn.request("POST", "/v1/hooks/claude-code", body, {"Content-Type": "application/json", "X-Hivestream-Hook": "1"})
            answer = conn.getresponse().read()
            if i >= warmup:
                out.append((time.perf_counter() - t0) * 1000)
                hits += b"additionalContext" in answer
        conn.close()
    finally:
        stop.set()
        for t in loaders:
            t.join(60)
        proc.stop()
    if ingest_clients:
        print(f"    (beside {sum(posted):,} captures from {ingest_clients} clients: {sum(posted) / (time.perf_counter() - t_start):,.0f}/s)")
    return out, hits


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``xs``, nearest rank."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def main() -> None:
    """Run the benchmark and print one table per round and the medians."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--through-serve", action="store_true", help="time serve's hook route (one serve per stub count) instead of the service")
    ap.add_argument("--ingest-load", type=int, default=0, help="with --through-serve: this many clients post captures to the same serve meanwhile")
    ap.add_argument("--numpy-threads", action="store_true", help="leave numpy's BLAS threads as they are (the default embedder limits them to 1)")
    a = ap.parse_args()
    doc = json.loads(TEXTS.read_text(encoding="utf-8"))
    settings = EmbedderSettings()
    emb = MiniLMEmbedder(max_seq_length=settings.max_tokens, blas_threads=None if a.numpy_threads else settings.threads)  # what make_embedder builds by default
    rng = np.random.default_rng(7)
    stub_vecs = emb.embed([s["text"] for s in doc["stubs"]])
    messages = [m["text"] for m in doc["messages"]]
    sizes = [int(x) for x in a.sizes.split(",")]
    threads = "as numpy has them" if a.numpy_threads else settings.threads
    print(f"machine: {platform.machine()}, {platform.python_version()}; embedder {MODEL_NAME} (numpy, {emb.max_seq_length} word pieces, "
          f"BLAS threads {threads}); {a.prompts} prompts per cell, {a.runs} runs")
    if a.through_serve:
        return through_serve(a, stub_vecs, messages, sizes, doc)
    with tempfile.TemporaryDirectory() as tmp:
        archives = []
        for s in doc["stubs"]:
            p = Path(tmp) / f"{s['id']}.md"
            p.write_text(f"## {s['id']}\n{s['text']}\n" * 20, encoding="utf-8")
            archives.append(p)
        services = {0: StubService(LiveStubs(), emb, budget_s=30.0, workers=1)} | {n: service(emb, stub_vecs, archives, n, rng) for n in sizes}
        results: dict[tuple[int, int], list[tuple[float, float, int]]] = {}
        for run in range(1, a.runs + 1):
            print(f"\nrun {run}: stubs | words | p50 ms | p99 ms | prompts with context | p50 / p50 without stubs")
            for words in (10, 250):
                texts = prompts(messages, words, a.prompts)
                base, _ = timed(services[0], texts, a.warmup)
                b50 = pct(base, 0.5)
                results.setdefault((0, words), []).append((b50, pct(base, 0.99), 0))
                print(f"  {'none':>6} | {words:>5} | {b50:8.3f} | {pct(base, 0.99):8.3f} | {0:>5} | anchor")
                for n in sizes:
                    ms, hits = timed(services[n], texts, a.warmup)
                    p50, p99 = pct(ms, 0.5), pct(ms, 0.99)
                    results.setdefault((n, words), []).append((p50, p99, hits))
                    print(f"  {n:>6} | {words:>5} | {p50:8.3f} | {p99:8.3f} | {hits:>5} | {p50 / b50:,.0f}×")
        for svc in services.values():
            svc.close()
    print("\nmedians over the runs: stubs | words | p50 ms | p99 ms (goal: p50 < 50 ms, p99 < 300 ms)")
    for (n, words), rs in sorted(results.items()):
        print(f"  {n or 'none':>6} | {words:>5} | {statistics.median(r[0] for r in rs):8.3f} | {statistics.median(r[1] for r in rs):8.3f}")


def through_serve(a: argparse.Namespace, stub_vecs: np.ndarray, messages: list[str], sizes: list[int], doc: dict[str, Any]) -> None:
    """The ``--through-serve`` rounds: one serve per (stub count, prompt length), the anchor a serve without stubs."""
    rng = np.random.default_rng(7)
    results: dict[tuple[int, int], list[tuple[float, float, int]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        archives = []
        for s in doc["stubs"]:
            p = Path(tmp) / f"{s['id']}.md"
            p.write_text(f"## {s['id']}\n{s['text']}\n" * 20, encoding="utf-8")
            archives.append(p)
        for run in range(1, a.runs + 1):
            print(f"\nrun {run} (through serve): stubs | words | p50 ms | p99 ms | answers with context | p50 / p50 without stubs")
            for words in (10, 250):
                texts = prompts(messages, words, a.prompts)
                b50 = 0.0
                cells = Path(tmp) / f"r{run}"
                cells.mkdir(exist_ok=True)
                for n in [0, *sizes]:
                    ms, hits = serve_cell(cells, n, stub_vecs, archives, texts, a.warmup, rng, a.ingest_load)
                    p50, p99 = pct(ms, 0.5), pct(ms, 0.99)
                    b50 = p50 if n == 0 else b50
                    results.setdefault((n, words), []).append((p50, p99, hits))
                    print(f"  {n or 'none':>6} | {words:>5} | {p50:8.3f} | {p99:8.3f} | {hits:>5} | {'anchor' if n == 0 else f'{p50 / b50:,.1f}×'}")
    print("\nmedians over the runs (through serve): stubs | words | p50 ms | p99 ms (goal: p50 < 50 ms, p99 < 300 ms)")
    for (n, words), rs in sorted(results.items()):
        print(f"  {n or 'none':>6} | {words:>5} | {statistics.median(r[0] for r in rs):8.3f} | {statistics.median(r[1] for r in rs):8.3f}")


if __name__ == "__main__":
    main()
