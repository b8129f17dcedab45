"""Benchmark: the dedup core alone vs the seed's algorithm, on the real corpus captures.

Prints captures/s (median of several runs) and peak traced memory (tracemalloc) for:

* ``to_capture + DedupFold.process`` (hash once per capture, a dict lookup per key);
* the seed's hive-mind ``findDuplicate``: SHA-256 of the stripped, trimmed content of each of
  the last 500 frames for every insert (hive-mind's OQ-6 dedup design (docs/design.md#sources) §4).

Usage: ``python bench/bench_dedup_core.py [--runs 5] [--repeat 20]``. The captures of the corpus
(with the gateway double capture) are repeated ``--repeat`` times with shifted event times and
ids so that the window state grows as it would over a long stream.
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import statistics
import time
import tracemalloc
from pathlib import Path

from streams.frames.capture import to_capture
from streams.frames.dedup import DedupFold
from streams.importers.files import import_file
from streams.model.body_hash import stripped_body
from streams.model.deadletter import RejectedInput
from streams.model.events import HookEvent

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


def load_events(corpus: Path) -> list[HookEvent]:
    """Every valid hook event that carries turn text, from the corpus with the gateway capture."""
    out: list[HookEvent] = []
    for p in sorted(corpus.rglob("*.jsonl")):
        _, items = import_file(p, gateway=True)
        out.extend(ev for _o, _r, ev in items if not isinstance(ev, RejectedInput) and ev.is_capture)
    return out


def stream(events: list[HookEvent], repeat: int) -> list[HookEvent]:
    """``events`` repeated with event times shifted by one day and fresh ids per round."""
    day = 86_400_000
    return [
        ev.model_copy(update={"event_id": f"{ev.event_id}-{r}", "event_time_ms": ev.event_time_ms + r * day})
        for r in range(repeat)
        for ev in events
    ]


def run_core(events: list[HookEvent]) -> int:
    """Hash and dedup every event; returns the number of frames created."""
    core = DedupFold()
    created = 0
    for i, ev in enumerate(events):
        c = to_capture(ev, offset=i)
        if c is not None and core.process(c).kind == "created":
            created += 1
    return created


def run_seed(events: list[HookEvent], recent: int = 500) -> int:
    """The seed's findDuplicate: rehash the last ``recent`` frames' content on every insert."""
    frames: list[str] = []
    created = 0
    for ev in events:
        content = ev.frame_content() or ""
        key = hashlib.sha256(stripped_body(content).encode("utf-8", "replace")).hexdigest()
        hit = False
        for old in frames[-recent:][::-1]:
            if hashlib.sha256(stripped_body(old).encode("utf-8", "replace")).hexdigest() == key:
                hit = True
                break
        if not hit:
            frames.append(content)
            created += 1
    return created


def measure(fn, events, runs: int) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    """(median events/s, peak MiB, result) over ``runs`` runs."""
    rates = []
    result = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn(events)
        rates.append(len(events) / (time.perf_counter() - t0))
    tracemalloc.start()
    fn(events)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(rates), peak / 2**20, result


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    a = ap.parse_args()
    events = stream(load_events(a.corpus), a.repeat)
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}; "
          f"{len(events)} captures ({a.repeat} rounds of the corpus with the gateway capture)")
    core_rate, core_mem, core_frames = measure(run_core, events, a.runs)
    print(f"dedup core (to_capture + DedupFold): {core_rate:,.0f} captures/s median of {a.runs}, peak {core_mem:.1f} MiB, {core_frames} frames")
    seed_events = events[: min(len(events), 2000)]
    seed_rate, seed_mem, _ = measure(run_seed, seed_events, max(1, a.runs // 2))
    print(f"seed findDuplicate (rehash last 500): {seed_rate:,.0f} captures/s on the first {len(seed_events)}, peak {seed_mem:.1f} MiB")
    print(f"ratio dedup core / seed algorithm: {core_rate / seed_rate:,.1f}x")


if __name__ == "__main__":
    main()
