"""``hivestream hooks install|uninstall claude-code|codex --knowhub``: the MCP server, the start-of-task
reminder and the skill guide, in the files each runtime reads.

What is written (``home`` is ``$HOME``; a project install writes under the working directory):

* Claude Code: the MCP server in ``$CLAUDE_CONFIG_DIR/.claude.json`` or ``~/.claude.json``
  (``mcpServers``, the user scope ``claude mcp add --scope user`` writes), or ``./.mcp.json``
  (``--scope project``); the ``SessionStart`` command hook ``hivestream hook session-start`` in the
  ``settings.json`` the capture hooks use; the skill guide in ``skills/knowhub/SKILL.md`` under
  ``~/.claude`` (or ``./.claude``).
* Codex: ``[mcp_servers.hivestream]`` in ``config.toml`` (``$CODEX_HOME`` or ``~/.codex``, or
  ``./.codex``); the ``SessionStart`` hook in ``hooks.json`` beside it (Codex runs it once the user
  trusts it in ``/hooks``); the skill guide in ``~/.agents/skills/knowhub/SKILL.md`` (or
  ``./.agents/skills/``), where Codex reads skills.

The merges are :mod:`hivestream.hooks.knowhub_config` and :func:`hivestream.hooks.config.add_ours`
(the reminder is a set of its own, so the capture hooks' install and uninstall leave it); the files
are written like every installer's (:func:`hivestream.hooks.install._write`: backed up, atomically,
symlinks followed, nothing when nothing changes). The skill guide is hivestream's file, marked as such
in its text: replaced or removed without a backup, and never written over a ``SKILL.md`` without
that mark. The MCP entry carries the bearer header (``bearer_token_env_var``) only when
``$HIVESTREAM_AGENT_TOKEN`` is set where the install runs or the server is not on loopback.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import sys
import urllib.parse
from pathlib import Path

from hivestream.hooks.config import add_ours, dumps, is_knowhub, remove_ours, session_start_handler
from hivestream.hooks.install import NotWritable, _config_dir, _json_obj, _Plan, _read, _write, hivestream_exe
from hivestream.hooks.knowhub_config import SERVER, TOKEN_ENV, mcp_url, merge_claude, merge_codex
from hivestream.hooks.knowhub_skill import skill_text
from streams.ingest.auth import is_loopback

SKILL_MARK = "<!-- written by `hivestream hooks install --knowhub`; `hivestream hooks uninstall --knowhub` removes it -->"
"""The line that makes a ``SKILL.md`` hivestream's (right after the front matter)."""
SESSION_EVENTS: dict[str, str | None] = {"SessionStart": None}


def skill_file(url: str) -> str:
    """The skill guide as written for Claude Code and Codex: :func:`~hivestream.hooks.knowhub_skill.skill_text`
    with :data:`SKILL_MARK` after its front matter.

    Raises:
        ValueError: a URL the guide cannot hold (see ``skill_text``).
    """
    text = skill_text(url, TOKEN_ENV)
    head, sep, body = text.partition("\n---\n")
    return f"{head}{sep}{SKILL_MARK}\n{body}" if sep else f"{SKILL_MARK}\n{text}"


def _paths(runtime: str, scope: str, home: Path) -> tuple[Path, Path, Path]:
    """(the MCP configuration file, the hooks file, the skill file) of ``runtime`` in ``scope``."""
    if runtime == "claude-code":
        d = _config_dir("CLAUDE_CONFIG_DIR", home, ".claude", scope)
        if scope == "project":
            mcp = Path.cwd() / ".mcp.json"
        else:
            mcp = Path(os.environ["CLAUDE_CONFIG_DIR"]) / ".claude.json" if os.environ.get("CLAUDE_CONFIG_DIR") else home / ".claude.json"
        return mcp, d / "settings.json", d / "skills" / "knowhub" / "SKILL.md"
    d = _config_dir("CODEX_HOME", home, ".codex", scope)
    skills = (Path.cwd() if scope == "project" else home) / ".agents" / "skills"
    return d / "config.toml", d / "hooks.json", skills / "knowhub" / "SKILL.md"


def plan_knowhub(runtime: str, *, install: bool, url: str, scope: str, home: Path, exe: str) -> tuple[_Plan, dict[Path, str | None], list[str]]:
    """The changes: (the configuration files' plan, hivestream's own files: path → text or ``None`` to
    delete, notes).

    Raises:
        ValueError: an unknown runtime or scope, a bad URL, a configuration that is not valid
            JSON/TOML or holds an entry named ``hivestream`` that is not hivestream's, a ``SKILL.md``
            hivestream did not write.
    """
    if runtime not in ("claude-code", "codex"):
        raise ValueError(f"--knowhub for {runtime!r}: claude-code, codex or openclaw")
    if scope not in ("user", "project"):
        raise ValueError("--scope must be user or project")
    mcp_path, hooks_path, skill_path = _paths(runtime, scope, home)
    token = install and (bool(os.environ.get(TOKEN_ENV)) or not is_loopback(urllib.parse.urlsplit(url).hostname or ""))
    plan, notes = _Plan(), []
    own: dict[Path, str | None] = {}

    old = _read(mcp_path)
    if runtime == "claude-code":
        cur = _json_obj(mcp_path, old)
        new_obj, said = merge_claude(cur, install=install, url=url, token=token, where=str(mcp_path))
        if new_obj != cur:
            plan.put(mcp_path, old, dumps(new_obj) if new_obj else None)
    else:
        new_text, said = merge_codex(old or "", install=install, url=url, token=token, where=str(mcp_path))
        if new_text != (old or ""):
            plan.put(mcp_path, old, new_text or None)
    notes += said

    old = _read(hooks_path)
    cur = _json_obj(hooks_path, old)
    hook = session_start_handler(exe)
    new_obj = add_ours(cur, SESSION_EVENTS, {"SessionStart": hook}, is_knowhub) if install else remove_ours(cur, is_knowhub)
    if new_obj != cur:
        plan.put(hooks_path, old, dumps(new_obj) if new_obj or runtime == "claude-code" else None)

    existing = _read(skill_path)
    if install:
        if existing is not None and SKILL_MARK not in existing:
            raise ValueError(f"{skill_path} exists and hivestream did not write it; move it away and install again (nothing was changed)")
        text = skill_file(url)
        if existing != text:
            own[skill_path] = text
    elif existing is not None and SKILL_MARK in existing:
        own[skill_path] = None

    if install:
        notes += _install_notes(runtime, scope, url, token, mcp_path)
    return plan, own, notes


def _install_notes(runtime: str, scope: str, url: str, token: bool, mcp_path: Path) -> list[str]:
    auth = (f"The MCP server sends the token of ${TOKEN_ENV} (a token with the agent scope): export it where {runtime} runs."
            if token else f"No ${TOKEN_ENV} here: the MCP server is registered without a token (a loopback server without a tokens file "
                          f"needs none); export it and install again for a server with tokens.")
    if runtime == "claude-code":
        notes = [f"Claude Code: MCP server {SERVER!r} at {mcp_url(url)} in {mcp_path}; its tools are mcp__{SERVER}__kb_search, "
                 f"mcp__{SERVER}__kb_submit, mcp__{SERVER}__kb_content, mcp__{SERVER}__memory_search (allow them with /permissions, "
                 f"or \"mcp__{SERVER}\" in permissions.allow, so the agent is not asked each time).", auth]
        if scope == "project":
            notes.append("Claude Code asks once to trust the servers of .mcp.json (claude mcp reset-project-choices asks again).")
        return notes
    return [f"Codex: [mcp_servers.{SERVER}] at {mcp_url(url)} in {mcp_path}.", auth,
            "Codex runs the SessionStart reminder in hooks.json only once you trust it: start codex, type /hooks and trust it."]


def apply_knowhub(runtime: str, *, install: bool, url: str, scope: str, dry_run: bool, home: Path) -> int:
    """Install or remove the KnowHub parts for ``runtime``; prints what changed (the diff with
    ``dry_run``). Returns the exit code: 0 done (or nothing to do), 2 on a configuration it cannot
    read, merge or write (one line; nothing written when the plan fails)."""
    try:
        plan, own, notes = plan_knowhub(runtime, install=install, url=url, scope=scope, home=home, exe=hivestream_exe())
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not plan.changes and not own:
        print(f"{runtime} --knowhub: nothing to change")
        if not install:
            for n in notes:
                print(n)
        return 0
    if dry_run:
        for path, new in [*plan.changes.items(), *own.items()]:
            old = _read(path)
            sys.stdout.writelines(difflib.unified_diff((old or "").splitlines(True), (new or "").splitlines(True), f"{path} (now)", f"{path} (after)"))
        return 0
    try:
        for path, new in plan.changes.items():
            existed = path.exists()
            real = _write(path, new)
            kept = " (previous copy kept as .hivestream-backup-*)" if existed else ""
            print(f"{'removed' if new is None else 'wrote'} {real}{kept}")
        for path, new in own.items():
            _write(path, new, backup=False)
            print(f"{'removed' if new is None else 'wrote'} {path}")
            if new is None:
                with contextlib.suppress(OSError):  # the skill's directory, when nothing else is in it
                    path.parent.rmdir()
    except OSError as e:
        print(f"error: {e if isinstance(e, NotWritable) else f'cannot write: {e.strerror or e}'}", file=sys.stderr)
        return 2
    for n in notes:
        print(n)
    return 0

