"""Where the real agent-session corpus lives (``shared/corpus``, described in its SOURCES.md).

The files are read in place, never copied into the repository. ``HIVESTREAM_CORPUS`` overrides
the default location, ``<repo root>/../shared/corpus``.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("HIVESTREAM_CORPUS", REPO_ROOT.parent / "shared" / "corpus"))

HOOK_LOG_MARK = "hook-events-log"
"""Name part of the one file in ``claude-code/`` that is a hook-event log, not a transcript."""


def claude_files() -> list[Path]:
    """All ``claude-code/*.jsonl`` files, sorted by name (includes the hook-event log B3)."""
    return sorted((CORPUS / "claude-code").glob("*.jsonl"))


def claude_transcripts() -> list[Path]:
    """The Claude Code transcripts among :func:`claude_files` (the hook-event log left out)."""
    return [p for p in claude_files() if HOOK_LOG_MARK not in p.name]


def codex_files() -> list[Path]:
    """All ``codex/*.jsonl`` rollout files, sorted by name."""
    return sorted((CORPUS / "codex").glob("*.jsonl"))


def corpus_file(subdir: str, prefix: str) -> Path:
    """The one corpus file in ``subdir`` whose name starts with ``prefix``.

    Raises:
        LookupError: when no file or several files match.
    """
    matches = sorted((CORPUS / subdir).glob(f"{prefix}*.jsonl"))
    if len(matches) != 1:
        raise LookupError(f"{len(matches)} corpus files match {subdir}/{prefix}*")
    return matches[0]
