"""Memory stubs live: a user prompt matched against the current stubs, the matched archives handed to the agent.

What NanoClaw's runtime hook does on every main-runtime user message (the memory-stubs seed), for
the front door of hivestream (serve's and ingest's ``UserPromptSubmit``, ``hivestream hook``, the
OpenClaw plugin's ``before_prompt_build``):

1. a subagent's prompt gets nothing (nor does a prompt when no stub of its channel or the global
   set exists: no embedding is made);
2. the prompt is embedded by the configured embedder (:mod:`streams.stubs.embedder_choice`) and
   matched with the existing matcher against the channel's and the global stubs *of that model*
   (:class:`~streams.stubs.live.LiveStubs`); stubs of another model are never compared, and counted;
3. the token budget and N are cut to the runtime's cap (:func:`~streams.stubs.inject.fit_settings`);
4. each matched stub's archive file is read: a missing, unreadable, huge (over
   ``max_archive_bytes``) or non-UTF-8 archive is skipped with its reason, never an error;
5. the archives go into one escaped block marked untrusted (:func:`~streams.stubs.inject.build_block`);
6. the answer carries the block and the events to record: the prompt's
   :class:`~streams.stubs.events.MessageEmbedded` and one :class:`~streams.stubs.events.StubMatched`
   per archive shown.

It fails open: any error, or no answer within ``budget_s`` (default 1.5 s, under the command hook's 2 s post timeout and far under the 30 s of a
Claude Code hook, whose output is discarded when it times out), gives no context, and the reason
is kept in :attr:`StubService.stats`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import stat
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb

from streams.model.clock import Clock, wall_clock_ms
from streams.model.deadletter import RejectedInput
from streams.model.events import stable_id
from streams.model.workspace import workspace_name
from streams.stubs.embedder_choice import Embedder
from streams.stubs.events import MAX_MS, MessageEmbedded, StubDeleted, StubMatched, StubRefreshed, StubUpserted, encode_embedding
from streams.stubs.inject import ArchiveText, Runtime, build_block, fit_settings
from streams.stubs.live import LiveStubs
from streams.stubs.matcher import Match, to_matched_events
from streams.stubs.records import StubRecord
from streams.stubs.settings import MatchPolicy

log = logging.getLogger("hivestream.services.stubs")

DEFAULT_BUDGET_S = 1.5
"""Seconds a prompt may wait for its context; past it the prompt goes on without (under the command hook's 2 s post timeout)."""
MAX_ARCHIVE_BYTES = 256 * 1024
"""Largest archive file read (bytes); a bigger one is skipped (it could never fit a runtime's cap whole)."""
NO_PROJECT = "(no project)"
"""The channel of a Claude Code or Codex prompt whose working directory names no project."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """One user prompt to match.

    Attributes:
        text: the prompt; channel: its channel (the project for Claude Code and Codex, the OpenClaw
            channel or conversation); runtime: whose cap applies.
        message_id: its id within the channel (recorded); event_time_ms: when it arrived (epoch ms).
        subagent: a subagent's prompt (gets nothing).
    """

    text: str
    channel: str
    runtime: Runtime
    message_id: str
    event_time_ms: int
    subagent: bool = False


@dataclass(frozen=True, slots=True)
class Skipped:
    """A matched stub whose archive was not shown: ``stub`` (``channel#id``), its ``archive_path`` and why."""

    stub: str
    archive_path: str
    reason: str


@dataclass(frozen=True, slots=True)
class Injection:
    """The answer for one prompt.

    Attributes:
        context: the block for the model, or ``None``.
        events: the :class:`MessageEmbedded` of the prompt and the :class:`StubMatched` of each archive shown, to record.
        skipped: matched stubs left out (archive unreadable, huge, not UTF-8, or past the cap).
        other_model: candidate stubs of another embedding model, never compared.
        why_none: why there is no context (``None`` when there is).
        elapsed_ms: time taken (milliseconds).
    """

    context: str | None
    events: tuple[MessageEmbedded | StubMatched, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    other_model: int = 0
    why_none: str | None = None
    elapsed_ms: float = 0.0


@dataclass
class StubStats:
    """Counts since start: prompts seen, given context, failed open (by reason), archives skipped (by reason), other-model stubs met."""

    prompts: int = 0
    injected: int = 0
    failed_open: Counter[str] = field(default_factory=Counter)
    archives_skipped: Counter[str] = field(default_factory=Counter)
    other_model_stubs: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The counts as JSON-ready values (for ``/healthz`` details and the report)."""
        return {"prompts": self.prompts, "injected": self.injected, "failed_open": dict(self.failed_open),
                "archives_skipped": dict(self.archives_skipped), "other_model_stubs": self.other_model_stubs}


def read_archive(path: str, max_bytes: int = MAX_ARCHIVE_BYTES) -> str | Skipped:
    """The text of an archive file, or a :class:`Skipped` (stub left empty) naming why not: missing, not a file,
    unreadable, over ``max_archive_bytes`` (bytes), not UTF-8. Never raises."""
    def skip(reason: str) -> Skipped:
        return Skipped("", path, reason)

    try:  # opened without blocking and checked to be a regular file: a FIFO or a device would hold the worker forever
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return skip("archive file missing")
    except IsADirectoryError:
        return skip("archive path is a directory")
    except OSError as e:
        return skip(f"archive file unreadable ({e.strerror or type(e).__name__})")
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            return skip("archive path is a directory")
        if not stat.S_ISREG(mode):
            return skip("archive path is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as e:
        return skip(f"archive file unreadable ({e.strerror or type(e).__name__})")
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        return skip(f"archive file over {max_bytes:,} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return skip(f"archive file not UTF-8 (byte {e.start})")


def prompt_from_hook(payload: Mapping[str, Any], runtime: Runtime, now_ms: int) -> Prompt | None:
    """The :class:`Prompt` of a Claude Code or Codex ``UserPromptSubmit`` payload; ``None`` for any other payload.

    The channel is the project (:func:`streams.model.workspace.workspace_name` of ``cwd``, or
    :data:`NO_PROJECT`); the time the payload's ``event_time_ms`` (the command hook's stamp), else
    ``now_ms``; the message id the payload's ``prompt_id``, else one derived from the session, the
    prompt and the time; a payload with ``agent_id`` (a subagent's hook) is a subagent prompt.
    """
    if payload.get("hook_event_name") != "UserPromptSubmit" or not isinstance(payload.get("prompt"), str):
        return None
    cwd, tp = payload.get("cwd"), payload.get("transcript_path")
    channel = workspace_name(cwd if isinstance(cwd, str) else None, tp if isinstance(tp, str) else None) or NO_PROJECT
    pid = payload.get("prompt_id") or payload.get("turn_id")  # Codex: the turn
    text = payload["prompt"]
    stamped = payload.get("event_time_ms")  # the command hook's stamp: a retried post is the same message
    if isinstance(stamped, int) and not isinstance(stamped, bool) and 0 <= stamped <= MAX_MS:
        now_ms = stamped
    message_id = pid if isinstance(pid, str) and pid else stable_id("prompt", payload.get("session_id"), text, now_ms)
    agent = payload.get("agent_id")
    return Prompt(text, channel, runtime, message_id[:200], now_ms, subagent=isinstance(agent, str) and bool(agent))


def load_live_stubs(db: str | Path, policy: MatchPolicy | None = None) -> LiveStubs:
    """The live stubs of a stub projection file (its ``stubs`` and ``stub_vectors`` tables, read only).

    Raises:
        duckdb.Error: the file cannot be opened or holds no stub tables.
    """
    live = LiveStubs(policy)
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("""SELECT s.channel, s.stub_id, s.title, s.stub_text, s.archive_path, s.archive_tokens, v.model, v.dim,
                                     v.embedding_b64, s.refresh_source, s.refresh_spec, s.created_at_ms, s.match_count,
                                     s.last_matched_at_ms, s.last_refreshed_at_ms
                              FROM stubs s JOIN stub_vectors v USING (channel, stub_id) WHERE NOT s.deleted
                              ORDER BY s.channel, s.stub_id""").fetchall()
    finally:
        con.close()
    for r in rows:
        live.apply(StubUpserted(event_id=f"load:{r[0]}:{r[1]}", event_time_ms=r[11], stub_id=r[1], channel=r[0] or None, title=r[2] or "",
                                stub_text=r[3] or "", archive_path=r[4], archive_tokens=r[5], model=r[6], dim=r[7], embedding_b64=r[8],
                                refresh_source=r[9], refresh_spec=r[10], match_count=r[12], last_matched_at_ms=r[13], last_refreshed_at_ms=r[14]))
    return live


class StubService:
    """Live stub matching for one process: the stubs, the embedder, the budget; thread-safe.

    Args:
        stubs: the current stubs (changed through :meth:`apply` afterwards).
        embedder: the one model that embedded the stubs that should match.
        budget_s: seconds :meth:`inject_within` and :meth:`inject_async` wait (> 0).
        max_archive_bytes: largest archive file read (bytes).
        workers: embeddings made at once; a prompt arriving while all are busy gets nothing at once.
        clock: epoch milliseconds.
    """

    def __init__(self, stubs: LiveStubs, embedder: Embedder, *, budget_s: float = DEFAULT_BUDGET_S, max_archive_bytes: int = MAX_ARCHIVE_BYTES,
                 workers: int = 2, clock: Clock = wall_clock_ms) -> None:
        if not budget_s > 0:
            raise ValueError(f"the stub budget must be > 0 seconds, got {budget_s}")
        self.stubs = stubs
        self.embedder = embedder
        self.budget_s = budget_s
        self.max_archive_bytes = max_archive_bytes
        self.clock = clock
        self.stats = StubStats()
        self._lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._busy = threading.BoundedSemaphore(workers)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hivestream-stubs")

    def close(self) -> None:
        """Stop the worker threads (an embedding under way finishes; nothing waits for it)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def apply(self, events: Iterable[StubUpserted | StubRefreshed | StubDeleted | StubMatched]) -> list[RejectedInput]:
        """Apply stub state events in order; the refusals (bad embeddings), never raised."""
        with self._lock:
            return [r for ev in events if (r := self.stubs.apply(ev)) is not None]

    def inject(self, prompt: Prompt) -> Injection:
        """Match ``prompt`` and build its block now (no time limit; see the module docstring). Never raises."""
        t0 = time.perf_counter()
        try:
            out = self._inject(prompt)
        except Exception as e:  # fail open: the prompt goes on without context
            log.warning("memory stubs: no context for a prompt on %r: %s: %s", prompt.channel, type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            out = Injection(None, why_none=f"error: {type(e).__name__}")
        with self._stats_lock:
            self.stats.prompts += 1
            if out.context is None and out.why_none and out.why_none.startswith("error"):
                self.stats.failed_open["error"] += 1
            self.stats.injected += out.context is not None
            self.stats.other_model_stubs += out.other_model
            for s in out.skipped:
                self.stats.archives_skipped[s.reason.split(" (", 1)[0]] += 1
        return Injection(out.context, out.events, out.skipped, out.other_model, out.why_none, (time.perf_counter() - t0) * 1000)

    def reset_stubs(self, stubs: Sequence[StubUpserted], policy: MatchPolicy) -> None:
        """Replace every stub and the match settings (the stub projection's, when serve's loop opens the file)."""
        live = LiveStubs(policy)
        for ev in stubs:
            live.apply(ev)
        with self._lock:
            self.stubs = live
        self._warm()

    def stub_event(self, ev: StubUpserted | StubRefreshed | StubDeleted) -> None:
        """Apply one stub state event (a refused one is counted in ``stubs.rejected``, never raised)."""
        with self._lock:
            self.stubs.apply(ev)
        self._warm()

    def _warm(self) -> None:
        """Let an embedder that loads lazily start loading once there is a stub to match (its ``warm()``, if it has one)."""
        warm = getattr(self.embedder, "warm", None)
        if len(self.stubs) and callable(warm):
            warm()

    def rows(self) -> list[tuple[StubRecord, str]]:
        """Every live stub's record and embedding (for the nightly refresh)."""
        with self._lock:
            return self.stubs.stubs()

    def _inject(self, prompt: Prompt) -> Injection:
        if prompt.subagent:
            return Injection(None, why_none="subagent prompt")
        with self._lock:
            candidates = self.stubs.candidates(prompt.channel)
        if not candidates:
            return Injection(None, why_none="no stubs for this channel")
        vec = self.embedder.embed([prompt.text])[0]
        model, dim = self.embedder.model_name, int(vec.shape[0])
        message = MessageEmbedded(event_id=stable_id("stub-prompt", prompt.channel, prompt.message_id, prompt.event_time_ms),
                                  event_time_ms=prompt.event_time_ms, channel=prompt.channel[:200], message_id=prompt.message_id,
                                  embedding_b64=encode_embedding(vec), model=model, dim=dim)
        with self._lock:
            other = self.stubs.others(message.channel, model, dim)
            settings = fit_settings(self.stubs.policy.for_channel(message.channel), prompt.runtime)
            matches, _best = self.stubs.match(message, settings)
            titles = {(m.stub_channel, m.stub_id): (r.title if (r := self.stubs.record(m.stub_channel, m.stub_id)) else "") for m in matches}
        archives, skipped = self._read(matches, titles)
        block = build_block(archives, prompt.runtime)
        shown = block.shown if block else ()
        skipped += [Skipped(_label(a.stub_channel, a.stub_id), a.archive_path, "past the runtime's cap") for a in (block.left_out if block else ())]
        kept = {(a.stub_channel, a.stub_id) for a in shown}
        ranked = [m for m in matches if (m.stub_channel, m.stub_id) in kept]
        events: list[MessageEmbedded | StubMatched] = [message, *to_matched_events(message, _reranked(ranked))]
        why = None if block else ("no stub matched" if not matches else "no matched archive could be read")
        if other and why:
            why += f" ({other} stubs of another model not compared)"
        return Injection(block.text if block else None, tuple(events), tuple(skipped), other, why)

    def _read(self, matches: list[Match], titles: Mapping[tuple[str | None, int], str]) -> tuple[list[ArchiveText], list[Skipped]]:
        archives: list[ArchiveText] = []
        skipped: list[Skipped] = []
        for m in matches:
            got = read_archive(m.archive_path, self.max_archive_bytes)
            if isinstance(got, Skipped):
                skipped.append(Skipped(_label(m.stub_channel, m.stub_id), m.archive_path, got.reason))
                log.info("memory stubs: %s skipped: %s: %s", _label(m.stub_channel, m.stub_id), got.reason, m.archive_path)
            else:
                archives.append(ArchiveText(m.stub_id, m.stub_channel, titles.get((m.stub_channel, m.stub_id), ""), m.archive_path, m.similarity, got))
        return archives, skipped

    def _submit(self, prompt: Prompt) -> concurrent.futures.Future[Injection] | Injection:
        """:meth:`inject` started in a worker thread, or the answer at once when every worker is busy or the pool is stopped."""
        if not self._busy.acquire(blocking=False):
            with self._stats_lock:
                self.stats.prompts += 1
                self.stats.failed_open["busy"] += 1
            return Injection(None, why_none="all stub workers busy")
        try:
            fut = self._pool.submit(self.inject, prompt)
        except RuntimeError:  # shut down
            self._busy.release()
            return Injection(None, why_none="stub matching stopped")
        fut.add_done_callback(lambda _f: self._busy.release())
        return fut

    def _start(self, prompt: Prompt, budget_s: float | None) -> tuple[float, float, concurrent.futures.Future[Injection] | Injection]:
        """The start time, the budget in seconds (``budget_s``, else :attr:`budget_s`) and :meth:`_submit`'s answer."""
        return time.perf_counter(), self.budget_s if budget_s is None else budget_s, self._submit(prompt)

    def _timed_out(self, limit: float, t0: float) -> Injection:
        with self._stats_lock:
            self.stats.failed_open["timeout"] += 1
        return Injection(None, why_none=f"past the time budget of {limit:g} s", elapsed_ms=(time.perf_counter() - t0) * 1000)

    def inject_within(self, prompt: Prompt, budget_s: float | None = None) -> Injection:
        """:meth:`inject` in a worker thread, given up after ``budget_s`` (default :attr:`budget_s`): then no context. Never raises."""
        t0, limit, fut = self._start(prompt, budget_s)
        if isinstance(fut, Injection):
            return fut
        try:
            return fut.result(timeout=limit)
        except concurrent.futures.TimeoutError:
            return self._timed_out(limit, t0)

    async def inject_async(self, prompt: Prompt, budget_s: float | None = None) -> Injection:
        """:meth:`inject_within` for an event loop (the loop is never blocked; the worker thread is not waited for past the budget). Never raises."""
        t0, limit, fut = self._start(prompt, budget_s)
        if isinstance(fut, Injection):
            return fut
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), limit)
        except TimeoutError:
            return self._timed_out(limit, t0)


def _label(channel: str | None, stub_id: int) -> str:
    return f"{channel or '(global)'}#{stub_id}"


def _reranked(matches: list[Match]) -> list[Match]:
    """``matches`` (rank order) renumbered 1..n after some were left out."""
    return [replace(m, rank=i) for i, m in enumerate(matches, 1)]
