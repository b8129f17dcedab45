"""Agent-session inputs for the tests: the generated set (always there) and the real corpus (an extra).

A :class:`SessionSet` is a directory laid out as ``shared/corpus`` is (``claude-code/``, ``codex/``)
with the files named by role (:data:`tests.support.session_gen.ROLES`) and the facts the tests check
(:class:`tests.support.session_gen.Facts`). ``generated`` is written by :func:`tests.support.session_gen.write_sessions`;
``corpus`` is ``tests.support.corpus.CORPUS`` with the facts stated in its SOURCES.md. Tests take the
``sessions`` fixture (``tests/conftest.py``) and run once per set; the corpus set skips, with
:data:`NO_CORPUS` as its reason, where the corpus is not beside the repository.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support.corpus import CORPUS, HOOK_LOG_MARK
from tests.support.session_gen import ROLES, SESSION_GROUPS, Facts, SessionSpec, write_sessions

NO_CORPUS = "shared/corpus is not beside the repository (an extra: the generated sessions ran instead)"
"""The skip reason of a corpus variant without the corpus (allowed under CI: ``tests/conftest.py``)."""

CORPUS_ONLY = "only shared/corpus holds "
"""How the skip reason of a test that only the corpus can feed begins (allowed under CI with its own entry)."""


def corpus_only(what: str) -> str:
    """The skip reason of a test that reads ``what`` from the corpus and has no generated input."""
    return f"{CORPUS_ONLY}{what}, and it is not beside the repository"


CORPUS_ROLES: dict[str, str] = {
    "hooked_main": "claude-code/fasthooks-c45af7b1-main",
    "hook_log": "claude-code/fasthooks-c45af7b1-hook-events",
    "split_main": "claude-code/spotter-s1-4d5611e5-main",
    "manual_main": "claude-code/spotter-s2-ae4a77f8-main",
    "slash_main": "claude-code/spotter-s3",
    "snapshot_first": "claude-code/codemie-e9fb405b-snapshot1-first25",
    "snapshot_grown": "claude-code/codemie-e9fb405b-snapshot2-first50",
    "codex_compacted": "codex/localpush-long",
    "codex_two_turns": "codex/codemie-cli-2turns",
    "codex_unfinished": "codex/localpush-7turns",
    "codex_truncated": "codex/localpush-truncated",
}
"""Role → ``<subdir>/<file name prefix>`` in the corpus (SOURCES.md: B1, B3, A1, A4, A7, C1, C2, D1, E1, D2, D3)."""

CORPUS_GROUPS: dict[str, str] = {"split": "spotter-s1-4d5611e5", "manual": "spotter-s2-ae4a77f8", "slash": "spotter-s3"}

CORPUS_FACTS = Facts(
    hooked_prompts=5,  # B1: "5 typed"
    split_stops=3,  # A1: 2 typed prompts and a task notification
    split_text_lines=90,  # A1: 90 text blocks
    split_second_stop="All done. Here's a summary",
    slash_prompts=("create the beads",),  # A7
    codex_user_messages=38,  # D1
    codex_replayed=19,  # D1: at least half replayed by its compaction
    codex_counts={"codex_two_turns": (2, 2), "codex_unfinished": (7, 5), "codex_truncated": (1, 0), "codex_compacted": (38, 33)},
    codex_calls={"codex_two_turns": (102, 102), "codex_unfinished": (144, 143), "codex_compacted": (365, 365), "codex_truncated": (1, 0)},
    codex_first_prompt="show tools",
    codex_project="codemie-code",
)


@dataclass(frozen=True)
class SessionSet:
    """A directory of agent-session files in the corpus layout, with its roles and facts.

    Attributes:
        name: ``generated`` or ``corpus`` (the test id).
        root: the directory (holds ``claude-code/`` and ``codex/``).
        roles: role → ``<subdir>/<file name prefix>``.
        groups: session → file-name prefix of its files in ``claude-code/`` (main and subagents).
        facts: what the files hold.
    """

    name: str
    root: Path
    roles: Mapping[str, str]
    groups: Mapping[str, str]
    facts: Facts

    def path(self, role: str) -> Path:
        """The one file of ``role``.

        Raises:
            LookupError: when no file or several files match.
        """
        subdir, prefix = self.roles[role].split("/", 1)
        matches = sorted((self.root / subdir).glob(f"{prefix}*.jsonl"))
        if len(matches) != 1:
            raise LookupError(f"{len(matches)} files match {subdir}/{prefix}* in {self.root}")
        return matches[0]

    def group(self, session: str) -> list[Path]:
        """The Claude Code files of one session (main and subagents), sorted by name."""
        return sorted((self.root / "claude-code").glob(f"{self.groups[session]}*.jsonl"))

    def claude_files(self) -> list[Path]:
        """All ``claude-code/*.jsonl`` files (the hook-event log included), sorted by name."""
        return sorted((self.root / "claude-code").glob("*.jsonl"))

    def claude_transcripts(self) -> list[Path]:
        """The Claude Code transcripts (the hook-event log left out)."""
        return [p for p in self.claude_files() if HOOK_LOG_MARK not in p.name]

    def codex_files(self) -> list[Path]:
        """All ``codex/*.jsonl`` rollouts, sorted by name."""
        return sorted((self.root / "codex").glob("*.jsonl"))

    def transcripts(self) -> list[Path]:
        """Every session file: Claude Code transcripts, then Codex rollouts."""
        return self.claude_transcripts() + self.codex_files()

    def dirs(self) -> list[Path]:
        """``claude-code/`` and ``codex/`` (what ``hivestream run`` / ``produce`` are given)."""
        return [self.root / "claude-code", self.root / "codex"]


def generated_set(root: Path, spec: SessionSpec | None = None) -> SessionSet:
    """Write the generated sessions under ``root`` and describe them."""
    facts = write_sessions(root, spec)
    return SessionSet("generated", root, ROLES, SESSION_GROUPS, facts)


def corpus_set() -> SessionSet | None:
    """The real corpus as a :class:`SessionSet`, or ``None`` when it is not there."""
    if not (CORPUS / "claude-code").is_dir():
        return None
    return SessionSet("corpus", CORPUS, CORPUS_ROLES, CORPUS_GROUPS, CORPUS_FACTS)
