"""Installers that never touch what is not theirs (issue 19): hivestream's entries are recognised
by the marker it writes, symlinks are followed, a read-only file is one clear error."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from hivestream.hooks.config import CLAUDE_EVENTS, MARK_ARG, MARK_HEADER, add_ours, command_handler, http_handler, is_ours, remove_ours
from hivestream.hooks.install import apply

MINE = {"type": "http", "url": "http://127.0.0.1:8787/v1/hooks/claude-code", "headers": {"X-Team": "me"}, "timeout": 3}
MY_CMD = {"type": "command", "command": "my-tool hook claude-code --url http://x"}
USER = {"hooks": {"Stop": [{"hooks": [MINE]}], "UserPromptSubmit": [{"hooks": [MY_CMD]}]}, "model": "opus"}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    (tmp_path / ".claude").mkdir()
    return tmp_path


def _install(home: Path, *, install: bool = True) -> int:
    return apply("claude-code", install=install, url="http://127.0.0.1:8787", scope="user", command=False, dry_run=False, home=home)


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
