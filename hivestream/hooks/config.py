"""Pure merges of hivestream's hooks into runtime configuration (no file I/O here).

* Claude Code ``settings.json`` and Codex ``hooks.json`` share the layout
  ``{"hooks": {EVENT: [{"matcher"?: str, "hooks": [HANDLER, ...]}, ...]}}``. hivestream adds one
  group per event holding one handler and recognises its own handlers by :func:`is_ours`: by the
  marker it writes into each (the header :data:`MARK_HEADER` of an ``http`` handler, the argument
  :data:`MARK_ARG` of a ``command`` handler), or, for what earlier versions wrote, by that exact
  handler (every key and value as they wrote it), never by a URL or a command that merely looks
  like hivestream's. So installing removes its earlier handlers first (idempotent, a changed URL
  replaces the old one) and uninstalling removes only them, dropping groups and events it emptied.
  Two sets are kept apart: the capture hooks (``hooks install``) and the KnowHub reminder
  (``--knowhub``: a ``SessionStart`` command hook running ``hivestream hook session-start``,
  :func:`is_knowhub`); each install or uninstall touches its own set only.
* Codex's legacy ``notify`` (``config.toml``): one top-level line ``notify = [argv...]``; an
  existing program is kept as ``--chain JSON`` so it still runs and comes back on uninstall.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import tomllib
from collections.abc import Callable
from typing import Any

from streams.ingest.hook_output import RUNTIME_HOOK_HEADER

KB_TOOL_MATCHER = "kb_submit|kb_search|kb_content|mcp__.*__kb_(submit|search|content)"
"""``PostToolUse`` matcher of the KnowHub tools, bare or MCP-prefixed: the only tool calls hivestream
reads (:mod:`streams.experiences.from_hooks`). A regex to both runtimes (Claude Code: JavaScript,
Codex: Rust ``regex``; unanchored), so no other tool call starts a hook."""

CLAUDE_EVENTS: dict[str, str | None] = {
    "UserPromptSubmit": None,
    "Stop": None,
    "SubagentStop": None,
    "PostToolUse": KB_TOOL_MATCHER,
}
"""Claude Code events hivestream uses (captures, and KnowHub tool calls) and their matchers."""

CODEX_EVENTS: dict[str, str | None] = {"UserPromptSubmit": None, "Stop": None, "PostToolUse": KB_TOOL_MATCHER}
"""Codex ``hooks.json`` events hivestream uses and their matchers. Codex waits for each command
hook, and versions before async hooks skip an ``"async": true`` one entirely ("async hooks are not
supported yet"), so the hooks stay synchronous and the matcher keeps every other tool call free of
a hook process."""

TOKEN_ENV = "HIVESTREAM_INGEST_TOKEN"
MARK_HEADER = RUNTIME_HOOK_HEADER
"""Header hivestream writes into its ``http`` handlers; the server answers a request carrying it
with hook output Claude Code accepts instead of its verdict (:mod:`streams.ingest.hook_output`)."""
MARK_ARG = "--hivestream-managed"
"""Argument hivestream writes into its ``command`` handlers and ``notify`` (``hivestream hook`` ignores it)."""
_LEGACY_COMMAND = re.compile(r"\S*hivestream[\w.-]*'? hook (claude-code|codex) --url \S+( --detach)?")
_BEARER = {"Authorization": f"Bearer ${TOKEN_ENV}"}


def _legacy(handler: dict[str, Any]) -> bool:
    """True for a handler exactly as hivestream versions before the marker wrote it."""
    if handler.get("type") == "http":
        url = handler.get("url")
        return (set(handler) == {"type", "url", "headers", "allowedEnvVars", "timeout"} and handler.get("headers") == _BEARER
                and handler.get("allowedEnvVars") == [TOKEN_ENV] and isinstance(url, str)
                and bool(re.fullmatch(r"https?://[^\s]+/v1/hooks/claude-code", url)))
    cmd = handler.get("command")
    return (handler.get("type") == "command" and set(handler) <= {"type", "command", "timeout", "async"} and isinstance(cmd, str)
            and bool(_LEGACY_COMMAND.fullmatch(cmd)))


def is_ours(handler: Any) -> bool:
    """True for a handler hivestream installed: it carries hivestream's marker (or is exactly
    what an earlier version wrote); a URL or command of the same shape is not enough."""
    if not isinstance(handler, dict):
        return False
    headers, cmd = handler.get("headers"), handler.get("command")
    if handler.get("type") == "http" and isinstance(headers, dict) and MARK_HEADER in headers:
        return True
    if handler.get("type") == "command" and isinstance(cmd, str) and MARK_ARG in cmd.split():
        return True
    return _legacy(handler)


def is_knowhub(handler: Any) -> bool:
    """True for hivestream's KnowHub reminder hook: a ``command`` handler of hivestream's running
    ``hook session-start`` (:func:`session_start_handler`)."""
    if not (is_ours(handler) and handler.get("type") == "command"):
        return False
    words = str(handler.get("command")).split()
    return any(a == "hook" and b == KNOWHUB_HOOK for a, b in itertools.pairwise(words))


def is_capture(handler: Any) -> bool:
    """True for hivestream's capture hooks: ours and not the KnowHub reminder."""
    return is_ours(handler) and not is_knowhub(handler)


KNOWHUB_HOOK = "session-start"
"""The ``hivestream hook`` word of the KnowHub reminder (:mod:`hivestream.hooks.knowhub_reminder`)."""


def session_start_handler(exe: str, timeout_s: int = 10) -> dict[str, Any]:
    """The ``SessionStart`` command hook printing the KnowHub start-of-task reminder (``exe hook
    session-start`` with hivestream's marker argument; synchronous, since its output is the context)."""
    return {"type": "command", "command": f"{_quote(exe)} hook {KNOWHUB_HOOK} {MARK_ARG}", "timeout": timeout_s}


def http_handler(url: str, runtime: str, timeout_s: int = 5, *, token: bool = True) -> dict[str, Any]:
    """A Claude Code ``http`` hook posting to ``url/v1/hooks/runtime`` with hivestream's marker
    header and, with ``token``, the bearer token from ``$HIVESTREAM_INGEST_TOKEN`` (listed in
    ``allowedEnvVars`` so Claude Code expands it). Without ``token`` no ``Authorization`` header at
    all: Claude Code would send ``Bearer `` with nothing after it when the variable is unset."""
    h: dict[str, Any] = {"type": "http", "url": f"{url.rstrip('/')}/v1/hooks/{runtime}",
                         "headers": {**(_BEARER if token else {}), MARK_HEADER: "installed by hivestream hooks install"}}
    if token:
        h["allowedEnvVars"] = [TOKEN_ENV]
    h["timeout"] = timeout_s
    return h


def command_handler(exe: str, runtime: str, url: str, *, run_async: bool, timeout_s: int = 10) -> dict[str, Any]:
    """A ``command`` hook running ``exe hook runtime --url url`` with hivestream's marker
    argument; with ``run_async`` (Claude Code) ``"async": true`` and ``--detach``, since Claude
    Code ``-p`` ends a backgrounded hook when it exits."""
    detach = " --detach" if run_async else ""
    h: dict[str, Any] = {"type": "command", "command": f"{_quote(exe)} hook {runtime} --url {_quote(url)}{detach} {MARK_ARG}",
                         "timeout": timeout_s}
    if run_async:
        h["async"] = True
    return h


def _quote(s: str) -> str:
    return s if re.fullmatch(r"[\w@%+=:,./-]+", s) else "'" + s.replace("'", "'\"'\"'") + "'"


def remove_ours(settings: dict[str, Any], which: Callable[[Any], bool] = is_capture) -> dict[str, Any]:
    """A copy of ``settings`` without hivestream's handlers of one set (``which``: the capture hooks
    by default, :func:`is_knowhub` for the reminder); groups and events left empty by that removal
    are dropped, the user's own entries and hivestream's other set are kept as they are."""
    out = copy.deepcopy(settings)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for g in groups:
            if isinstance(g, dict) and isinstance(g.get("hooks"), list) and any(which(h) for h in g["hooks"]):
                rest = [h for h in g["hooks"] if not which(h)]
                if rest:
                    kept.append({**g, "hooks": rest})
            else:
                kept.append(g)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del out["hooks"]
    return out


def add_ours(settings: dict[str, Any], events: dict[str, str | None], handler_for: dict[str, dict[str, Any]],
             which: Callable[[Any], bool] = is_capture) -> dict[str, Any]:
    """``settings`` with hivestream's handlers (``handler_for[event]``) for ``events``, replacing
    any earlier ones of the same set (``which``, as :func:`remove_ours`).

    Raises:
        ValueError: when ``settings["hooks"]`` exists but is not an object, or an event's value is
            not a list (the user's file is left for them to fix).
    """
    out = remove_ours(settings, which)
    hooks = out.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError("'hooks' must be a JSON object")
    for event, matcher in events.items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ValueError(f"'hooks.{event}' must be a list")
        group: dict[str, Any] = {"hooks": [handler_for[event]]}
        if matcher:
            group = {"matcher": matcher, **group}
        groups.append(group)
    return out


def dumps(settings: dict[str, Any]) -> str:
    """JSON text as written back (2-space indent, key order kept, trailing newline)."""
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n"


_NOTIFY = re.compile(r"^notify\s*=\s*(\[.*\])\s*(#.*)?$")


def _top_level_notify(lines: list[str]) -> int | None:
    for i, ln in enumerate(lines):
        s = ln.strip()
        if s.startswith("["):
            return None
        if _NOTIFY.match(s):
            return i
    return None


def _argv_of(line: str) -> list[str]:
    m = _NOTIFY.match(line.strip())
    if not m:
        return []
    value = tomllib.loads("v = " + m.group(1)).get("v")
    return [x for x in value if isinstance(x, str)] if isinstance(value, list) else []


def _chained(argv: list[str]) -> list[str] | None:
    """The chained program of a hivestream notify argv, ``[]`` when none, ``None`` when not ours."""
    if len(argv) < 3 or argv[1:3] != ["hook", "codex-notify"] or (MARK_ARG not in argv and "hivestream" not in argv[0]):
        return None
    if "--chain" in argv:
        i = argv.index("--chain")
        if i + 1 < len(argv):
            prev = json.loads(argv[i + 1])
            return [x for x in prev if isinstance(x, str)] if isinstance(prev, list) else []
    return []


def set_notify(toml_text: str, exe: str, url: str) -> str:
    """``config.toml`` text with ``notify`` running ``exe hook codex-notify``, chaining a program
    the user already had.

    Raises:
        ValueError: when an existing ``notify`` value spans several lines (left for the user).
    """
    lines = toml_text.splitlines()
    i = _top_level_notify(lines)
    if i is None and re.search(r"(?m)^\s*notify\s*=", toml_text.split("\n[", 1)[0]):
        raise ValueError("config.toml: a multi-line 'notify' value; put it on one line first")
    prev = _argv_of(lines[i]) if i is not None else []
    chained = _chained(prev)
    prev = chained if chained is not None else prev
    argv = [exe, "hook", "codex-notify", "--url", url, MARK_ARG]
    if prev:
        argv += ["--chain", json.dumps(prev)]
    line = "notify = " + json.dumps(argv, ensure_ascii=False)
    if i is not None:
        lines[i] = line
    else:
        lines.insert(0, line)
    return "\n".join(lines) + "\n"


def unset_notify(toml_text: str) -> str:
    """``config.toml`` text with hivestream's ``notify`` removed, the chained program restored."""
    lines = toml_text.splitlines()
    i = _top_level_notify(lines)
    if i is None:
        return toml_text
    chained = _chained(_argv_of(lines[i]))
    if chained is None:
        return toml_text
    if chained:
        lines[i] = "notify = " + json.dumps(chained, ensure_ascii=False)
    else:
        del lines[i]
    return "\n".join(lines) + ("\n" if lines else "")
