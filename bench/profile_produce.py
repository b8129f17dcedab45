"""CPU cost of each step of ``hivestream produce``, in µs per event, on the generated backlog (no broker).

Each step's figure is the ``time.process_time`` of a streaming pipeline that ends with that step
minus that of the pipeline one step shorter (median of 3 passes each; nothing is kept in memory,
as in ``produce``):

* ``read``: the file's lines (:func:`streams.importers.files.read_lines`);
* ``parse``: a line to a JSON object (:func:`streams.decode.parse_json_object`);
* ``adapt``: the object to a :class:`~streams.events.HookEvent` (:func:`streams.adapters.adapt`);
* ``scrub``: :func:`streams.experiences.scrub.scrub_kb_event` (strict mode);
* ``serialise``: the record value (:func:`streams.producer.event_value`);
* ``key``: the record key (:func:`streams.keying.hook_event_key`);
* ``partition + append``: the partition for the key and the append to an aiokafka record batch
  (what :func:`streams.producer.send_records` does per record, without the network);
* ``hook_records``: the whole import path as ``produce`` runs it (the sum of the above, measured
  in one pass), the anchor the steps are compared with.

Usage: ``python bench/profile_produce.py [--turns 50000] [--file backlog.jsonl]``. The figures are
CPU time of this process only, so they are much less noisy than wall-clock rates on a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.backlog import BacklogSpec, write_backlog  # noqa: E402
from streams.adapters import adapt  # noqa: E402
from streams.clock import wall_clock_ms  # noqa: E402
from streams.deadletter import RejectedInput  # noqa: E402
from streams.decode import parse_json_object  # noqa: E402
from streams.events import HookEvent  # noqa: E402
from streams.experiences.redact import RedactionMode  # noqa: E402
from streams.experiences.scrub import scrub_kb_event  # noqa: E402
from streams.importers.files import read_lines  # noqa: E402
from streams.keying import hook_event_key  # noqa: E402
from streams.producer import ProduceReport, event_value, hook_records  # noqa: E402
from streams.topics import Topics, partition_for  # noqa: E402


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and the CPU seconds it took (``time.process_time``)."""
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def _try(fn: Callable[[Any], Any], x: Any) -> Any:
    try:
        return fn(x)
    except RejectedInput as e:
        return e


def _events(path: Path) -> Iterator[HookEvent]:
    for ln in read_lines(path):
        if ln.strip():
            obj = _try(parse_json_object, ln)
            if isinstance(obj, dict):
                ev = _try(adapt, obj)
                if isinstance(ev, HookEvent):
                    yield ev


def _pipelines(path: Path) -> list[tuple[str, Callable[[], int]]]:
    """Streaming pipelines, each one step longer than the one before (nothing is materialised)."""
    from aiokafka.producer.message_accumulator import BatchBuilder

    def read() -> int:
        return sum(1 for ln in read_lines(path) if ln.strip())

    def parse() -> int:
        return sum(1 for ln in read_lines(path) if ln.strip() and isinstance(_try(parse_json_object, ln), dict))

    def adapted() -> int:
        return sum(1 for _ in _events(path))

    def scrub() -> int:
        return sum(1 for ev in _events(path) if scrub_kb_event(ev, RedactionMode.STRICT))

    def serialise() -> int:
        return sum(1 for ev in _events(path) if event_value(scrub_kb_event(ev, RedactionMode.STRICT)))

    def key() -> int:
        n = 0
        for ev in _events(path):
            s = scrub_kb_event(ev, RedactionMode.STRICT)
            n += bool(event_value(s)) and bool(hook_event_key(s))
        return n

    def append() -> int:
        batches: dict[int, Any] = {}
        parts: dict[bytes, int] = {}
        n = 0
        for ev in _events(path):
            s = scrub_kb_event(ev, RedactionMode.STRICT)
            v, k = event_value(s), hook_event_key(s)
            p = parts.get(k)
            if p is None:
                p = parts[k] = partition_for(k, 4)
            b = batches.get(p)
            if b is None or b.append(key=k, value=v, timestamp=None) is None:
                b = batches[p] = BatchBuilder(1_048_576, 0, is_transactional=False)
                b.append(key=k, value=v, timestamp=None)
            n += 1
        return n

    return [("read", read), ("parse", parse), ("adapt", adapted), ("scrub", scrub), ("serialise", serialise), ("key", key),
            ("partition + batch append", append)]


def steps(path: Path) -> list[tuple[str, float, int]]:
    """(step, CPU seconds of this step alone, events) per step for ``path``: each pipeline's CPU
    time minus the one before it (the median of ``3`` passes each)."""
    out: list[tuple[str, float, int]] = []
    before = 0.0
    for name, fn in _pipelines(path):
        runs = [timed(fn) for _ in range(3)]
        n = runs[0][0]
        dt = statistics.median(r[1] for r in runs)
        out.append((name, dt - before, n))
        before = dt
    n, dt = timed(lambda: sum(1 for _ in hook_records([path], Topics("profile"), ProduceReport(), now_ms=wall_clock_ms)))
    out.append(("hook_records (what produce runs, without sending)", dt, n))
    return out


def main() -> None:
    """Print CPU µs per event for each step."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=50_000)
    ap.add_argument("--file", type=Path, help="an existing hook-event JSONL file instead of a generated backlog")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = a.file
        if path is None:
            path = Path(d) / "backlog.jsonl"
            write_backlog(path, BacklogSpec(turns=a.turns))
        rows = steps(path)
    total = 0.0
    for name, dt, n in rows:
        us = dt / max(n, 1) * 1e6
        if not name.startswith("hook_records"):
            total += us
        print(f"{name:<52} {us:8.1f} µs/event CPU  ({n:,} events)")
    print(f"{'sum of the steps (up to the batch append)':<52} {total:8.1f} µs/event CPU  -> {1e6 / total:,.0f} events/s on one core")


if __name__ == "__main__":
    main()
