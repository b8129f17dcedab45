"""``hivestream run``'s tables against the brute-force dedup reference (``tests/support/dedup_reference.py``).

The Kafka-path tests compare the faust worker with the embedded runner, which share the dedup
core: they prove transport, partitioning and recovery. These prove the dedup: generated backlogs
(double capture, short prompts re-sent across sessions and days, gateway lines arriving minutes
late, bad lines) and the generated sessions, with every key strategy and windows from unbounded
to one second, where late captures meet frames that have closed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.backlog import START_MS, BacklogSpec, write_backlog
from hivestream.cli.app import app
from streams.model.body_hash import KeyStrategy
from tests.support.dedup_reference import db_tables, expected_tables, log_captures, reference_dedup
from tests.support.session_gen import iso
from tests.support.session_sets import SessionSet

LATENESS_MS = 60_000
WINDOWS = [0, 1_000, 90_000, 600_000]  # unbounded, one second (late captures find their frame closed), 90 s, the default
SPEC = BacklogSpec(turns=900, span_ms=30 * 60_000, gateways=3, sessions=40, short_share=0.15, echo_share=0.1, late_share=0.06, bad_every=150,
                   body_chars=80, seed=23)


@pytest.fixture(scope="module")
def backlog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,600 hook-event lines over half an hour: one in 17 turns' gateway lines 2-10 minutes late, one in
    ten replies a short text also sent as a prompt."""
    path = tmp_path_factory.mktemp("backlog") / "backlog.jsonl"
    write_backlog(path, SPEC)
    return path


def _run(inputs: list[Path], db: Path, window_ms: int, strategy: KeyStrategy, *extra: str) -> None:
    res = CliRunner().invoke(app, ["run", *map(str, inputs), "--window-ms", str(window_ms), "--key-strategy", strategy.value, "--db", str(db), *extra])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("strategy", list(KeyStrategy), ids=lambda s: s.value)
@pytest.mark.parametrize("window_ms", WINDOWS)
def test_run_on_a_backlog_equals_the_reference(backlog: Path, tmp_path: Path, window_ms: int, strategy: KeyStrategy) -> None:
    db = tmp_path / "run.duckdb"
    _run([backlog], db, window_ms, strategy)
    ref = reference_dedup(log_captures([backlog], strategy=strategy), window_ms or None, LATENESS_MS)
    want = expected_tables(ref)
    got = db_tables(db)
    assert got["captures"] == want["captures"]
    assert got["frames"] == want["frames"]
    # the cases the comparison is about are there
    dups = sum(1 for _e, _f, dup, _late in want["captures"] if dup)
    late_firsts = sum(1 for _e, _f, dup, late in want["captures"] if late and not dup)
    assert len(want["captures"]) > 3_000 and dups > 1_000
    assert sum(1 for _e, _f, _d, late in want["captures"] if late) > 30
    if window_ms == 1_000:
        assert late_firsts > 30  # late gateway captures whose backend frame had closed: new frames
    if window_ms == 0:
        assert max(n for *_x, n, _s in want["frames"]) > 20  # a short prompt re-sent over three days: one frame


@pytest.mark.parametrize("window_ms", [0, 1_000, 600_000])
def test_run_on_the_sessions_equals_the_reference(sessions: SessionSet, tmp_path: Path, window_ms: int) -> None:
    """Every session file with the gateway's double capture (the main job), as ``hivestream run DIRS`` orders them."""
    db = tmp_path / "run.duckdb"
    _run(sessions.dirs(), db, window_ms, KeyStrategy.BODY, "--gateway")
    paths = sessions.claude_files() + sessions.codex_files()
    want = expected_tables(reference_dedup(log_captures(paths, gateway=True), window_ms or None, LATENESS_MS))
    got = db_tables(db)
    assert got == want
    assert sum(1 for _e, _f, dup, _late in want["captures"] if dup) > 100


def test_run_at_the_window_and_watermark_boundaries_equals_the_reference(tmp_path: Path) -> None:
    """Times on a 250 ms grid with W = 1 s and L = 0, out of order: many captures exactly W from an
    anchor, or arriving when the watermark equals a frame's close time (the ``<=`` of both rules)."""
    rnd = random.Random(5)
    lines = []
    for i in range(600):
        body, source = rnd.choice(["continue", "ok", "run the tests again", "thanks"]), rnd.choice(["openclaw", "claude-code", "codex"])
        t = START_MS + 250 * (i // 4 + rnd.randrange(0, 40))  # a grid time that drifts forward and jumps back up to 10 s
        lines.append(json.dumps({"content": f"[hm src:{source} event:stop] {body}", "timestamp": iso(t)}))
    log = tmp_path / "grid.jsonl"
    log.write_text("\n".join(lines) + "\n")
    db = tmp_path / "grid.duckdb"
    res = CliRunner().invoke(app, ["run", str(log), "--window-ms", "1000", "--db", str(db)], env={"HIVESTREAM_ALLOWED_LATENESS_MS": "0"})
    assert res.exit_code == 0, res.output
    ref = reference_dedup(log_captures([log]), 1_000, 0)
    want = expected_tables(ref)
    assert db_tables(db) == want
    at_w = [t for f in ref.frames for t in f.times if abs(t - f.anchor_ms) == 1_000]
    assert len(at_w) > 20 and sum(1 for *_x, late in want["captures"] if late) > 100
