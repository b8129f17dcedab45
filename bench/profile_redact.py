"""CPU cost of KnowHub strict redaction, in µs per line, with the fast path and with the plain
rule-by-rule path (the anchor) in the same run, on the generated KnowHub backlog (no broker).

Times, each the fastest of ``--passes`` passes with the garbage collector paused:

* ``redact() calls``: every string :func:`~streams.redaction.scrub.scrub_kb_event` redacts on
  these lines (recorded once), passed to :func:`~streams.redaction.redact.redact` again;
* ``scrub_kb_event``: what ``hivestream produce`` runs per line before keying (strict mode);
* ``hook_event_key``: the record key (a ``kb_submit`` line derives its experience again, with
  redaction);
* ``ExperienceDeriver.derive``: the worker's KnowHub derivation of a scrubbed line.

"reference" switches :func:`streams.redaction.redact._redact_strict` to
:func:`~streams.redaction.redact._redact_reference` (every rule on every string, the code before
the fast path); the outputs of both are compared line by line and the run fails on a difference.

Usage: ``python bench/profile_redact.py [--lines 5000] [--file kb.jsonl] [--passes 3]``. CPU time
of this process only (``time.process_time``), so much less noisy than wall-clock rates.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stage_backlog import ExperienceBacklogSpec, kb_backlog  # noqa: E402
from streams.experiences.from_hooks import ExperienceDeriver  # noqa: E402
from streams.experiences.settings import ExperienceSettings  # noqa: E402
from streams.model.adapters import adapt  # noqa: E402
from streams.model.deadletter import RejectedInput  # noqa: E402
from streams.model.decode import parse_json_object  # noqa: E402
from streams.model.events import HookEvent  # noqa: E402
from streams.produce.keys import hook_event_key  # noqa: E402
from streams.redaction import redact as redact_mod  # noqa: E402
from streams.redaction import scrub as scrub_mod  # noqa: E402
from streams.redaction.redact import Redacted, RedactionMode  # noqa: E402
from streams.redaction.scrub import scrub_kb_event  # noqa: E402


def _lines(file: Path | None, n: int) -> Iterator[bytes]:
    if file is None:
        return itertools.islice(kb_backlog(ExperienceBacklogSpec(events=n)), n)
    return itertools.islice((ln.rstrip(b"\n") for ln in file.open("rb") if ln.strip()), n)


def _events(lines: Iterator[bytes]) -> list[HookEvent]:
    out: list[HookEvent] = []
    for ln in lines:
        try:
            out.append(adapt(parse_json_object(ln)))
        except RejectedInput:
            continue
    return out


def _derive_all(deriver: ExperienceDeriver, evs: list[HookEvent]) -> list[Any]:
    out: list[Any] = []
    for e in evs:
        try:
            out.append(deriver.derive(e))
        except RejectedInput as exc:
            out.append(str(exc))
    return out


def best_cpu(fn: Callable[[], Any], passes: int) -> tuple[float, Any]:
    """Fastest CPU seconds of ``passes`` calls of ``fn`` (collector paused) and the last result."""
    best, out = float("inf"), None
    for _ in range(passes):
        gc.disable()
        try:
            t0 = time.process_time()
            out = fn()
            best = min(best, time.process_time() - t0)
        finally:
            gc.enable()
    return best, out


def main() -> None:
    """Print CPU µs per line (and per redact() call) for both paths, their ratio and the call counts."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=5_000)
    ap.add_argument("--file", type=Path, help="a KnowHub hook-event JSONL file instead of the generated backlog")
    ap.add_argument("--passes", type=int, default=3)
    a = ap.parse_args()
    evs = _events(_lines(a.file, a.lines))
    strict = RedactionMode.STRICT
    settings = ExperienceSettings()

    recorded: list[str] = []
    real = scrub_mod.redact

    def recording(text: str, mode: RedactionMode = strict) -> Redacted:
        recorded.append(text)
        return real(text, mode)

    scrub_mod.redact = recording  # type: ignore[assignment]
    scrubbed = [scrub_kb_event(e, strict) for e in evs]
    scrub_mod.redact = real
    deriver = ExperienceDeriver(settings)

    table: list[tuple[str, Callable[[], Any], int, str]] = [
        ("redact() calls of the scrub", lambda: [redact_mod.redact(s) for s in recorded], len(recorded), "call"),
        ("scrub_kb_event (produce)", lambda: [scrub_kb_event(e, strict) for e in evs], len(evs), "line"),
        ("hook_event_key (produce)", lambda: [hook_event_key(e, kb_settings=settings) for e in scrubbed], len(evs), "line"),
        ("ExperienceDeriver.derive (worker)", lambda: _derive_all(deriver, scrubbed), len(evs), "line"),
    ]
    fast_impl = redact_mod._redact_strict
    print(f"{len(evs):,} lines, {len(recorded):,} redact() calls in the scrub ({len(recorded) / max(len(evs), 1):.1f} per line), "
          f"{sum(map(len, recorded)) / max(len(recorded), 1):.0f} characters per call")
    print(f"{'step':<30} {'fast µs':>10} {'reference µs':>13} {'ratio':>7}")
    for name, fn, n, unit in table:
        fast_s, fast_out = best_cpu(fn, a.passes)
        redact_mod._redact_strict = redact_mod._redact_reference
        try:
            ref_s, ref_out = best_cpu(fn, a.passes)
        finally:
            redact_mod._redact_strict = fast_impl
        if fast_out != ref_out:
            raise SystemExit(f"{name}: the fast path's output differs from the reference's")
        print(f"{name:<30} {fast_s / n * 1e6:10.1f} {ref_s / n * 1e6:13.1f} {fast_s / ref_s:7.3f}  (per {unit}, n={n:,})")


if __name__ == "__main__":
    main()
