"""Memory stubs: NanoClaw's semantic retrieval of archived memory sections, as pure stream code.

NanoClaw keeps ``memory.md`` short by moving sections to archive files; each archived section
has a short *stub* text whose embedding is stored. On every main-runtime user message the
message is embedded, compared by cosine similarity with the channel's stubs plus the global
ones, and the best-matching archives (at or above a threshold, top N, within a token budget)
are injected. Subagents get no stub injection.

Modules:

* :mod:`streams.stubs.errors`: the :class:`~streams.stubs.errors.StubError` detail codes.
* :mod:`streams.stubs.events`: the versioned events and the embedding codec.
* :mod:`streams.stubs.vectors`: the exact normalisation and similarity definitions.
* :mod:`streams.stubs.store`: the per-scope row store (pre-normalised float32 matrix).
* :mod:`streams.stubs.settings`: threshold / top N / token budget, with per-channel overrides.
* :mod:`streams.stubs.records`: per-stub metadata and telemetry.
* :mod:`streams.stubs.matcher`: :class:`~streams.stubs.matcher.StubIndex` and the match rules.
* :mod:`streams.stubs.sqlite_import`: reading a NanoClaw ``stubs.db``.
"""
