"""``hivestream hooks install|uninstall claude-code|codex|openclaw``: the file side.

Reads the runtime's configuration, merges with :mod:`hivestream.hooks.config` (pure), and writes it
back atomically (temporary file + rename, mode kept) after copying the previous file to
``<file>.hivestream-backup-<UTC time>``. A symlinked file is followed (the target is edited, the
link kept); a read-only file is one error line and nothing is changed or left behind. Nothing is written when nothing changes (a second install
is a no-op); ``--dry-run`` prints a unified diff instead. Where the files live (``home`` is
``$HOME``, so a test HOME keeps the real one untouched):

* Claude Code: ``$CLAUDE_CONFIG_DIR`` or ``~/.claude`` / ``./.claude`` (``--scope project``),
  ``settings.json``: ``http`` hooks, or ``command`` hooks with ``"async": true`` (``--command``).
  The ``http`` hooks carry the ``Authorization`` header only when ``$HIVESTREAM_INGEST_TOKEN`` is
  set where ``hooks install`` runs or the URL is not loopback; a warning line names a setting of
  the user's (``allowedHttpHookUrls``, ``httpHookAllowedEnvVars``) that would stop them.
* Codex: ``$CODEX_HOME`` or ``~/.codex`` / ``./.codex``, ``hooks.json`` (command hooks) and, for the
  user scope, ``config.toml``'s legacy ``notify``; an uninstall that leaves ``hooks.json`` empty
  removes it.
* OpenClaw: ``~/.openclaw/hooks/hivestream/{HOOK.md,handler.ts}``; the directory is hivestream's,
  so an uninstall removes it whole (backups included, none made).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shutil
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

from hivestream.hooks.claude_policy import blocking_warnings
from hivestream.hooks.config import (
    CLAUDE_EVENTS,
    CODEX_EVENTS,
    TOKEN_ENV,
    add_ours,
    command_handler,
    dumps,
    http_handler,
    remove_ours,
    set_notify,
    unset_notify,
)
from hivestream.hooks.openclaw_template import HANDLER_TS, HOOK_MD, HOOK_NAME, render
from streams.ingest.auth import is_loopback


def hivestream_exe() -> str:
    """Absolute path of the running ``hivestream`` script, else the one on PATH, else ``hivestream``."""
    me = Path(sys.argv[0])
    if me.name == "hivestream" and me.exists():
        return str(me.resolve())
    return shutil.which("hivestream") or "hivestream"


BACKUP_MARK = ".hivestream-backup-"
"""What the name of every copy :func:`_write` keeps of a file it changes contains."""

MANAGED_SETTINGS_DIRS = {"linux": Path("/etc/claude-code"), "darwin": Path("/Library/Application Support/ClaudeCode"),
                         "win32": Path("C:/Program Files/ClaudeCode")}
"""Where Claude Code reads managed (administrator) settings, per platform."""


class _Plan:
    """File changes to make: path → new text (``None``: delete), the paths deleted without a
    backup (hivestream's own files), the directories to remove once empty, and warnings."""

    def __init__(self) -> None:
        self.changes: dict[Path, str | None] = {}
        self.no_backup: set[Path] = set()
        self.dirs: list[Path] = []
        self.warnings: list[str] = []

    def put(self, path: Path, old: str | None, new: str | None) -> None:
        if old != new:
            self.changes[path] = new


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _json_obj(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    obj = json.loads(text)
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: not a JSON object")
    return obj


def _merge_json(plan: _Plan, path: Path, install: bool, events: dict[str, str | None], handlers: dict[str, dict[str, Any]],
                *, drop_empty: bool = False) -> str | None:
    """Plan ``path`` with hivestream's handlers added (or removed); with ``drop_empty`` a file an
    uninstall leaves as ``{}`` is deleted. Returns the file's text as planned (``None``: none)."""
    old = _read(path)
    cur = _json_obj(path, old)
    new_obj = add_ours(cur, events, handlers) if install else remove_ours(cur)
    if old is not None and cur == new_obj:
        return old  # same content: keep the user's formatting
    if old is None and not new_obj:
        return None
    new = None if drop_empty and not install and not new_obj else dumps(new_obj)
    plan.put(path, old, new)
    return new


def _claude_sources(target: Path, text: str | None, scope: str, home: Path) -> list[tuple[str, dict[str, Any]]]:
    """Claude Code's settings sources that bear on the installed hooks: the file being written
    (as planned), the user's settings for a project install, the project's local settings, and
    the managed settings of this platform. A source that is missing or not a JSON object is left out."""
    paths: list[Path] = []
    if scope == "project":
        paths += [_config_dir("CLAUDE_CONFIG_DIR", home, ".claude", "user") / "settings.json", target.with_name("settings.local.json")]
    managed = MANAGED_SETTINGS_DIRS.get(sys.platform)
    if managed is not None:
        paths.append(managed / "managed-settings.json")
        with contextlib.suppress(OSError):
            paths += sorted(p for p in (managed / "managed-settings.d").glob("*.json") if not p.name.startswith("."))
    found: list[tuple[str, dict[str, Any]]] = []
    for name, body in [(str(target), text), *((str(p), None) for p in paths)]:
        try:
            obj = json.loads(body if body is not None else Path(name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(obj, dict):
            found.append((name, obj))
    return found


def _config_dir(env: str, home: Path, name: str, scope: str) -> Path:
    if scope == "project":
        return Path.cwd() / name
    return Path(os.environ[env]) if os.environ.get(env) else home / name


def plan_for(runtime: str, *, install: bool, url: str, scope: str, command: bool, home: Path, exe: str) -> tuple[_Plan, list[str]]:
    """The changes for one runtime and the notes to print.

    Raises:
        ValueError: unknown runtime or scope, a configuration file that is not valid JSON/TOML.
    """
    if scope not in {"user", "project"}:
        raise ValueError("--scope must be user or project")
    plan, notes = _Plan(), []
    if runtime == "claude-code":
        d = _config_dir("CLAUDE_CONFIG_DIR", home, ".claude", scope)
        token = bool(os.environ.get(TOKEN_ENV)) or not is_loopback(urllib.parse.urlsplit(url).hostname or "")
        # the prompt's command hook waits for its answer: it prints the archived sections the memory stubs matched (docs/stubs-live.md)
        hs = {e: (command_handler(exe, "claude-code", url, run_async=e != "UserPromptSubmit", timeout_s=10) if command
                  else http_handler(url, "claude-code", token=token)) for e in CLAUDE_EVENTS}
        text = _merge_json(plan, d / "settings.json", install, CLAUDE_EVENTS, hs)
        if install and not command:
            hook = next(iter(hs.values()))
            plan.warnings += blocking_warnings(_claude_sources(d / "settings.json", text, scope, home), hook["url"], hook.get("allowedEnvVars", []))
            notes.append("Claude Code sends the token from $HIVESTREAM_INGEST_TOKEN; export it where Claude Code runs (needs v2.1.63+ for http hooks)."
                         if token else f"No ${TOKEN_ENV} here: the hooks send no Authorization header (a loopback server without a tokens "
                         f"file needs none); export it and install again for a server with tokens (needs v2.1.63+ for http hooks).")
    elif runtime == "codex":
        d = _config_dir("CODEX_HOME", home, ".codex", scope)
        hs = {e: command_handler(exe, "codex", url, run_async=False, timeout_s=5) for e in CODEX_EVENTS}
        _merge_json(plan, d / "hooks.json", install, CODEX_EVENTS, hs, drop_empty=True)
        if scope == "user":
            cfg = d / "config.toml"
            old = _read(cfg)
            new = set_notify(old or "", exe, url) if install else (unset_notify(old) if old is not None else None)
            if not (old is None and not install):
                plan.put(cfg, old, new)
        if install:
            notes.append("Codex runs hooks.json hooks only once you trust them: start codex, type /hooks and trust the hivestream entries.")
    elif runtime == "openclaw":
        d = (Path.cwd() / "hooks" if scope == "project" else home / ".openclaw" / "hooks") / HOOK_NAME
        for name, tpl in (("HOOK.md", HOOK_MD), ("handler.ts", HANDLER_TS)):
            p = d / name
            plan.put(p, _read(p), render(tpl, url) if install else None)
        if install:
            notes.append(f"Enable it in the gateway: openclaw hooks enable {HOOK_NAME}  (then restart the gateway)")
        elif d.is_dir():
            for p in sorted(d.iterdir()):
                if p.is_symlink() or not p.is_file():
                    continue  # HOOK.md or handler.ts through a link was planned above (its target is backed up)
                if p.name in ("HOOK.md", "handler.ts") or BACKUP_MARK in p.name:
                    plan.changes[p] = None
                    plan.no_backup.add(p)
            plan.dirs.append(d)
            if plan.changes:
                notes.append(f"Disable it in the gateway too: openclaw hooks disable {HOOK_NAME}  (then restart the gateway)")
    else:
        raise ValueError(f"unknown runtime {runtime!r}: claude-code, codex or openclaw")
    return plan, notes


class NotWritable(OSError):
    """A configuration file hivestream must not (or cannot) change: read-only, or its directory is."""


def _write(path: Path, text: str | None, *, backup: bool = True) -> Path:
    """Write ``text`` to ``path`` (``None``: delete it) after a backup (unless ``backup`` is
    false); returns the file changed.

    A symlink is followed: its target is edited (and backed up next to it), the link stays. The
    new text goes to a temporary file in the target's directory, then is renamed over it; on any
    failure the temporary file is removed.

    Raises:
        NotWritable: the file (or, to create it, its directory) is read-only.
        OSError: the write failed (the original file is unchanged).
    """
    real = Path(os.path.realpath(path))
    exists = real.exists()
    if exists and (not os.access(real, os.W_OK) or not real.stat().st_mode & 0o200):
        raise NotWritable(f"{real} is read-only; make it writable (chmod u+w) and run again (nothing was changed)")
    old_mode = real.stat().st_mode & 0o777 if exists else 0o600
    if exists and backup:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        copy, n = real.with_name(f"{real.name}{BACKUP_MARK}{stamp}"), 1
        while copy.exists():
            copy, n = real.with_name(f"{real.name}{BACKUP_MARK}{stamp}-{n}"), n + 1
        shutil.copy2(real, copy)
    if text is None:
        real.unlink()
        return real
    real.parent.mkdir(parents=True, exist_ok=True)
    tmp = real.with_name(f".{real.name}.hivestream-tmp-{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, old_mode)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return real


def apply(runtime: str, *, install: bool, url: str, scope: str, command: bool, dry_run: bool, home: Path) -> int:
    """Install or uninstall; prints what changed (or the diff with ``dry_run``), the plan's
    warnings on stderr. Returns the exit code: 0 done (or nothing to do), 2 on a configuration it
    cannot read or write."""
    try:
        plan, notes = plan_for(runtime, install=install, url=url, scope=scope, command=command, home=home, exe=hivestream_exe())
    except (ValueError, OSError) as e:  # json.JSONDecodeError and tomllib.TOMLDecodeError are ValueErrors
        print(f"error: {e}", file=sys.stderr)
        return 2
    for w in plan.warnings:
        print(w, file=sys.stderr)
    if not plan.changes:
        print(f"{runtime}: nothing to change")
        return 0
    for path, new in plan.changes.items():
        quiet = path in plan.no_backup
        if dry_run:
            if quiet:
                print(f"would remove {path}")
                continue
            old = _read(path)
            diff = difflib.unified_diff((old or "").splitlines(True), (new or "").splitlines(True), f"{path} (now)", f"{path} (after)")
            sys.stdout.writelines(diff)
            continue
        existed = path.exists()
        try:
            real = _write(path, new, backup=not quiet)
        except OSError as e:
            print(f"error: {e if isinstance(e, NotWritable) else f'cannot write {path}: {e.strerror or e}'}", file=sys.stderr)
            return 2
        shown = path if real == Path(os.path.abspath(path)) else f"{real} (through the link {path})"
        kept = " (previous copy kept as .hivestream-backup-*)" if existed and not quiet else ""
        print(f"{'removed' if new is None else 'wrote'} {shown}{kept}")
    if not dry_run:
        for d in plan.dirs:
            with contextlib.suppress(OSError):  # not empty (a file of the user's): it stays
                d.rmdir()
                print(f"removed {d}")
    for n in notes:
        print(n)
    return 0
