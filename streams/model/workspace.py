"""The project of a capture: a stable workspace name from a hook's ``cwd`` and ``transcript_path`` (pure).

A hook fires with the directory the agent is in *now* (``cd src`` makes it ``…/tidepool/src``), as
the runtime writes it (a Windows path with backslashes, a home directory with the user's name). The
project token of a frame must name the workspace instead, the same for every event of a session,
on every path (``run``, ``serve``, the Kafka worker), and without state: the Kafka worker sees a
session's events on whichever partitions their bodies' key groups fall in, so no "first cwd of the
session" can be remembered there. The rule, from the event's own fields:

1. **The root.** Claude Code keeps a session's transcript in a directory named after the directory
   the session was started in: that path with every character outside ``[A-Za-z0-9]`` replaced by
   ``-`` (``/home/ana/tidepool`` → ``~/.claude/projects/-home-ana-tidepool/<session>.jsonl``). The
   root is the deepest of ``cwd`` and its ancestors whose name in that form is a directory of
   ``transcript_path``; the encoding is one character for one, so the form of an ancestor is a
   prefix of the form of ``cwd``. When none is (no transcript path, a Codex session, whose cwd does
   not change, a long path Claude Code shortened, a ``cwd`` outside the started directory), the
   root is ``cwd`` itself.
2. **The name.** The last component of the root, splitting on ``/`` and ``\\`` (``C:\\Users\\Ana
   Maria\\tidepool`` → ``tidepool``). A root that is a drive or ``/``, or a home directory
   (``/root``, ``<home|Users>/<name>``, ``var/home/<name>``, after an optional drive), has no
   project (``None``): its last component is the user's name.

The name then becomes a prefix token (whitespace and ``]`` are replaced by ``_`` like every token:
:func:`streams.model.events.safe_tokens`). The body hash strips the whole prefix, so the project
never changes a dedup key, only the frame's content and ``project`` column.
"""

from __future__ import annotations

import re
from functools import lru_cache

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")
_SEP = re.compile(r"[/\\]+")
_HOME_PARENTS = frozenset({"home", "users"})


def _components(path: str) -> list[tuple[str, int]]:
    """The non-empty components of ``path`` (split on ``/`` and ``\\``) with the index each ends at."""
    out: list[tuple[str, int]] = []
    start = 0
    for m in _SEP.finditer(path):
        if m.start() > start:
            out.append((path[start:m.start()], m.start()))
        start = m.end()
    if start < len(path):
        out.append((path[start:], len(path)))
    return out


def _is_home(parts: list[str]) -> bool:
    """True when ``parts`` (a root's components) name a home directory or the root itself."""
    if parts and len(parts[0]) == 2 and parts[0][1] == ":":  # a Windows drive
        parts = parts[1:]
    lowered = [p.lower() for p in parts]
    return (not lowered or lowered == ["root"]
            or (len(lowered) == 2 and lowered[0] in _HOME_PARENTS)
            or (len(lowered) == 3 and lowered[:2] == ["var", "home"]))


@lru_cache(maxsize=16_384)
def workspace_name(cwd: str | None, transcript_path: str | None = None) -> str | None:
    """The project of an event whose hook ran in ``cwd`` (see the module docstring), memoised (a
    session's events share both arguments).

    Args:
        cwd: the hook's working directory, as the runtime wrote it; ``None`` or empty: no project.
        transcript_path: the session's transcript path (Claude Code, Codex), or ``None``.

    Returns:
        The workspace's last path component, or ``None`` (no cwd, a drive or ``/``, a home directory).
    """
    if not cwd:
        return None
    parts = _components(cwd)
    root = len(parts)
    if transcript_path and root:
        dirs = {name for name, _end in _components(transcript_path)[:-1] if name.startswith("-") or "--" in name}
        if dirs:
            form = _NOT_ALNUM.sub("-", cwd)
            for n in range(len(parts), 0, -1):
                if form[:parts[n - 1][1]] in dirs:
                    root = n
                    break
    names = [name for name, _end in parts[:root]]
    if _is_home(names) or (len(names) == 1 and names[0].endswith(":")):
        return None
    return names[-1]
