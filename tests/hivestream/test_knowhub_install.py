"""``hivestream hooks install|uninstall claude-code|codex --knowhub``: the MCP server registered where
each runtime reads it (Claude Code's ``~/.claude.json`` or ``.mcp.json``, Codex's ``config.toml``
merged with its comments kept), the ``SessionStart`` reminder hook, the skill guide; merged and backed
up, a second install a no-op, the user's entries (and an entry of theirs named ``hivestream``) never
touched, and uninstall back to what was there. And the reminder hook itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hivestream.cli.app import app
from hivestream.hooks.config import MARK_ARG, is_capture, is_knowhub
from hivestream.hooks.knowhub_install import SKILL_MARK, apply_knowhub
from hivestream.hooks.knowhub_reminder import GUIDANCE, MAX_CONTEXT_CHARS, START_REMINDER, session_context
from tests.support.serve_harness import REPO_ROOT

URL = "http://127.0.0.1:8787"
CLAUDE_JSON = {"numStartups": 4, "projects": {"/w/p": {"allowedTools": []}}, "mcpServers": {"docs": {"type": "stdio", "command": "docs-mcp"}}}
CODEX_TOML = """# my Codex settings
model = "o4-mini"  # fast enough

[mcp_servers.docs]
command = "docs-mcp"
args = ["--quiet"]

[profiles.deep]
model = "o3"
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "HIVESTREAM_AGENT_TOKEN", "HIVESTREAM_INGEST_TOKEN", "HIVESTREAM_INGEST_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("hivestream.hooks.install.MANAGED_SETTINGS_DIRS", {})
    monkeypatch.setenv("HOME", str(tmp_path))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


def _kh(home: Path, runtime: str, *, install: bool = True, scope: str = "user", url: str = URL) -> int:
    return apply_knowhub(runtime, install=install, url=url, scope=scope, dry_run=False, home=home)


def _tree(d: Path) -> dict[str, Any]:
    """Every file under ``d`` but the backups: its text, or its value for JSON (written back in the installers' own layout)."""
    return {str(p.relative_to(d)): json.loads(p.read_text()) if p.suffix == ".json" else p.read_text()
            for p in sorted(d.rglob("*")) if p.is_file() and "hivestream-backup" not in p.name}


def _session_hooks(settings: Path) -> list[dict[str, Any]]:
    hooks = json.loads(settings.read_text()).get("hooks", {})
    return [h for g in hooks.get("SessionStart", []) for h in g["hooks"]]


def test_claude_code_user_scope_registers_the_server_hook_and_skill_and_uninstall_restores(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / ".claude.json").write_text(json.dumps(CLAUDE_JSON, indent=2))
    (home / ".claude").mkdir()
    user_hook = {"type": "command", "command": "my-start-script"}
    (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": [user_hook]}]}, "model": "opus"}))
    before = _tree(home)
    assert _kh(home, "claude-code") == 0
    cfg = json.loads((home / ".claude.json").read_text())
    assert cfg["mcpServers"] == {"docs": CLAUDE_JSON["mcpServers"]["docs"], "hivestream": {"type": "http", "url": f"{URL}/mcp"}}
    assert cfg["numStartups"] == 4 and cfg["projects"] == CLAUDE_JSON["projects"]
    hooks = _session_hooks(home / ".claude" / "settings.json")
    assert hooks[0] == user_hook and len(hooks) == 2 and is_knowhub(hooks[1]) and not is_capture(hooks[1])
    assert hooks[1]["command"].endswith(f"hook session-start {MARK_ARG}") and "async" not in hooks[1]
    skill = (home / ".claude" / "skills" / "knowhub" / "SKILL.md").read_text()
    assert skill.startswith("---\nname: knowhub\n") and f"---\n{SKILL_MARK}\n" in skill and f"KNOWHUB={URL}\n" in skill
    assert len(list(home.glob(".claude.json.hivestream-backup-*"))) == 1
    out = capsys.readouterr().out
    assert "mcp__hivestream__kb_search" in out and "No $HIVESTREAM_AGENT_TOKEN here" in out
    assert _kh(home, "claude-code") == 0 and "nothing to change" in capsys.readouterr().out
    assert _kh(home, "claude-code", install=False) == 0
    assert _tree(home) == before  # every file as it was (the backups aside), the skill's directory gone
    assert not (home / ".claude" / "skills").exists() or not any((home / ".claude" / "skills").iterdir())


def test_the_capture_hooks_and_the_reminder_install_and_uninstall_apart(home: Path) -> None:
    r = CliRunner().invoke(app, ["hooks", "install", "claude-code", "--knowhub", "--url", URL])
    assert r.exit_code == 0, r.output
    settings = home / ".claude" / "settings.json"
    events = json.loads(settings.read_text())["hooks"]
    assert set(events) == {"UserPromptSubmit", "Stop", "SubagentStop", "PostToolUse", "SessionStart"}
    r = CliRunner().invoke(app, ["hooks", "install", "claude-code", "--url", URL])  # the capture hooks again: the reminder stays
    assert r.exit_code == 0 and len(_session_hooks(settings)) == 1
    r = CliRunner().invoke(app, ["hooks", "uninstall", "claude-code"])
    assert r.exit_code == 0 and set(json.loads(settings.read_text())["hooks"]) == {"SessionStart"}
    r = CliRunner().invoke(app, ["hooks", "uninstall", "claude-code", "--knowhub"])
    assert r.exit_code == 0, r.output
    assert json.loads(settings.read_text()) == {} and not (home / ".claude.json").exists()


def test_claude_code_project_scope_writes_mcp_json_and_sends_the_token_variable_when_set(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIVESTREAM_AGENT_TOKEN", "not-written-anywhere-0123456789")
    assert _kh(home, "claude-code", scope="project") == 0
    work = Path.cwd()
    entry = json.loads((work / ".mcp.json").read_text())["mcpServers"]["hivestream"]
    assert entry == {"type": "http", "url": f"{URL}/mcp", "headers": {"Authorization": "Bearer ${HIVESTREAM_AGENT_TOKEN}"}}
    assert (work / ".claude" / "skills" / "knowhub" / "SKILL.md").is_file() and is_knowhub(_session_hooks(work / ".claude" / "settings.json")[0])
    assert "not-written-anywhere" not in json.dumps(_tree(home))
    assert _kh(home, "claude-code", scope="project", install=False) == 0
    assert not (work / ".mcp.json").exists() and not (work / ".claude" / "skills" / "knowhub").exists()


def test_codex_merges_config_toml_keeping_comments_and_uninstall_gives_it_back(home: Path) -> None:
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(CODEX_TOML)
    assert _kh(home, "codex", url="http://10.0.0.5:8787") == 0  # not loopback: the token's variable is named
    text = (home / ".codex" / "config.toml").read_text()
    assert text.startswith(CODEX_TOML.split("[profiles.deep]")[0]) and 'model = "o4-mini"  # fast enough' in text
    cfg = tomllib.loads(text)
    assert cfg["mcp_servers"] == {"docs": {"command": "docs-mcp", "args": ["--quiet"]},
                                  "hivestream": {"url": "http://10.0.0.5:8787/mcp", "bearer_token_env_var": "HIVESTREAM_AGENT_TOKEN",
                                                 "startup_timeout_sec": 10}}
    assert cfg["profiles"] == {"deep": {"model": "o3"}}
    hooks = json.loads((home / ".codex" / "hooks.json").read_text())["hooks"]["SessionStart"]
    assert is_knowhub(hooks[0]["hooks"][0])
    assert (home / ".agents" / "skills" / "knowhub" / "SKILL.md").read_text().count("KNOWHUB=http://10.0.0.5:8787\n") == 1
    assert _kh(home, "codex", url="http://10.0.0.5:8787") == 0 and (home / ".codex" / "config.toml").read_text() == text  # no-op
    assert _kh(home, "codex", install=False) == 0
    assert (home / ".codex" / "config.toml").read_text() == CODEX_TOML
    assert not (home / ".codex" / "hooks.json").exists() and not (home / ".agents" / "skills" / "knowhub").exists()


@pytest.mark.parametrize("runtime", ["claude-code", "codex"])
def test_an_entry_named_hivestream_that_is_not_ours_is_never_replaced_or_removed(home: Path, runtime: str, capsys: pytest.CaptureFixture[str]) -> None:
    if runtime == "claude-code":
        path, text = home / ".claude.json", json.dumps({"mcpServers": {"hivestream": {"command": "hivestream", "args": ["mcp"]}}})
    else:
        path, text = home / ".codex" / "config.toml", '[mcp_servers.hivestream]\ncommand = "hivestream"\nargs = ["mcp"]\n'
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    before = _tree(home)
    assert _kh(home, runtime) == 2
    err = capsys.readouterr().err
    assert "that hivestream did not write" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert _tree(home) == before  # nothing written: not the hook, not the skill either
    assert _kh(home, runtime, install=False) == 0 and path.read_text() == text
    assert "which hivestream did not write" in capsys.readouterr().out


def test_a_skill_of_the_users_is_left_alone(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = home / ".claude" / "skills" / "knowhub" / "SKILL.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("---\nname: knowhub\ndescription: my own\n---\nmine\n")
    assert _kh(home, "claude-code") == 2 and "hivestream did not write it" in capsys.readouterr().err
    assert _kh(home, "claude-code", install=False) == 0
    assert mine.read_text().endswith("mine\n") and not (home / ".claude.json").exists()


def test_a_config_that_is_not_toml_is_one_line_and_untouched(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = home / ".codex" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_text("model = \n[[broken")
    assert _kh(home, "codex") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {cfg}: not valid TOML") and len(err.strip().splitlines()) == 1
    assert cfg.read_text() == "model = \n[[broken" and sorted(p.name for p in cfg.parent.iterdir()) == ["config.toml"]


def test_the_reminder_is_the_plugins_and_the_hook_prints_it_without_failing() -> None:
    js = (REPO_ROOT / "hivestream" / "hooks" / "openclaw_knowhub" / "lib" / "format.js").read_text()
    consts = dict(re.findall(r"export const (GUIDANCE|START_REMINDER) = `(.*?)`;", js, re.DOTALL))
    assert consts == {"GUIDANCE": GUIDANCE, "START_REMINDER": START_REMINDER}  # the same words as the OpenClaw plugin's
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for stdin in ('{"hook_event_name": "SessionStart", "source": "startup"}', "not json", ""):
        r = subprocess.run([sys.executable, "-m", "hivestream", "hook", "session-start", MARK_ARG], input=stdin, capture_output=True,
                           text=True, timeout=60, env=env)
        assert r.returncode == 0 and r.stderr == ""
        out = json.loads(r.stdout)
        assert out == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": session_context()}}
    assert len(session_context()) < MAX_CONTEXT_CHARS // 5
    assert "kb_search" in session_context() and "kb_submit" in session_context()


def test_dry_run_prints_the_changes_and_writes_nothing(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(CODEX_TOML)
    before = _tree(home)
    assert apply_knowhub("codex", install=True, url=URL, scope="user", dry_run=True, home=home) == 0
    out = capsys.readouterr().out
    assert "+[mcp_servers.hivestream]" in out and f'+url = "{URL}/mcp"' in out and "+name: knowhub" in out and '"SessionStart"' in out
    assert _tree(home) == before and not list(home.rglob("*hivestream-backup*"))
