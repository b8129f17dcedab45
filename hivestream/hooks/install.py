"""``hivestream hooks install|uninstall claude-code|codex|openclaw``: the file side.

Reads the runtime's configuration, merges with :mod:`hivestream.hooks.config` (pure), and writes it
back atomically (temporary file + rename, mode kept) after copying the previous file to
``<file>.hivestream-backup-<UTC time>``. A symlinked file is followed (the target is edited, the
link kept); a read-only file is one error line and nothing is changed or left behind. Nothing is written when nothing changes (a second install
is a no-op); ``--dry-run`` prints a unified diff instead. Where the files live (``home`` is
``$HOME``, so a test HOME keeps the real one untouched):

* Claude Code: ``$CLAUDE_CONFIG_DIR`` or ``~/.claude`` / ``./.claude`` (``--scope project``),
  ``settings.json``: ``http`` hooks, or ``command`` hooks with ``"async": true`` (``--command``).
* Codex: ``$CODEX_HOME`` or ``~/.codex`` / ``./.codex``, ``hooks.json`` (command hooks) and, for the
  user scope, ``config.toml``'s legacy ``notify``.
* OpenClaw: ``~/.openclaw/hooks/hivestream/{HOOK.md,handler.ts}``.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from hivestream.hooks.config import (
    CLAUDE_EVENTS,
    CODEX_EVENTS,
    add_ours,
    command_handler,
    dumps,
    http_handler,
    remove_ours,
    set_notify,
    unset_notify,
)
from hivestream.hooks.openclaw_template import HANDLER_TS, HOOK_MD, HOOK_NAME, render


def hivestream_exe() -> str:
    """Absolute path of the running ``hivestream`` script, else the one on PATH, else ``hivestream``."""
    me = Path(sys.argv[0])
    if me.name == "hivestream" and me.exists():
        return str(me.resolve())
    return shutil.which("hivestream") or "hivestream"


class _Plan:
    """File changes to make: path → new text (``None``: delete)."""

    def __init__(self) -> None:
        self.changes: dict[Path, str | None] = {}

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


def _merge_json(plan: _Plan, path: Path, install: bool, events: dict[str, str | None], handlers: dict[str, dict[str, Any]]) -> None:
    old = _read(path)
    cur = _json_obj(path, old)
    new_obj = add_ours(cur, events, handlers) if install else remove_ours(cur)
    new = dumps(new_obj)
    if old is not None and _json_obj(path, old) == new_obj:
        return  # same content: keep the user's formatting
    if old is None and not new_obj:
        return
    plan.put(path, old, new)


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
        hs = {e: command_handler(exe, "claude-code", url, run_async=True) if command else http_handler(url, "claude-code") for e in CLAUDE_EVENTS}
        _merge_json(plan, d / "settings.json", install, CLAUDE_EVENTS, hs)
        if install and not command:
            notes.append("Claude Code sends the token from $HIVESTREAM_INGEST_TOKEN; export it where Claude Code runs (needs v2.1.63+ for http hooks).")
    elif runtime == "codex":
        d = _config_dir("CODEX_HOME", home, ".codex", scope)
        hs = {e: command_handler(exe, "codex", url, run_async=False, timeout_s=5) for e in CODEX_EVENTS}
        _merge_json(plan, d / "hooks.json", install, CODEX_EVENTS, hs)
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
    else:
        raise ValueError(f"unknown runtime {runtime!r}: claude-code, codex or openclaw")
    return plan, notes


class NotWritable(OSError):
    """A configuration file hivestream must not (or cannot) change: read-only, or its directory is."""


def _write(path: Path, text: str | None) -> Path:
    """Write ``text`` to ``path`` (``None``: delete it) after a backup; returns the file changed.

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
    if exists:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        backup, n = real.with_name(f"{real.name}.hivestream-backup-{stamp}"), 1
        while backup.exists():
            backup, n = real.with_name(f"{real.name}.hivestream-backup-{stamp}-{n}"), n + 1
        shutil.copy2(real, backup)
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
    """Install or uninstall; prints what changed (or the diff with ``dry_run``). Returns the exit
    code: 0 done (or nothing to do), 2 on a configuration it cannot read."""
    try:
        plan, notes = plan_for(runtime, install=install, url=url, scope=scope, command=command, home=home, exe=hivestream_exe())
    except (ValueError, OSError) as e:  # json.JSONDecodeError and tomllib.TOMLDecodeError are ValueErrors
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not plan.changes:
        print(f"{runtime}: nothing to change")
        return 0
    for path, new in plan.changes.items():
        old = _read(path)
        if dry_run:
            diff = difflib.unified_diff((old or "").splitlines(True), (new or "").splitlines(True), f"{path} (now)", f"{path} (after)")
            sys.stdout.writelines(diff)
            continue
        try:
            real = _write(path, new)
        except OSError as e:
            print(f"error: {e if isinstance(e, NotWritable) else f'cannot write {path}: {e.strerror or e}'}", file=sys.stderr)
            return 2
        shown = path if real == Path(os.path.abspath(path)) else f"{real} (through the link {path})"
        print(f"{'removed' if new is None else 'wrote'} {shown}" + (" (previous copy kept as .hivestream-backup-*)" if old is not None else ""))
    if not dry_run and not install and runtime == "openclaw":
        d = next(iter(plan.changes)).parent
        if d.is_dir() and not any(p for p in d.iterdir() if ".hivestream-backup-" not in p.name):
            print(f"(backups of the removed files stay in {d})")
    for n in notes:
        print(n)
    return 0
