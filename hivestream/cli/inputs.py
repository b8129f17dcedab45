"""Input paths of the file commands (``run``, ``produce``, ``kb run``): directories expand to their JSONL files."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def missing(files: Iterable[Path]) -> str | None:
    """The one-line error for the first of ``files`` that does not exist (or cannot be looked at),
    else None. The file commands check this themselves rather than with Typer's ``exists=True``,
    whose error is a boxed usage screen, not the one line every other bad input gets. Raises nothing."""
    for f in files:
        try:
            if f.exists():
                continue
        except OSError as e:  # a path too long or not allowed to look at
            return f"cannot read {f}: {e.strerror or type(e).__name__}"
        return f"no such file or directory: {f}"
    return None


def expand_jsonl(files: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """The files to read for ``files`` and the files that were left out.

    A file given by name is read as it is. A directory expands, recursively and sorted, to its
    regular files whose name ends in ``.jsonl`` (any case); its other regular files are returned as
    left out, so the command can say so. Directories named ``*.jsonl`` inside are walked, not read.

    Returns:
        (files to read, files left out).
    """
    paths: list[Path] = []
    skipped: list[Path] = []
    for f in files:
        if not f.is_dir():
            paths.append(f)
            continue
        for p in sorted(f.rglob("*")):
            if not p.is_file():
                continue
            (paths if p.name.lower().endswith(".jsonl") else skipped).append(p)
    return paths, skipped
