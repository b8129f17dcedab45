"""Installers that never touch what is not theirs: hivestream's entries are recognised by the
marker it writes, symlinks are followed, a read-only file is one clear error. What they install
costs the runtime nothing it does not need (a matcher on tool hooks, no empty ``Bearer``), a
setting of the user's that would stop the hooks is one warning line, and an uninstall leaves
nothing of hivestream's behind."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from hivestream.hooks.claude_policy import url_allowed
from hivestream.hooks.config import (
    CLAUDE_EVENTS,
    MARK_ARG,
    MARK_HEADER,
    TOKEN_ENV,
    add_ours,
    command_handler,
    http_handler,
    is_ours,
    remove_ours,
)
from hivestream.hooks.install import apply

MINE = {"type": "http", "url": "http://127.0.0.1:8787/v1/hooks/claude-code", "headers": {"X-Team": "me"}, "timeout": 3}
MY_CMD = {"type": "command", "command": "my-tool hook claude-code --url http://x"}
USER = {"hooks": {"Stop": [{"hooks": [MINE]}], "UserPromptSubmit": [{"hooks": [MY_CMD]}]}, "model": "opus"}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", TOKEN_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("hivestream.hooks.install.MANAGED_SETTINGS_DIRS", {})  # the machine's managed settings stay out of it
    (tmp_path / ".claude").mkdir()
    return tmp_path


def _install(home: Path, *, install: bool = True, runtime: str = "claude-code", url: str = "http://127.0.0.1:8787") -> int:
    return apply(runtime, install=install, url=url, scope="user", command=False, dry_run=False, home=home)


def _ours(settings: Path) -> list[dict[str, Any]]:
    """hivestream's handlers in ``settings``."""
    groups = json.loads(settings.read_text())["hooks"].values()
    return [h for gs in groups for g in gs for h in g["hooks"] if is_ours(h)]


def test_entries_are_recognised_by_the_marker_not_the_url() -> None:
    assert MARK_HEADER in http_handler("http://h", "claude-code")["headers"]
    assert MARK_ARG in command_handler("hivestream", "codex", "http://h", run_async=False)["command"].split()
    assert not is_ours(MINE) and not is_ours(MY_CMD)
    hs = {e: http_handler("http://127.0.0.1:8787", "claude-code") for e in CLAUDE_EVENTS}
    assert remove_ours(add_ours(USER, CLAUDE_EVENTS, hs)) == USER


def test_uninstall_keeps_the_users_own_hooks_that_look_like_hivestreams(home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    settings.write_text(json.dumps(USER))
    assert _install(home) == 0 and _install(home, install=False) == 0
    assert json.loads(settings.read_text()) == USER


def test_a_symlinked_settings_file_is_followed(home: Path) -> None:
    real = home / "dotfiles" / "claude-settings.json"
    real.parent.mkdir()
    real.write_text(json.dumps(USER))
    link = home / ".claude" / "settings.json"
    link.symlink_to(real)
    assert _install(home) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    got = json.loads(real.read_text())
    assert any(is_ours(h) for g in got["hooks"]["Stop"] for h in g["hooks"])
    assert list(real.parent.glob("claude-settings.json.hivestream-backup-*"))


def test_a_read_only_settings_file_is_one_clear_error_and_leaves_nothing(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = home / ".claude" / "settings.json"
    settings.write_text(json.dumps(USER))
    settings.chmod(stat.S_IRUSR | stat.S_IRGRP)
    try:
        assert _install(home) == 2
    finally:
        settings.chmod(0o600)
    err = capsys.readouterr().err
    assert "read-only" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert json.loads(settings.read_text()) == USER
    assert sorted(p.name for p in (home / ".claude").iterdir()) == ["settings.json"]  # no temp file, no backup


def test_codex_tool_hooks_start_only_for_the_knowhub_tools(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    assert _install(home, runtime="codex") == 0
    groups = json.loads((home / ".codex" / "hooks.json").read_text())["hooks"]["PostToolUse"]
    matcher = groups[0]["matcher"]  # Codex: a regex (Rust, unanchored) once it has other than [A-Za-z0-9_|]

    def fires(tool: str) -> bool:
        return re.search(matcher, tool) is not None

    assert all(map(fires, ["kb_submit", "kb_search", "kb_content", "mcp__knowhub__kb_submit", "mcp__kb__kb_content"]))
    assert not any(map(fires, ["shell", "exec_command", "apply_patch", "Bash", "mcp__github__create_issue", "kb_list"]))
    assert all("matcher" not in g for e in ("UserPromptSubmit", "Stop") for g in json.loads((home / ".codex" / "hooks.json").read_text())["hooks"][e])


def test_without_a_token_the_http_hooks_send_no_authorization_header(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    settings = home / ".claude" / "settings.json"
    assert _install(home) == 0  # loopback, no token where it runs: serve or ingest without a tokens file
    assert all(set(h["headers"]) == {MARK_HEADER} and "allowedEnvVars" not in h for h in _ours(settings))
    assert f"No ${TOKEN_ENV} here" in capsys.readouterr().out
    monkeypatch.setenv(TOKEN_ENV, "a-token-of-the-user-0123456789")
    assert _install(home) == 0
    assert all(h["headers"] == {"Authorization": f"Bearer ${TOKEN_ENV}", MARK_HEADER: h["headers"][MARK_HEADER]}
               and h["allowedEnvVars"] == [TOKEN_ENV] for h in _ours(settings))
    assert "a-token-of-the-user" not in settings.read_text()  # the name of the variable, never its value
    monkeypatch.delenv(TOKEN_ENV)
    assert _install(home, url="https://ingest.example.com") == 0  # a remote server always wants a token
    assert all("Authorization" in h["headers"] for h in _ours(settings))


@pytest.mark.parametrize(("pattern", "allowed"), [
    ("*", True), ("http://127.0.0.1:8787/*", True), ("http://127.0.0.1:8787", True), ("http://127.0.0.1:*/*", True),
    ("http://*:8787/v1/*", True), ("*://127.0.0.1:8787/v1/hooks/claude-code", True), ("http://127.0.0.1:8787/", False),
    ("http://localhost:8787/*", False), ("https://127.0.0.1:8787/*", False), ("http://127.0.0.1/*", False),
    ("http://127.0.0.1:8787/v2/*", False), ("https://hooks.example.com/*", False)])
def test_allowed_http_hook_url_patterns_read_as_claude_code_reads_them(pattern: str, allowed: bool) -> None:
    assert url_allowed("http://127.0.0.1:8787/v1/hooks/claude-code", pattern) is allowed


def test_a_setting_that_would_stop_the_hooks_is_one_warning_line(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(TOKEN_ENV, "a-token-of-the-user-0123456789")
    settings = home / ".claude" / "settings.json"
    settings.write_text(json.dumps({"allowedHttpHookUrls": ["https://hooks.example.com/*"], "httpHookAllowedEnvVars": ["GITHUB_TOKEN"]}))
    assert _install(home) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("warning: allowedHttpHookUrls") and '"http://127.0.0.1:8787/*"' in err[0]
    assert err[1].startswith("warning: httpHookAllowedEnvVars") and TOKEN_ENV in err[1] and "a-token-of-the-user" not in err[1]
    assert _install(home) == 0 and len(capsys.readouterr().err.strip().splitlines()) == 2  # also when there is nothing to change
    ok = {"allowedHttpHookUrls": ["https://hooks.example.com/*", "http://127.0.0.1:*/*"], "httpHookAllowedEnvVars": ["GITHUB_TOKEN", TOKEN_ENV]}
    settings.write_text(json.dumps(ok))
    assert _install(home) == 0 and capsys.readouterr().err == ""
    monkeypatch.setattr("hivestream.hooks.install.MANAGED_SETTINGS_DIRS", {sys.platform: home / "managed"})
    (home / "managed" / "managed-settings.d").mkdir(parents=True)
    (home / "managed" / "managed-settings.d" / "10-policy.json").write_text(json.dumps({"allowedHttpHookUrls": []}))
    assert _install(home) == 0 and capsys.readouterr().err == ""  # arrays merge: the user's pattern still allows it
    settings.write_text(json.dumps({}))
    (home / "managed" / "managed-settings.json").write_text("{not json")  # unreadable: left out, never a crash
    assert _install(home) == 0
    assert capsys.readouterr().err.startswith("warning: allowedHttpHookUrls (" + str(home / "managed" / "managed-settings.d"))


def test_codex_uninstall_removes_the_hooks_json_it_empties(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    codex = home / ".codex"
    monkeypatch.setenv("CODEX_HOME", str(codex))
    assert _install(home, runtime="codex") == 0 and _install(home, runtime="codex", install=False) == 0
    assert not (codex / "hooks.json").exists()
    mine = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}
    (codex / "hooks.json").write_text(json.dumps(mine))
    assert _install(home, runtime="codex") == 0 and _install(home, runtime="codex", install=False) == 0
    assert json.loads((codex / "hooks.json").read_text()) == mine  # the user's own hook keeps its file


def test_openclaw_uninstall_leaves_nothing_and_says_to_disable_the_hook(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = home / ".openclaw" / "hooks" / "hivestream"
    assert _install(home, runtime="openclaw") == 0 and _install(home, runtime="openclaw", url="http://10.0.0.5:8787") == 0
    assert any(".hivestream-backup-" in p.name for p in d.iterdir())  # the second install kept a copy of the first
    capsys.readouterr()
    assert _install(home, runtime="openclaw", install=False) == 0
    assert not d.exists() and (home / ".openclaw" / "hooks").is_dir()
    assert "openclaw hooks disable hivestream" in capsys.readouterr().out
    assert _install(home, runtime="openclaw") == 0
    (d / "notes.txt").write_text("the user's")
    assert _install(home, runtime="openclaw", install=False) == 0
    assert [p.name for p in d.iterdir()] == ["notes.txt"]  # a file of the user's keeps the directory
