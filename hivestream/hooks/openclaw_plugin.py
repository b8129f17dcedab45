"""``hivestream hooks install|uninstall openclaw --knowhub``: the KnowHub plugin for OpenClaw.

The plugin (``openclaw_knowhub/``, package data: ``openclaw.plugin.json``, ``package.json``,
``index.js`` and ``lib/*.js``, plain JavaScript) is copied to OpenClaw's global plugin root,
``$OPENCLAW_STATE_DIR/extensions/hivestream-knowhub/`` (default ``~/.openclaw/extensions/``),
with the skill guide rendered into its ``skills/knowhub/SKILL.md`` (the manifest lists
``skills``). OpenClaw's configuration (``$OPENCLAW_CONFIG_PATH``, default
``<state dir>/openclaw.json``) gets ``plugins.entries.hivestream-knowhub = {"enabled": true,
"config": {"apiUrl": URL}}`` merged in (other keys of that entry kept; the id added to
``plugins.allow`` when the user keeps an allow list), written like every installer here: backed up,
atomically, symlinks followed, nothing when nothing changes. The plugin's own files are hivestream's
and are replaced or removed without backups (a backup beside them would sit in a plugin root).
Uninstall removes the files, their empty directories and the entry, and leaves the rest as it was.

OpenClaw reads ``openclaw.json`` as JSON5; a file with comments or trailing commas is refused with
one line (nothing written), since rewriting it would lose them.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import sys
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from hivestream.hooks.config import dumps
from hivestream.hooks.install import NotWritable, _Plan, _read, _write
from hivestream.hooks.knowhub_skill import DEFAULT_TOKEN_ENV, skill_text

PLUGIN_ID = "hivestream-knowhub"
SKILL_PATH = "skills/knowhub/SKILL.md"


def plugin_sources() -> dict[str, str]:
    """The plugin's files as shipped: relative path (``/``-separated) → text (JavaScript and JSON)."""
    out: dict[str, str] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith((".js", ".json")):
                out[prefix + child.name] = child.read_text(encoding="utf-8")

    walk(files("hivestream.hooks") / "openclaw_knowhub", "")
    return out


def openclaw_paths(home: Path, env: dict[str, str]) -> tuple[Path, Path]:
    """(the plugin's directory, OpenClaw's configuration file) as OpenClaw resolves them:
    ``$OPENCLAW_STATE_DIR`` else ``home/.openclaw``; ``$OPENCLAW_CONFIG_PATH`` else
    ``<state dir>/openclaw.json`` (``~`` expanded against ``home``)."""

    def expand(p: str) -> Path:
        return home / p[2:] if p.startswith("~/") else home if p == "~" else Path(p)

    state = expand(env["OPENCLAW_STATE_DIR"]) if env.get("OPENCLAW_STATE_DIR") else home / ".openclaw"
    config = expand(env["OPENCLAW_CONFIG_PATH"]) if env.get("OPENCLAW_CONFIG_PATH") else state / "openclaw.json"
    return state / "extensions" / PLUGIN_ID, config


def merge_entry(cfg: dict[str, Any], *, install: bool, url: str) -> tuple[dict[str, Any], list[str]]:
    """OpenClaw's configuration with the plugin's entry added (``install``) or removed (pure; ``cfg``
    is not changed), and notes for the user.

    Raises:
        ValueError: ``plugins``, ``plugins.entries``, the entry, its ``config`` or ``plugins.allow``
            has the wrong JSON type.
    """
    out = json.loads(json.dumps(cfg))
    notes: list[str] = []
    plugins = out.get("plugins", {})
    if not isinstance(plugins, dict):
        raise ValueError("'plugins' is not an object")
    entries = plugins.get("entries", {})
    if not isinstance(entries, dict):
        raise ValueError("'plugins.entries' is not an object")
    allow = plugins.get("allow")
    if allow is not None and not (isinstance(allow, list) and all(isinstance(a, str) for a in allow)):
        raise ValueError("'plugins.allow' is not a list of plugin ids")
    if install:
        entry = entries.get(PLUGIN_ID, {})
        if not isinstance(entry, dict) or not isinstance(entry.get("config", {}), dict):
            raise ValueError(f"'plugins.entries.{PLUGIN_ID}' (or its 'config') is not an object")
        entries[PLUGIN_ID] = {**entry, "enabled": True, "config": {**entry.get("config", {}), "apiUrl": url}}
        plugins["entries"] = entries
        if allow is not None and PLUGIN_ID not in allow:
            plugins["allow"] = [*allow, PLUGIN_ID]
        deny = plugins.get("deny")
        if isinstance(deny, list) and PLUGIN_ID in deny:
            notes.append(f"plugins.deny lists {PLUGIN_ID}: remove it there, or OpenClaw will not load the plugin")
        if plugins.get("enabled") is False:
            notes.append("plugins.enabled is false: OpenClaw loads no plugin until it is true")
        out["plugins"] = plugins
        return out, notes
    entries.pop(PLUGIN_ID, None)
    if allow is not None and PLUGIN_ID in allow:
        plugins["allow"] = [a for a in allow if a != PLUGIN_ID]
    if "entries" in plugins:
        if entries:
            plugins["entries"] = entries
        else:
            del plugins["entries"]
    if "plugins" in out:
        if plugins:
            out["plugins"] = plugins
        else:
            del out["plugins"]
    return out, notes


def _config_obj(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        obj = json.loads(text)
    except ValueError:
        raise ValueError(f"{path} is not plain JSON (OpenClaw reads JSON5: comments or trailing commas?); it was not changed. "
                         f"Enable the plugin with `openclaw plugins enable {PLUGIN_ID}` and set "
                         f"plugins.entries.{PLUGIN_ID}.config.apiUrl yourself") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: not a JSON object")
    return obj


def plan_plugin(*, install: bool, url: str, home: Path, env: dict[str, str]) -> tuple[dict[Path, str | None], _Plan, Path, list[str]]:
    """The changes: (plugin files path → new text or None to delete, the configuration change, the
    plugin's directory, notes).

    Raises:
        ValueError: a bad URL, or an OpenClaw configuration that cannot be merged.
    """
    plugin_dir, config_path = openclaw_paths(home, env)
    own: dict[Path, str | None] = {}
    if install:
        for rel, text in plugin_sources().items():
            own[plugin_dir / rel] = text
        own[plugin_dir / SKILL_PATH] = skill_text(url, DEFAULT_TOKEN_ENV)
    else:
        for rel in [*plugin_sources(), SKILL_PATH]:
            if (plugin_dir / rel).exists():
                own[plugin_dir / rel] = None
    own = {p: t for p, t in own.items() if _read(p) != t}
    plan = _Plan()
    old = _read(config_path)
    cur = _config_obj(config_path, old)
    try:
        new_obj, notes = merge_entry(cur, install=install, url=url)
    except ValueError as e:
        raise ValueError(f"{config_path}: {e}") from None
    if new_obj != cur and not (old is None and not new_obj):
        plan.put(config_path, old, dumps(new_obj))
    return own, plan, plugin_dir, notes


def _prune(plugin_dir: Path) -> bool:
    """Remove the empty directories the plugin's files left; True when the plugin directory is gone."""
    for d in sorted((p for p in plugin_dir.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            d.rmdir()
    with contextlib.suppress(OSError):
        plugin_dir.rmdir()
    return not plugin_dir.exists()


def apply_plugin(*, install: bool, url: str, scope: str, dry_run: bool, home: Path, env: dict[str, str] | None = None) -> int:
    """Install or remove the plugin; prints what changed (the diff with ``dry_run``). Returns the exit
    code: 0 done (or nothing to do), 2 on a configuration it cannot read or a file it cannot write."""
    if scope != "user":
        print("error: --knowhub installs the OpenClaw plugin for the user scope only (OpenClaw's global plugin root)", file=sys.stderr)
        return 2
    try:
        own, plan, plugin_dir, notes = plan_plugin(install=install, url=url, home=home, env=dict(os.environ) if env is None else env)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not own and not plan.changes:
        print(f"openclaw --knowhub: nothing to change ({plugin_dir})")
        return 0
    if dry_run:
        for path, new in plan.changes.items():
            old = _read(path)
            sys.stdout.writelines(difflib.unified_diff((old or "").splitlines(True), (new or "").splitlines(True), f"{path} (now)", f"{path} (after)"))
        if own:
            print(f"would {'write' if install else 'remove'} {len(own)} plugin file(s) in {plugin_dir}")
        return 0
    try:
        for path, text in own.items():
            _write(path, text, backup=False)
        for path, new in plan.changes.items():
            old = _read(path)
            real = _write(path, new)
            print(f"wrote {real}" + (" (previous copy kept as .hivestream-backup-*)" if old is not None else ""))
    except OSError as e:
        print(f"error: {e if isinstance(e, NotWritable) else f'cannot write the plugin: {e.strerror or e}'}", file=sys.stderr)
        return 2
    if install:
        print(f"wrote the KnowHub plugin to {plugin_dir} ({len(own)} file(s) changed), apiUrl {url}")
        notes += [f"Restart the gateway (openclaw gateway restart), then check: openclaw plugins inspect {PLUGIN_ID} --runtime --json",
                  f"With a tokens file, export {DEFAULT_TOKEN_ENV} (agent scope) and HIVESTREAM_INGEST_TOKEN (hooks scope) where the gateway runs."]
    elif _prune(plugin_dir):
        print(f"removed the KnowHub plugin ({plugin_dir})")
    else:
        print(f"removed the KnowHub plugin's files; {plugin_dir} keeps files hivestream did not write")
    for n in notes:
        print(n)
    return 0
