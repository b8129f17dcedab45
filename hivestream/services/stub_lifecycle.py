"""The stub lifecycle as the memory-stubs seed runs it: archive a section behind a stub, refresh stubs from their sources.

* :func:`archive_section` (NanoClaw's ``archive-section``): the ``## Section`` is cut out of
  ``memory.md``, appended to its archive file (``<archive-dir>/<slug of the title>.md``; an existing
  file is appended to, never overwritten), the stub text embedded, and a ``stub-upserted`` event
  recorded; then ``memory.md`` is replaced atomically (written beside it, fsynced, renamed) after a
  backup copy ``memory.md.bak-<UTC time>``. The order makes every failure safe: before the event
  nothing has changed but the archive's appended copy, and after it a failure leaves the section
  both in ``memory.md`` and in the archive (the message says so), never in neither.
* :func:`refresh_stubs` (the nightly job's ``refresh-stub``): per ``refresh_source``
  (:mod:`streams.stubs.refresh_source`) the content is read; when it differs from the archive the
  archive is replaced (atomically, the old one kept as ``<archive>.bak``), the stub text re-embedded
  and a ``stub-refreshed`` event recorded with the new archive size; unchanged content is recorded as
  checked (a ``stub-refreshed`` with the same vector, so the staleness query sees the refresh);
  ``manual`` and NULL are skipped and said so; a failing source is reported and nothing is recorded
  for that stub (so ``stubs query stale`` shows it).

Events go where the caller's ``emit`` sends them (by default :mod:`hivestream.services.stub_events`'s own log; the
command line sends them through the serve holding the file). A stub's embedding must come from
the model its scope already uses: a refresh with another embedder is refused, never mixed.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hivestream.services.stub_events import Emit, StubEventsError, StubRow, emit_stub_events, stub_rows
from streams.model.clock import Clock, wall_clock_ms
from streams.model.events import stable_id
from streams.stubs.embedder_choice import Embedder
from streams.stubs.events import RefreshSource, StubRefreshed, StubUpserted, encode_embedding
from streams.stubs.refresh_source import BadRefreshSource, DbQuery, FileWatch, Never, Script, plan
from streams.stubs.sections import SectionError, cut_section
from streams.stubs.sqlite_import import CHARS_PER_TOKEN

MAX_CONTENT_BYTES = 1024 * 1024
"""Largest refreshed content (bytes of UTF-8): a script's stdout or a query's table beyond it is refused."""
MAX_QUERY_ROWS = 500
"""Rows of a scheduler-db-query shown; more are counted in one line."""


class LifecycleError(Exception):
    """An archive or refresh that could not be done; one line naming the cause and what was (not) changed."""


def tokens_of(text: str) -> int:
    """Archive tokens of ``text``: ``ceil(characters / 4)``, as :mod:`streams.stubs.sqlite_import` estimates them."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def slug(title: str) -> str:
    """A file name stem for a section title: lower-case letters, digits and ``-`` (``section`` when nothing is left)."""
    s = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:80].strip("-")
    return s or "section"


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8): written to a temporary file beside it, fsynced, renamed over it, the directory fsynced.

    Raises:
        OSError: the file or the directory cannot be written (``path`` is then unchanged).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _append(path: Path, text: str) -> str:
    """Append ``text`` to ``path`` (created when missing) after a blank line, fsynced; returns the whole file's text afterwards."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    sep = "" if not old or old.endswith("\n\n") else "\n" if old.endswith("\n") else "\n\n"
    with path.open("a", encoding="utf-8", newline="") as fh:
        fh.write(sep + text)
        fh.flush()
        os.fsync(fh.fileno())
    return old + sep + text


@dataclass(frozen=True)
class Archived:
    """What :func:`archive_section` did: the stub (``stub_id``, ``channel``, ``title``), its ``archive`` file, the
    memory file's ``backup``, the archive's size in tokens and where the event went."""

    stub_id: int
    channel: str | None
    title: str
    archive: Path
    backup: Path
    archive_tokens: int
    where: str


def archive_section(db: Path, memory_file: Path, heading: str, archive_dir: Path, stub_text: str, embedder: Embedder, *,
                    channel: str | None = None, refresh_spec: str | None = None, clock: Clock = wall_clock_ms,
                    emit: Emit = emit_stub_events) -> Archived:
    """Archive the section ``heading`` of ``memory_file`` behind a new stub of ``channel`` (``None``: global) in ``db``.

    ``refresh_spec`` is the stub's ``refresh_source`` JSON; default ``{"type": "file-watch", "path": <archive>}``.
    ``emit`` records the event (default: ``db``'s own stub event log, :func:`~hivestream.services.stub_events.emit_stub_events`).

    Raises:
        LifecycleError: the memory file or section cannot be read, the stub text is empty, the
            embedder fails, the archive or the memory file cannot be written, or the event cannot be
            recorded (each says what was left changed).
    """
    if not stub_text.strip():
        raise LifecycleError("--stub-text is empty: the stub text is what prompts are matched against")
    try:
        text = memory_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LifecycleError(f"cannot read {memory_file}: {getattr(e, 'strerror', None) or e}") from None
    try:
        cut = cut_section(text, heading)
    except SectionError as e:
        raise LifecycleError(f"{memory_file}: {e}") from None
    if refresh_spec is not None:  # checked before anything is written: a bad one changes nothing
        try:
            _source_type(refresh_spec)
        except BadRefreshSource as e:
            raise LifecycleError(f"--refresh-source: {e}; nothing was changed") from None
    try:
        vec = embedder.embed([stub_text])[0]
    except Exception as e:
        raise LifecycleError(f"the stub text could not be embedded, nothing was changed: {type(e).__name__}: {e}") from None
    try:
        archive_dir.mkdir(parents=True, exist_ok=True)
        archive = (archive_dir / f"{slug(cut.title)}.md").resolve()
        whole = _append(archive, cut.section if cut.section.endswith("\n") else cut.section + "\n")
    except (OSError, UnicodeDecodeError) as e:
        raise LifecycleError(f"cannot append to the archive in {archive_dir}: {getattr(e, 'strerror', None) or e}; memory.md was not changed") from None
    spec = refresh_spec or f'{{"type": "file-watch", "path": {json.dumps(str(archive))}}}'
    try:
        source = _source_type(spec)
    except BadRefreshSource as e:
        raise LifecycleError(f"--refresh-source: {e}") from None
    now = clock()
    try:
        rows = stub_rows(db)
        stub_id = 1 + max((r.stub_id for r in rows if r.channel == channel), default=0)
        ev = StubUpserted(event_id=stable_id("stub-archived", channel, stub_id, now, str(archive)), event_time_ms=now, stub_id=stub_id,
                          channel=channel, title=cut.title, stub_text=stub_text, archive_path=str(archive), archive_tokens=tokens_of(whole),
                          embedding_b64=encode_embedding(vec), model=embedder.model_name, dim=int(vec.shape[0]), refresh_source=source,
                          refresh_spec=None if source == "none" else spec, last_refreshed_at_ms=now)
        where = emit(db, [ev])
    except StubEventsError as e:
        raise LifecycleError(f"{e}; the section was appended to {archive} and is still in {memory_file}") from None
    backup = memory_file.with_name(f"{memory_file.name}.bak-{dt.datetime.fromtimestamp(now / 1000, dt.UTC):%Y%m%dT%H%M%S}")
    try:
        shutil.copy2(memory_file, backup)
        write_atomically(memory_file, cut.rest)
    except OSError as e:
        raise LifecycleError(f"stub {stub_id} recorded, but {memory_file} could not be rewritten ({e.strerror or e}): "
                             f"the section is still in it as well as in {archive}; remove it by hand") from None
    return Archived(stub_id, channel, cut.title, archive, backup, ev.archive_tokens, where)


def _source_type(spec: str) -> RefreshSource:
    try:
        doc = json.loads(spec)
    except ValueError as e:
        raise BadRefreshSource(f"not JSON: {e}") from None
    kind = doc.get("type") if isinstance(doc, dict) else None
    if kind not in ("file-watch", "scheduler-db-query", "script", "manual"):
        raise BadRefreshSource(f"type must be file-watch, scheduler-db-query, script or manual, got {kind!r}")
    plan(kind, spec, "")  # refuses a spec its type cannot follow
    return kind  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Refreshed:
    """One stub's refresh: ``stub`` (``channel#id``), ``status`` (``refreshed``, ``unchanged``, ``skipped``, ``failed``) and why."""

    stub: str
    status: str
    detail: str = ""


Runner = Callable[[Sequence[str], float, str | None], subprocess.CompletedProcess[bytes]]


def _run(argv: Sequence[str], timeout_s: float, cwd: str | None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(list(argv), capture_output=True, timeout=timeout_s, cwd=cwd, stdin=subprocess.DEVNULL, check=False)


def _script_content(p: Script, run: Runner) -> str:
    try:
        r = run(p.argv, p.timeout_s, p.cwd)
    except subprocess.TimeoutExpired:
        raise BadRefreshSource(f"script {p.argv[0]!r} ran past {p.timeout_s:g} s (killed)") from None
    except OSError as e:
        raise BadRefreshSource(f"script {p.argv[0]!r} could not start: {e.strerror or e}") from None
    if r.returncode != 0:
        err = (r.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise BadRefreshSource(f"script {p.argv[0]!r} exited {r.returncode}" + (f": {err[-1][:200]}" if err else ""))
    if len(r.stdout) > MAX_CONTENT_BYTES:
        raise BadRefreshSource(f"script {p.argv[0]!r} wrote {len(r.stdout):,} bytes, over {MAX_CONTENT_BYTES:,}")
    try:
        out = r.stdout.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRefreshSource(f"script {p.argv[0]!r} wrote output that is not UTF-8 (byte {e.start})") from None
    if not out.strip():
        raise BadRefreshSource(f"script {p.argv[0]!r} wrote nothing (the archive is kept)")
    return out


def _cell(v: object) -> str:
    return ("" if v is None else str(v)).replace("|", "\\|").replace("\n", " ")


def _query_content(p: DbQuery) -> str:
    if not Path(p.db).is_file():
        raise BadRefreshSource(f"no such SQLite file: {p.db}")
    deadline = time.monotonic() + p.timeout_s
    try:
        con = sqlite3.connect(f"{Path(p.db).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise BadRefreshSource(f"cannot open {p.db} read-only: {e}") from None
    try:
        con.execute("PRAGMA query_only = ON")
        con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        cur = con.execute(p.query)
        names = [d[0] for d in cur.description or ()]
        rows = cur.fetchmany(MAX_QUERY_ROWS + 1)
    except sqlite3.OperationalError as e:
        why = f"ran past {p.timeout_s:g} s" if "interrupted" in str(e) else str(e)
        raise BadRefreshSource(f"query on {p.db}: {why}") from None
    except (sqlite3.Error, ValueError) as e:
        raise BadRefreshSource(f"query on {p.db}: {e}") from None
    finally:
        con.close()
    if not names:
        raise BadRefreshSource(f"query on {p.db} returns no columns (a read-only SELECT is needed)")
    lines = ["| " + " | ".join(_cell(n) for n in names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows[:MAX_QUERY_ROWS]]
    if len(rows) > MAX_QUERY_ROWS:
        lines.append(f"(more than {MAX_QUERY_ROWS} rows; the first {MAX_QUERY_ROWS} shown)")
    return "\n".join(lines) + "\n"


def refresh_stubs(db: Path, embedder: Embedder, ids: Sequence[int] | None = None, *, channel: str | None = None, all_channels: bool = False,
                  clock: Clock = wall_clock_ms, run: Runner = _run, emit: Emit = emit_stub_events) -> tuple[list[Refreshed], str | None]:
    """Refresh the live stubs of ``db``: those with ``ids`` in ``channel`` (``None``: global), or every one with ``all_channels``;
    ``emit`` records the events (as :func:`archive_section`'s).

    Returns each stub's outcome, in channel and id order, and where the events went (``None`` when none was recorded).

    Raises:
        LifecycleError: ``db`` cannot be read, an id is unknown, or the events cannot be recorded.
    """
    try:
        rows = [r for r in stub_rows(db, with_vectors=True) if not r.deleted]
    except StubEventsError as e:
        raise LifecycleError(str(e)) from None
    if not all_channels:
        want = set(ids or ())
        chosen = [r for r in rows if r.channel == channel and r.stub_id in want]
        missing = want - {r.stub_id for r in chosen}
        if missing:
            where = "the global set" if channel is None else f"channel {channel!r}"
            raise LifecycleError(f"no live stub {', '.join(map(str, sorted(missing)))} in {where} of {db}")
        rows = chosen
    outcomes, events = refresh_events(rows, embedder, clock=clock, run=run)
    if not events:
        return outcomes, None
    try:
        return outcomes, emit(db, events)
    except StubEventsError as e:
        raise LifecycleError(f"{e}; archives already rewritten keep their new content (the next refresh records them)") from None


def refresh_events(rows: Sequence[StubRow], embedder: Embedder, *, clock: Clock = wall_clock_ms, run: Runner = _run
                   ) -> tuple[list[Refreshed], list[StubRefreshed]]:
    """Refresh each of ``rows`` (live stubs with their current vectors) from its source: the outcomes, in order, and the events to record.

    Archives are rewritten as the module docstring says; nothing is recorded here. Never raises for one stub's failure.
    """
    outcomes: list[Refreshed] = []
    events: list[StubRefreshed] = []
    for r in rows:
        label = f"{r.channel or '(global)'}#{r.stub_id}"
        try:
            p = plan(r.refresh_source, r.refresh_spec, r.archive_path)
        except BadRefreshSource as e:
            outcomes.append(Refreshed(label, "failed", str(e)))
            continue
        if isinstance(p, Never):
            outcomes.append(Refreshed(label, "skipped", p.why))
            continue
        if r.model != embedder.model_name:
            outcomes.append(Refreshed(label, "failed", f"embedded with {r.model}, the embedder is {embedder.model_name}: set HIVESTREAM_EMBED_* to "
                                                       f"{r.model}'s endpoint (the two are never mixed)"))
            continue
        try:
            content, changed = _content(p, r.archive_path, r.last_refreshed_at_ms or r.created_at_ms, run)
            now = clock()
            if changed:
                vec = embedder.embed([r.stub_text])[0]
                b64, dim = encode_embedding(vec), int(vec.shape[0])
            else:
                b64, dim = r.embedding_b64, r.dim
        except BadRefreshSource as e:
            outcomes.append(Refreshed(label, "failed", str(e)))
            continue
        except Exception as e:  # an embedder's failure: this stub only
            outcomes.append(Refreshed(label, "failed", f"{type(e).__name__}: {str(e)[:200]}"))
            continue
        events.append(StubRefreshed(event_id=stable_id("stub-refreshed", r.channel, r.stub_id, now), event_time_ms=now, stub_id=r.stub_id,
                                    channel=r.channel, stub_text=r.stub_text, archive_tokens=tokens_of(content), embedding_b64=b64,
                                    model=r.model, dim=dim))
        outcomes.append(Refreshed(label, "refreshed" if changed else "unchanged",
                                  f"archive {tokens_of(content)} tokens" if changed else "content unchanged since the last refresh"))
    return outcomes, events


def _content(p: FileWatch | Script | DbQuery, archive_path: str, since_ms: int, run: Runner) -> tuple[str, bool]:
    """The content and whether it changed; the archive is rewritten when a source other than the archive itself changed it."""
    archive = Path(archive_path)
    if isinstance(p, FileWatch):
        src = Path(p.path)
        try:
            st = src.stat()
            if st.st_size > MAX_CONTENT_BYTES:
                raise BadRefreshSource(f"watched file {src} is over {MAX_CONTENT_BYTES:,} bytes")
            content = src.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BadRefreshSource(f"watched file {src} is missing") from None
        except UnicodeDecodeError as e:
            raise BadRefreshSource(f"watched file {src} is not UTF-8 (byte {e.start})") from None
        except OSError as e:
            raise BadRefreshSource(f"watched file {src} unreadable: {e.strerror or e}") from None
        if src.resolve() == archive.resolve():
            return content, st.st_mtime_ns // 1_000_000 > since_ms
    elif isinstance(p, Script):
        content = _script_content(p, run)
    else:
        content = _query_content(p)
    try:
        old = archive.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = None
    except (OSError, UnicodeDecodeError):
        old = None
    if old == content:
        return content, False
    try:
        if old is not None:
            shutil.copy2(archive, archive.with_name(archive.name + ".bak"))
        write_atomically(archive, content)
    except OSError as e:
        raise BadRefreshSource(f"cannot rewrite the archive {archive}: {e.strerror or e}") from None
    return content, True
