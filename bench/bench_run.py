"""Benchmark ``hivestream run`` (the embedded runner) against hive-mind's indexed dedup, and its memory at 10× the input.

Input: ``bench/backlog.py`` with ``--turns`` turns (default 50,000 = 200,000 capture events).

* ``hivestream run``: import, dedup, DuckDB (a fresh file), in a fresh process; captures/s and peak RSS.
* anchor: hive-mind's own way of deduplicating (``bench/hivemind/dedup.mjs``: Node, better-sqlite3,
  ``sha256(stripHmPrefix(content).trim())`` then an indexed ``content_hash`` lookup and an UPDATE or
  INSERT per capture) on the same captures, already parsed (no JSON parsing in its timing).
* scale: ``hivestream run`` on ``--scale`` times the turns (default 10: 2,000,000 events; 100: 20,000,000,
  generated as a stream, ~11 GB of JSONL), ``--scale-runs`` times (median); its CPU per capture and
  peak RSS over the ones at 1× (the cost of a capture must not grow with the input: targets
  ≤ 1.05 and ≤ 1.5). The runs of both sizes alternate, each large run printed with the ratio to the
  1× run just before it.

``--jobs N`` (default 2) runs the import in N processes beside the dedup and DuckDB writer
(``hivestream run --jobs N``); the one-process run (``--jobs 0``) is printed beside it.

Usage: ``python bench/bench_run.py [--turns 50000] [--runs 3] [--scale 10] [--scale-runs 1] [--jobs 2]``; the anchor needs
``npm install`` in ``bench/hivemind`` (done on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.backlog import BacklogSpec, write_backlog  # noqa: E402
from bench.procstat import proc_peak_rss_mib  # noqa: E402

HIVEMIND = ROOT / "bench" / "hivemind"


def stage_run(path: str, db: str, jobs: str = "0") -> dict[str, float]:
    """``run_files`` of ``path`` into ``db`` with ``jobs`` import processes, after the collector
    settings ``hivestream run`` makes (``streams.gc_tuning.tune_gc``); captures/s, peak RSS (MiB) of
    this process and of the largest import process, CPU µs per capture of all of them."""
    from hivestream.embedded.frames import run_files
    from streams.gc_tuning import tune_gc

    tune_gc()  # as the `run` command does before run_files (without it: ~5 µs more per capture)

    def cpu_s(who: int) -> float:
        r = resource.getrusage(who)
        return r.ru_utime + r.ru_stime

    t0, c0 = time.perf_counter(), cpu_s(resource.RUSAGE_SELF) + cpu_s(resource.RUSAGE_CHILDREN)
    rep = run_files([Path(path)], db, jobs=int(jobs))
    dt, cpu = time.perf_counter() - t0, cpu_s(resource.RUSAGE_SELF) + cpu_s(resource.RUSAGE_CHILDREN) - c0
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so this process would report the
    # benchmark's peak (it held the backlog); the import processes are forked (no exec) and count
    # the pages they share with this process.
    return {"records": rep.captures, "rate": rep.captures / dt, "rss": proc_peak_rss_mib(os.getpid()),
            "child_rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, "cpu_us": cpu / max(rep.captures, 1) * 1e6}


def captures_json(path: Path, out: Path) -> int:
    """Write the captures of ``path`` as a JSON array of ``[content, event_time_ms]`` (the anchor's input)."""
    from streams.frames.capture import to_capture
    from streams.importers.files import import_file
    from streams.model.deadletter import RejectedInput

    pairs = []
    _fmt, items = import_file(path)
    for _off, _raw, ev in items:
        if isinstance(ev, RejectedInput):
            continue
        try:
            c = to_capture(ev)
        except RejectedInput:
            continue
        if c is not None:
            pairs.append([c.content, c.event_time_ms])
    out.write_text(json.dumps(pairs))
    return len(pairs)


def main() -> None:
    """Run the stages and print the figures and ratios."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--scale-runs", type=int, default=1, help="runs at --scale times the input (median)")
    ap.add_argument("--jobs", type=int, default=2, help="import processes of the run (hivestream run --jobs); 0: one process")
    ap.add_argument("--stage", nargs=3)
    a = ap.parse_args()
    if a.stage:
        print(json.dumps(stage_run(*a.stage)))
        return
    if not (HIVEMIND / "node_modules" / "better-sqlite3").exists():
        subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=HIVEMIND, check=True)

    def run_once(log: Path, d: Path, i: int, jobs: int) -> dict[str, float]:
        out = subprocess.run([sys.executable, __file__, "--stage", str(log), str(d / f"run{i}.duckdb"), str(jobs)], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        if out.returncode:  # e.g. a Python without the project's dependencies (use .venv/bin/python)
            raise SystemExit(f"the run stage failed (exit {out.returncode}): {(out.stderr.strip().splitlines() or ['no output'])[-1]}")
        result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
        return result

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        log = d / "backlog.jsonl"
        lines = write_backlog(log, BacklogSpec(turns=a.turns))
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, node "
              f"{subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}; backlog {lines} lines", flush=True)
        blog = d / "big.jsonl"
        if a.scale > 1:
            big_lines = write_backlog(blog, BacklogSpec(turns=a.turns * a.scale, days=12 * a.scale))
            print(f"scale: {big_lines} lines", flush=True)
        # The runs at 1x and at --scale alternate (1x, big, 1x, big, ...), so both sizes meet the
        # same state of the machine: CPU per capture drifted by 5-10 % between phases of one bench,
        # as much as the 5 % the comparison is about.
        runs: list[dict[str, float]] = []
        bigs: list[dict[str, float]] = []
        for i in range(max(a.runs, a.scale_runs if a.scale > 1 else 0)):
            if i < a.runs:
                runs.append(run_once(log, d, i, a.jobs))
            if a.scale > 1 and i < a.scale_runs:
                bigs.append(run_once(blog, d, 99, a.jobs))
                (d / "run99.duckdb").unlink()
                print(f"  {a.scale}x run {i + 1}: {bigs[-1]['rate']:,.0f} captures/s, CPU {bigs[-1]['cpu_us']:,.1f} us/capture, "
                      f"peak RSS {bigs[-1]['rss']:,.0f} MiB"
                      + (f" (the 1x run before it: {runs[i]['cpu_us']:,.1f} us/capture, ratio {bigs[-1]['cpu_us'] / runs[i]['cpu_us']:.3f})"
                         if i < len(runs) else ""), flush=True)
        if blog.exists():
            blog.unlink()
        single = [run_once(log, d, 10 + i, 0) for i in range(a.runs)] if a.jobs else []
        n = captures_json(log, d / "captures.json")
        anchor = []
        for i in range(a.runs):
            res = json.loads(subprocess.run(["node", str(HIVEMIND / "dedup.mjs"), str(d / "captures.json"), str(d / f"hm{i}.sqlite")],
                                            capture_output=True, text=True, check=True).stdout)
            anchor.append(n / res["seconds"])

    rate = statistics.median(r["rate"] for r in runs)
    rss = max(r["rss"] for r in runs)
    hm = statistics.median(anchor)
    cpu = statistics.median(r["cpu_us"] for r in runs)
    runs_s = ", ".join(f"{r['rate']:,.0f}" for r in runs)
    child = max(r["child_rss"] for r in runs)
    print(f"\nhivestream run --jobs {a.jobs} (import, dedup, DuckDB) {rate:>10,.0f} captures/s (median of {len(runs)}; runs {runs_s}), "
          f"peak RSS {rss:,.0f} MiB (import processes {child:,.0f} MiB each at most), CPU {cpu:,.1f} us/capture (all processes)")
    if single:
        srate = statistics.median(r["rate"] for r in single)
        print(f"hivestream run --jobs 0 (one process)            {srate:>10,.0f} captures/s (median of {len(single)}), "
              f"peak RSS {max(r['rss'] for r in single):,.0f} MiB, CPU {statistics.median(r['cpu_us'] for r in single):,.1f} us/capture")
    print(f"hive-mind indexed dedup (node, better-sqlite3)   {hm:>10,.0f} captures/s (median of {len(anchor)}), {n} captures")
    print(f"ratio run / hive-mind: {rate / hm:.2f}")
    if bigs:
        brate, bcpu = statistics.median(b["rate"] for b in bigs), statistics.median(b["cpu_us"] for b in bigs)
        brss, bchild = max(b["rss"] for b in bigs), max(b["child_rss"] for b in bigs)
        print(f"hivestream run --jobs {a.jobs}, {a.scale}x the input: {brate:,.0f} captures/s (median of {len(bigs)}), CPU {bcpu:,.1f} us/capture, "
              f"peak RSS {brss:,.0f} MiB (import processes {bchild:,.0f} MiB); ratio to hive-mind {brate / hm:.2f}")
        print(f"  {a.scale}x / 1x: CPU per capture {bcpu / cpu:.3f} (target <= 1.05), peak RSS {brss / rss:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
