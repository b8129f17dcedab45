"""CPU cost of each step of ``hivestream produce``, in µs per event, on the generated backlog (no broker).

Each step is timed with ``time.process_time`` over the previous step's outputs (the first
``--lines`` lines, garbage collector paused, fastest of 5 passes), so a figure is that step alone:

* ``read``: the file's lines (:func:`streams.importers.files.read_lines`);
* ``parse``: a line to a JSON object (:func:`streams.model.decode.parse_json_object`);
* ``adapt``: the object to a :class:`~streams.model.events.HookEvent` (:func:`streams.model.adapters.adapt`);
* ``scrub``: :func:`streams.redaction.scrub.scrub_kb_event` (strict mode);
* ``serialise``: the record value (:func:`streams.produce.encode.event_value`);
* ``key``: the record key (:func:`streams.produce.keys.hook_event_key`);
* ``partition + append``: the partition for the key and the append to an aiokafka record batch
  (what :func:`streams.produce.producer.send_blocks` does per record, without the network);
* ``line record``: :func:`streams.produce.fast_records.line_record`, what ``produce`` runs instead of the
  steps parse to key for the usual hook-event lines (the steps above are the general path);
* ``hook_records``: the whole import path as ``produce`` runs it (the sum of the above, measured
  in one pass), the anchor the steps are compared with;
* ``import task``: what one ``--jobs`` import process runs per byte range
  (:func:`streams.produce.import_pool.run_task`: the import plus the keys and the value blob it pickles);
* ``receive blocks``: the sender process's own CPU (user + sys) for taking the blocks of two import
  processes (pipe, unpickling, value views, dead letters), before the partition + batch append.

Usage: ``python bench/profile_produce.py [--turns 50000] [--file backlog.jsonl] [--lines 20000]``;
``HIVESTREAM_FAST_IMPORT=0`` times the model path. The figures are
CPU time of this process only, so they are much less noisy than wall-clock rates on a shared machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.backlog import BacklogSpec, write_backlog  # noqa: E402
from streams.importers.files import read_lines  # noqa: E402
from streams.kafka.topics import Topics, partition_for  # noqa: E402
from streams.model.adapters import adapt  # noqa: E402
from streams.model.clock import wall_clock_ms  # noqa: E402
from streams.model.deadletter import RejectedInput  # noqa: E402
from streams.model.decode import parse_json_object  # noqa: E402
from streams.model.events import HookEvent  # noqa: E402
from streams.produce.encode import event_value  # noqa: E402
from streams.produce.fast_records import line_record  # noqa: E402
from streams.produce.keys import hook_event_key  # noqa: E402
from streams.produce.producer import ProduceReport, hook_records  # noqa: E402
from streams.redaction.redact import RedactionMode  # noqa: E402
from streams.redaction.scrub import scrub_kb_event  # noqa: E402


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


def steps(path: Path, limit: int = 20_000, passes: int = 5) -> list[tuple[str, float, int]]:
    """(step, CPU seconds per pass, items) for each step, on the first ``limit`` lines of ``path``.

    Each step runs over the previous step's outputs (kept in lists), with the garbage collector
    paused while it is timed; the figure is the fastest of ``passes`` passes. The last row is the
    whole path as ``produce`` runs it (streaming, collector on), fastest of ``passes`` too.
    """
    import gc
    import itertools

    from aiokafka.producer.message_accumulator import BatchBuilder

    lines = [ln for ln in itertools.islice(read_lines(path), limit) if ln.strip()]
    objs = [o for o in (_try(parse_json_object, ln) for ln in lines) if isinstance(o, dict)]
    evs = [e for e in (_try(adapt, o) for o in objs) if isinstance(e, HookEvent)]
    scrubbed = [scrub_kb_event(e, RedactionMode.STRICT) for e in evs]
    values = [event_value(e) for e in scrubbed]
    keys = [hook_event_key(e) for e in scrubbed]

    def append() -> None:
        batches: dict[int, Any] = {}
        parts: dict[bytes, int] = {}
        for k, v in zip(keys, values, strict=True):
            p = parts.get(k)
            if p is None:
                p = parts[k] = partition_for(k, 4)
            b = batches.get(p)
            if b is None or b.append(key=k, value=v, timestamp=None) is None:
                b = batches[p] = BatchBuilder(1_048_576, 0, is_transactional=False)
                b.append(key=k, value=v, timestamp=None)

    table: list[tuple[str, Callable[[], Any], int]] = [
        ("read (lines of the file)", lambda: [ln for ln in itertools.islice(read_lines(path), limit) if ln.strip()], len(lines)),
        ("parse (line -> JSON object)", lambda: [_try(parse_json_object, ln) for ln in lines], len(lines)),
        ("adapt (object -> HookEvent)", lambda: [_try(adapt, o) for o in objs], len(objs)),
        ("scrub (KnowHub redaction check)", lambda: [scrub_kb_event(e, RedactionMode.STRICT) for e in evs], len(evs)),
        ("serialise (record value)", lambda: [event_value(e) for e in scrubbed], len(evs)),
        ("key (body hash -> key group)", lambda: [hook_event_key(e) for e in scrubbed], len(evs)),
        ("partition + batch append", append, len(evs)),
        ("line record (fast path: line -> key, value)", lambda: [line_record(ln) for ln in lines], len(lines)),
    ]
    out: list[tuple[str, float, int]] = []
    for name, fn, n in table:
        gc.disable()
        try:
            best = min(timed(fn)[1] for _ in range(passes))
        finally:
            gc.enable()
        out.append((name, best, n))
    sub = Path(tempfile.mkdtemp()) / "head.jsonl"
    sub.write_bytes(b"".join(ln + b"\n" for ln in itertools.islice(read_lines(path), limit)))
    best, n = float("inf"), 0
    for _ in range(passes):
        n, dt = timed(lambda: sum(1 for _ in hook_records([sub], Topics("profile"), ProduceReport(), now_ms=wall_clock_ms)))
        best = min(best, dt)
    out.append(("hook_records (what produce runs, without sending)", best, n))
    out += pooled_steps(sub, passes)
    sub.unlink()
    return out


def pooled_steps(path: Path, passes: int = 5) -> list[tuple[str, float, int]]:
    """``produce --jobs 2`` without a broker: (step, CPU seconds, records) of one import task run in this
    process (what each import process does per byte range, blob included), and of the sender process
    receiving the import processes' blocks (its own CPU only), fastest of ``passes``."""
    import resource

    from streams.produce.import_pool import ImportPool, byte_ranges, run_task
    from streams.produce.producer import hook_blocks

    ranges = byte_ranges(path, 262_144)
    best, n = float("inf"), 0
    for _ in range(passes):
        t0 = time.process_time()
        n = sum(len(run_task((str(path), "hook-events", a, b, False, RedactionMode.STRICT))[1]) for a, b in ranges)
        best = min(best, time.process_time() - t0)
    rows = [("import task (one --jobs process, per byte range)", best, n)]

    def own_cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_utime + ru.ru_stime

    best = float("inf")
    with ImportPool(2) as pool:
        for _ in range(passes):
            c0 = own_cpu()
            n = sum(len(b[1]) for b in hook_blocks([path], Topics("profile"), ProduceReport(), now_ms=wall_clock_ms, pool=pool))
            best = min(best, own_cpu() - c0)
    rows.append(("receive blocks (sender process, --jobs 2, user+sys)", best, n))
    return rows


def main() -> None:
    """Print CPU µs per event for each step."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=50_000)
    ap.add_argument("--file", type=Path, help="an existing hook-event JSONL file instead of a generated backlog")
    ap.add_argument("--lines", type=int, default=20_000, help="how many lines of the input to time")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = a.file
        if path is None:
            path = Path(d) / "backlog.jsonl"
            write_backlog(path, BacklogSpec(turns=a.turns))
        rows = steps(path, a.lines)
    total = 0.0
    for name, dt, n in rows:
        us = dt / max(n, 1) * 1e6
        if not name.startswith(("hook_records", "import task", "receive blocks", "line record")):
            total += us
        print(f"{name:<52} {us:8.1f} µs/event CPU  ({n:,} events)")
    print(f"{'sum of the general steps (up to the batch append)':<52} {total:8.1f} µs/event CPU  -> {1e6 / total:,.0f} events/s on one core")


if __name__ == "__main__":
    main()
