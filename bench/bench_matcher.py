"""Benchmark: StubIndex matching vs NanoClaw's matcher as NanoClaw runs it (JavaScript on Node).

Prints messages matched per second for

* (a) ``--channels`` channels with 10 stubs each (dim 3072), messages spread over the channels;
* (b) one channel with 10,000 stubs (dim 3072);

each as ``StubIndex.match_many`` (one batch of ``--batch`` messages), ``StubIndex.match`` one
message at a time, and the anchor ``bench/nanoclaw/matcher.mjs``: the seed's runtime hook in plain
JavaScript on Node (decode the message embedding, cosine similarity with dot product and both norms
per stub of the channel and per global stub, threshold, best first, top N within the token budget),
on the same stubs and messages (for (b) only the first ``--node-messages-b`` messages, the loop
being slow). The anchor runs in one Node process that stays up; each of ``--runs`` rounds times the
three one after the other, and each ratio is taken within a round (printed per round, with the
median). Half of the messages are a stub's vector plus noise, so matches and budget skips happen.
Stub loading is not timed on either side.

Usage: ``python bench/bench_matcher.py [--runs 5] [--batch 256] [--channels 8]`` (needs ``node``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from streams.stubs.events import MessageEmbedded, StubUpserted, encode_embedding
from streams.stubs.matcher import StubIndex
from streams.stubs.settings import MatchSettings

DIM = 3072
MODEL = "gemini-embedding-001"
NODE_MATCHER = Path(__file__).resolve().parent / "nanoclaw" / "matcher.mjs"
StubRow = tuple[str | None, int, int]  # (channel, stub_id, archive_tokens)


def build(rng: np.random.Generator, channels: Sequence[str], per_channel: int) -> tuple[StubIndex, list[StubRow], np.ndarray, dict[str, np.ndarray]]:
    """An index; the same stubs as rows with their vectors stacked (the anchor's input); each channel's vectors."""
    index = StubIndex()
    rows: list[StubRow] = []
    stacked: list[np.ndarray] = []
    vectors: dict[str, np.ndarray] = {}
    for ch in channels:
        vecs = rng.standard_normal((per_channel, DIM), dtype=np.float32)
        tokens = rng.integers(200, 3000, per_channel)
        vectors[ch] = vecs
        stacked.append(vecs)
        for sid in range(per_channel):
            index.upsert(StubUpserted(event_id=f"{ch}-{sid}", event_time_ms=0, stub_id=sid, channel=ch, archive_path=f"/a/{ch}/{sid}.md",
                                      archive_tokens=int(tokens[sid]), embedding_b64=encode_embedding(vecs[sid]), model=MODEL, dim=DIM))
            rows.append((ch, sid, int(tokens[sid])))
    return index, rows, np.concatenate(stacked), vectors


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


class NodeMatcher:
    """``bench/nanoclaw/matcher.mjs`` in one Node process, loaded with the stubs and messages once.

    Raises:
        RuntimeError: when Node is missing or the process fails.
    """

    def __init__(self, work: Path, rows: list[StubRow], vectors: np.ndarray, msgs: list[MessageEmbedded], s: MatchSettings) -> None:
        stubs_file = work / "stubs.f32"
        vectors.astype("<f4").tofile(stubs_file)
        spec = {"dim": DIM, "threshold": s.threshold, "top_n": s.top_n, "token_budget": s.token_budget, "stubs_file": str(stubs_file),
                "stubs": rows, "messages": [[m.channel, m.embedding_b64] for m in msgs]}
        (work / "input.json").write_text(json.dumps(spec))
        try:
            self.proc = subprocess.Popen(["node", str(NODE_MATCHER), str(work / "input.json")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        except FileNotFoundError as e:
            raise RuntimeError("node is not installed: the anchor runs on Node") from e

    def match(self) -> tuple[float, list[list[int]]]:
        """One pass over every message: (seconds, the stub ids chosen per message)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("match\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Node matcher exited with {self.proc.wait()}")
        out = json.loads(line)
        return float(out["seconds"]), out["chosen"]

    def close(self) -> None:
        """End the Node process."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def scenario(name: str, index: StubIndex, rows: list[StubRow], vectors: np.ndarray, msgs: list[MessageEmbedded], n_one: int, n_node: int,
             args: argparse.Namespace) -> None:
    """Time the three ways on ``msgs``, alternating within each round, and print rates and per-round ratios."""
    s = index.policy.defaults
    with tempfile.TemporaryDirectory() as d:
        node = NodeMatcher(Path(d), rows, vectors, msgs[:n_node], s)
        try:
            _secs, chosen = node.match()  # warm-up, not counted: V8 compiles the loop,
            index.match_many(msgs)  # StubIndex builds its per-channel matrices
            batch, one, js = [], [], []
            for _ in range(args.runs):
                batch.append(len(msgs) / timed(lambda: index.match_many(msgs)))
                one.append(n_one / timed(lambda: [index.match(m) for m in msgs[:n_one]]))
                js.append(n_node / node.match()[0])
        finally:
            node.close()
    agree = sum([x.stub_id for x in index.match(m)] == c for m, c in zip(msgs[:n_node], chosen, strict=True))
    hits = sum(bool(r) for r in index.match_many(msgs))

    def show(label: str, rates: list[float]) -> None:
        print(f"  {label:<60} {statistics.median(rates):>12,.1f} msg/s (rounds: {', '.join(f'{r:,.1f}' for r in rates)})")

    def ratio(label: str, a: list[float], b: list[float]) -> None:
        rs = [x / y for x, y in zip(a, b, strict=True)]
        print(f"  {label:<60} {statistics.median(rs):>12,.1f}x   (rounds: {', '.join(f'{r:,.1f}' for r in rs)})")

    print(f"\n{name}  ({hits}/{len(msgs)} messages matched at least one stub)")
    show(f"StubIndex.match_many, batch of {len(msgs)}", batch)
    show(f"StubIndex.match, one by one ({n_one} msgs)", one)
    show(f"NanoClaw's matcher in JavaScript on Node ({n_node} msgs)", js)
    ratio("ratio match (one by one) / Node", one, js)
    ratio("ratio match_many / Node", batch, js)
    print(f"  the Node matcher and StubIndex chose the same stubs for {agree}/{n_node} messages")


def main() -> None:
    """Parse arguments, build both scenarios and print the results."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5, help="rounds; each times every matcher once (medians and per-round ratios)")
    p.add_argument("--batch", type=int, default=256, help="messages per match_many batch")
    p.add_argument("--channels", type=int, default=8, help="channels in scenario (a)")
    p.add_argument("--one-messages-b", type=int, default=32, help="messages StubIndex.match times one by one in (b)")
    p.add_argument("--node-messages-b", type=int, default=32, help="messages the Node matcher times in (b)")
    args = p.parse_args()
    s = MatchSettings()
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip() or "not found"
    print(f"python {platform.python_version()}, numpy {np.__version__}, node {node}, {platform.machine()}, {os.cpu_count()} cpus")
    print(f"settings: threshold {s.threshold}, top_n {s.top_n}, token budget {s.token_budget} tokens; dim {DIM}; {args.runs} rounds")
    rng = np.random.default_rng(7)
    chans = [f"ch{i}" for i in range(args.channels)]
    index, rows, vectors, by_channel = build(rng, chans, 10)
    msgs = messages(rng, by_channel, args.batch)
    scenario(f"(a) {args.channels} channels x 10 stubs", index, rows, vectors, msgs, args.batch, args.batch, args)
    index, rows, vectors, by_channel = build(rng, ["big"], 10_000)
    msgs = messages(rng, by_channel, args.batch)
    scenario("(b) 1 channel x 10,000 stubs", index, rows, vectors, msgs, args.one_messages_b, args.node_messages_b, args)


if __name__ == "__main__":
    main()
