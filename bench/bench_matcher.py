"""Benchmark: StubIndex matching vs the seed runtime's per-stub cosine loop.

Prints messages matched per second (median of several runs) for

* (a) ``--channels`` channels with 10 stubs each (dim 3072), messages spread over the channels;
* (b) one channel with 10,000 stubs (dim 3072);

each as ``StubIndex.match_many`` (one batch of ``--batch`` messages), ``StubIndex.match`` one
message at a time, and a plain Python loop that decodes the message embedding and computes
dot product and both norms per stub, as NanoClaw's ``db.js`` ``cosineSimilarity`` does for
every stub on every message (stub vectors pre-decoded into ``array('f')``, like a
``Float32Array``; for (b) only ``--loop-messages-b`` messages are timed, the loop being slow).
Half of the messages are a stub's vector plus noise, so matches and budget skips happen.

Usage: ``python bench/bench_matcher.py [--runs 5] [--batch 256] [--channels 8]``.
"""

from __future__ import annotations

import argparse
import base64
import math
import os
import platform
import statistics
import time
from array import array
from collections.abc import Callable, Sequence

import numpy as np

from streams.stubs.events import MessageEmbedded, StubUpserted, encode_embedding
from streams.stubs.matcher import StubIndex
from streams.stubs.settings import MatchSettings

DIM = 3072
MODEL = "gemini-embedding-001"
Stub = tuple[int, array, int]  # (stub_id, float32 vector, archive_tokens)


def build(rng: np.random.Generator, channels: Sequence[str], per_channel: int) -> tuple[StubIndex, dict[str, list[Stub]], dict[str, np.ndarray]]:
    """An index and the same stubs as plain per-channel lists (plus each channel's vectors)."""
    index = StubIndex()
    plain: dict[str, list[Stub]] = {}
    vectors: dict[str, np.ndarray] = {}
    for ch in channels:
        vecs = rng.standard_normal((per_channel, DIM), dtype=np.float32)
        tokens = rng.integers(200, 3000, per_channel)
        vectors[ch], plain[ch] = vecs, []
        for sid in range(per_channel):
            index.upsert(
                StubUpserted(
                    event_id=f"{ch}-{sid}",
                    event_time_ms=0,
                    stub_id=sid,
                    channel=ch,
                    archive_path=f"/a/{ch}/{sid}.md",
                    archive_tokens=int(tokens[sid]),
                    embedding_b64=encode_embedding(vecs[sid]),
                    model=MODEL,
                    dim=DIM,
                )
            )
            plain[ch].append((sid, array("f", vecs[sid].tobytes()), int(tokens[sid])))
    return index, plain, vectors


def messages(rng: np.random.Generator, vectors: dict[str, np.ndarray], n: int) -> list[MessageEmbedded]:
    """``n`` messages round-robin over the channels; every other one is a stub vector plus noise."""
    chans = list(vectors)
    out = []
    for i in range(n):
        ch = chans[i % len(chans)]
        noise = rng.standard_normal(DIM, dtype=np.float32)
        v = vectors[ch][rng.integers(len(vectors[ch]))] + np.float32(0.3) * noise if i % 2 else noise
        out.append(MessageEmbedded(event_id=f"e{i}", event_time_ms=i, channel=ch, message_id=f"m{i}", embedding_b64=encode_embedding(v), model=MODEL, dim=DIM))
    return out


def cosine(a: array, b: array) -> float:
    """The seed runtime's cosine similarity: one pass computing the dot product and both norms."""
    dot = na = nb = 0.0
    for x, y in zip(a, b, strict=True):
        dot += x * y
        na += x * x
        nb += y * y
    return dot / (math.sqrt(na) * math.sqrt(nb)) if na and nb else 0.0


def loop_match(plain: dict[str, list[Stub]], m: MessageEmbedded, s: MatchSettings) -> list[int]:
    """Per-stub loop: decode, score every stub of the channel, threshold, sort, top N within budget."""
    q = array("f", base64.b64decode(m.embedding_b64))
    scored = sorted(((sim, sid, tok) for sid, v, tok in plain[m.channel] if (sim := cosine(v, q)) >= s.threshold), key=lambda c: (-c[0], c[1]))
    out, left = [], s.token_budget
    for _sim, sid, tok in scored:
        if len(out) == s.top_n:
            break
        if tok <= left:
            left -= tok
            out.append(sid)
    return out


def rate(fn: Callable[[], object], n: int, runs: int) -> float:
    """Median messages/s of ``runs`` timed calls of ``fn`` that each handle ``n`` messages."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return n / statistics.median(times)


def scenario(name: str, index: StubIndex, plain: dict[str, list[Stub]], msgs: list[MessageEmbedded], n_one: int, n_loop: int, args: argparse.Namespace) -> None:
    """Time the three ways on ``msgs`` and print rates and ratios."""
    s = index.policy.defaults
    batch = rate(lambda: index.match_many(msgs), len(msgs), args.runs)
    one = rate(lambda: [index.match(m) for m in msgs[:n_one]], n_one, args.runs)
    loop = rate(lambda: [loop_match(plain, m, s) for m in msgs[:n_loop]], n_loop, args.loop_runs)
    agree = sum([x.stub_id for x in index.match(m)] == loop_match(plain, m, s) for m in msgs[:n_loop])
    hits = sum(bool(r) for r in index.match_many(msgs))
    print(f"\n{name}  ({hits}/{len(msgs)} messages matched at least one stub)")
    print(f"  {'StubIndex.match_many, batch of ' + str(len(msgs)):<52} {batch:>12,.1f} msg/s")
    print(f"  {'StubIndex.match, one by one (' + str(n_one) + ' msgs)':<52} {one:>12,.1f} msg/s")
    print(f"  {'per-stub Python cosine loop (' + str(n_loop) + ' msgs)':<52} {loop:>12,.1f} msg/s")
    print(f"  ratios: batch/loop {batch / loop:,.0f}x   one-by-one/loop {one / loop:,.0f}x   batch/one-by-one {batch / one:,.1f}x")
    print(f"  loop and matcher chose the same stubs for {agree}/{n_loop} messages")


def main() -> None:
    """Parse arguments, build both scenarios and print the results."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5, help="timed runs per matcher measurement (median)")
    p.add_argument("--loop-runs", type=int, default=3, help="timed runs per Python-loop measurement (median)")
    p.add_argument("--batch", type=int, default=256, help="messages per match_many batch")
    p.add_argument("--channels", type=int, default=8, help="channels in scenario (a)")
    p.add_argument("--loop-messages-a", type=int, default=32)
    p.add_argument("--one-messages-b", type=int, default=32)
    p.add_argument("--loop-messages-b", type=int, default=1)
    args = p.parse_args()
    s = MatchSettings()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, {os.cpu_count()} cpus")
    print(f"settings: threshold {s.threshold}, top_n {s.top_n}, token budget {s.token_budget} tokens; dim {DIM}")
    print(f"median of {args.runs} runs ({args.loop_runs} for the Python loop)")
    rng = np.random.default_rng(7)
    chans = [f"ch{i}" for i in range(args.channels)]
    index, plain, vectors = build(rng, chans, 10)
    scenario(f"(a) {args.channels} channels x 10 stubs", index, plain, messages(rng, vectors, args.batch), args.batch, args.loop_messages_a, args)
    index, plain, vectors = build(rng, ["big"], 10_000)
    scenario("(b) 1 channel x 10,000 stubs", index, plain, messages(rng, vectors, args.batch), args.one_messages_b, args.loop_messages_b, args)


if __name__ == "__main__":
    main()
