"""A stub's ``refresh_source`` read into what a refresh does (pure).

NanoClaw stores ``refresh_source`` as JSON with a ``type`` (the memory-stubs seed): ``file-watch``
(``{"type": "file-watch", "path": "..."}``), ``script``, ``scheduler-db-query``, ``manual``; NULL is
skipped by the nightly job. The seed names only the types and file-watch's ``path``; the other keys
read here are hivestream's:

* ``file-watch``: ``path`` (default: the stub's archive file) is the content; the stub is refreshed
  when the file changed after its last refresh (its modification time);
* ``script``: ``command`` (a string split as a shell would, or a list of arguments; no shell runs
  it), ``timeout_s`` (default :data:`DEFAULT_TIMEOUT_S`), ``cwd``; its stdout (UTF-8) is the content;
* ``scheduler-db-query``: ``db`` (an SQLite file, opened read-only) and ``query`` (one statement),
  ``timeout_s``; the rows, as a Markdown table, are the content;
* ``manual`` and NULL: never refreshed.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

DEFAULT_TIMEOUT_S = 60.0
"""Seconds a script or a query may run."""


@dataclass(frozen=True, slots=True)
class FileWatch:
    """Refresh from a file: ``path`` (the archive when the spec names none)."""

    path: str


@dataclass(frozen=True, slots=True)
class Script:
    """Refresh from a command's stdout: ``argv``, ``timeout_s`` (seconds), ``cwd`` (``None``: the caller's)."""

    argv: tuple[str, ...]
    timeout_s: float
    cwd: str | None


@dataclass(frozen=True, slots=True)
class DbQuery:
    """Refresh from a read-only query: the SQLite file ``db``, the ``query``, ``timeout_s`` (seconds)."""

    db: str
    query: str
    timeout_s: float


@dataclass(frozen=True, slots=True)
class Never:
    """Not refreshed: ``why`` (``manual``, or NULL)."""

    why: str


RefreshPlan = FileWatch | Script | DbQuery | Never


class BadRefreshSource(ValueError):
    """A ``refresh_source`` that cannot be followed; one line naming what is wrong."""


def _timeout(spec: dict[str, Any]) -> float:
    t = spec.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(t, bool) or not isinstance(t, int | float) or not 0 < t <= 3600:
        raise BadRefreshSource(f"timeout_s must be a number of seconds in (0, 3600], got {t!r}")
    return float(t)


def _text(spec: dict[str, Any], *keys: str) -> str | None:
    for k in keys:
        v = spec.get(k)
        if isinstance(v, str) and v.strip():
            return v
    return None


def plan(refresh_source: str, refresh_spec: str | None, archive_path: str) -> RefreshPlan:
    """What refreshing a stub means, from its ``refresh_source`` type and its verbatim JSON ``refresh_spec``.

    Raises:
        BadRefreshSource: the JSON does not parse, or lacks what its type needs.
    """
    if refresh_source == "none":
        return Never("refresh_source is NULL")
    if refresh_source == "manual":
        return Never("refresh_source is manual")
    spec: dict[str, Any] = {}
    if refresh_spec:
        try:
            doc = json.loads(refresh_spec)
        except ValueError as e:
            raise BadRefreshSource(f"refresh_source is not JSON: {e}") from None
        if not isinstance(doc, dict):
            raise BadRefreshSource("refresh_source is not a JSON object")
        spec = doc
    if refresh_source == "file-watch":
        return FileWatch(_text(spec, "path") or archive_path)
    if refresh_source == "script":
        cmd = spec.get("command", spec.get("script"))
        if isinstance(cmd, str) and cmd.strip():
            try:
                argv = tuple(shlex.split(cmd))
            except ValueError as e:
                raise BadRefreshSource(f"script command does not split into arguments: {e}") from None
        elif isinstance(cmd, list) and cmd and all(isinstance(a, str) for a in cmd):
            argv = tuple(cmd)
        else:
            raise BadRefreshSource("a script refresh_source needs \"command\": a string or a list of strings")
        cwd = spec.get("cwd")
        return Script(argv, _timeout(spec), cwd if isinstance(cwd, str) else None)
    if refresh_source == "scheduler-db-query":
        db, query = _text(spec, "db", "db_path"), _text(spec, "query", "sql")
        if db is None or query is None:
            raise BadRefreshSource("a scheduler-db-query refresh_source needs \"db\" (an SQLite file) and \"query\"")
        return DbQuery(db, query, _timeout(spec))
    raise BadRefreshSource(f"unknown refresh_source type {refresh_source!r}")
