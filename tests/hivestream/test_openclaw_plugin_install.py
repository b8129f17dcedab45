"""``hivestream hooks install|uninstall openclaw --knowhub``: the KnowHub plugin written to OpenClaw's
global plugin root with its skill guide, OpenClaw's configuration merged (backed up, the user's
entries kept), a second install a no-op, uninstall back to what was there, and one clear line for a
configuration it must not rewrite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hivestream.cli.app import app
from hivestream.hooks.knowhub_skill import skill_text
from hivestream.hooks.openclaw_plugin import PLUGIN_ID, SKILL_PATH, apply_plugin, plugin_sources

URL = "http://127.0.0.1:8787"
USER_CONFIG = {"gateway": {"port": 18789}, "plugins": {"allow": ["voice-call"], "entries": {"voice-call": {"enabled": True}}}}
ROUTES = ["/api/search", "/api/submit", "/api/content/", "/api/extract", "/api/pending", "/api/approve/", "/api/reject/", "/api/memory/search"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPENCLAW_STATE_DIR", "OPENCLAW_CONFIG_PATH", "HIVESTREAM_INGEST_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".openclaw").mkdir()
    return tmp_path


def _plugin(home: Path, *, install: bool = True, url: str = URL, dry_run: bool = False) -> int:
    return apply_plugin(install=install, url=url, scope="user", dry_run=dry_run, home=home, env={})


def _tree(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): p.read_text() for p in sorted(d.rglob("*")) if p.is_file()}


def test_install_writes_the_plugin_and_merges_the_config_and_uninstall_restores_it(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = home / ".openclaw" / "openclaw.json"
    cfg.write_text(json.dumps(USER_CONFIG, indent=4))
    assert _plugin(home) == 0
    plugin = home / ".openclaw" / "extensions" / PLUGIN_ID
    assert _tree(plugin) == {**plugin_sources(), SKILL_PATH: skill_text(URL)}
    assert {"openclaw.plugin.json", "package.json", "index.js", "lib/http.js", "lib/redact.js"} <= set(plugin_sources())
    merged = json.loads(cfg.read_text())
    assert merged["gateway"] == USER_CONFIG["gateway"]
    assert merged["plugins"]["entries"] == {"voice-call": {"enabled": True}, PLUGIN_ID: {"enabled": True, "config": {"apiUrl": URL}}}
    assert merged["plugins"]["allow"] == ["voice-call", PLUGIN_ID]
    assert len(list(cfg.parent.glob("openclaw.json.hivestream-backup-*"))) == 1
    skill = (plugin / SKILL_PATH).read_text()
    assert skill.startswith("---\nname: knowhub\n") and f"KNOWHUB={URL}\n" in skill and "$HIVESTREAM_AGENT_TOKEN" in skill
    assert all(r in skill for r in ROUTES) and "__" not in skill.replace("__KNOWHUB", "")
    capsys.readouterr()
    assert _plugin(home) == 0 and "nothing to change" in capsys.readouterr().out  # idempotent
    # the user tunes the entry; a reinstall at another URL keeps the tuning
    tuned = json.loads(cfg.read_text())
    tuned["plugins"]["entries"][PLUGIN_ID]["config"]["reminderMode"] = "start"
    cfg.write_text(json.dumps(tuned))
    assert _plugin(home, url="http://127.0.0.1:9999") == 0
    entry = json.loads(cfg.read_text())["plugins"]["entries"][PLUGIN_ID]
    assert entry == {"enabled": True, "config": {"reminderMode": "start", "apiUrl": "http://127.0.0.1:9999"}}
    assert "KNOWHUB=http://127.0.0.1:9999\n" in (plugin / SKILL_PATH).read_text()
    assert _plugin(home, install=False) == 0
    assert json.loads(cfg.read_text()) == USER_CONFIG
    assert not plugin.exists() and plugin.parent.is_dir()  # OpenClaw's plugin root stays


def test_uninstall_keeps_files_it_did_not_write_and_dry_run_writes_nothing(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _plugin(home, dry_run=True) == 0
    out = capsys.readouterr().out
    assert f"would write {len(plugin_sources()) + 1} plugin file(s)" in out and '"apiUrl": "http://127.0.0.1:8787"' in out
    assert sorted(p.name for p in (home / ".openclaw").iterdir()) == []
    assert _plugin(home) == 0
    cfg = home / ".openclaw" / "openclaw.json"
    assert json.loads(cfg.read_text()) == {"plugins": {"entries": {PLUGIN_ID: {"enabled": True, "config": {"apiUrl": URL}}}}}
    plugin = home / ".openclaw" / "extensions" / PLUGIN_ID
    (plugin / "notes.txt").write_text("mine")
    assert _plugin(home, install=False) == 0
    assert "keeps files hivestream did not write" in capsys.readouterr().out
    assert _tree(plugin) == {"notes.txt": "mine"}
    assert json.loads(cfg.read_text()) == {}


def test_openclaws_state_and_config_variables_are_followed(home: Path, tmp_path: Path) -> None:
    state, cfg = tmp_path / "state", tmp_path / "etc" / "oc.json"
    env = {"OPENCLAW_STATE_DIR": str(state), "OPENCLAW_CONFIG_PATH": str(cfg)}
    assert apply_plugin(install=True, url=URL, scope="user", dry_run=False, home=home, env=env) == 0
    assert (state / "extensions" / PLUGIN_ID / "index.js").is_file() and PLUGIN_ID in json.loads(cfg.read_text())["plugins"]["entries"]
    assert not (home / ".openclaw" / "extensions").exists()


@pytest.mark.parametrize(("text", "why"), [
    ('{\n  // my gateway\n  "gateway": {"port": 18789},\n}\n', "is not plain JSON (OpenClaw reads JSON5"),
    ('{"plugins": ["voice-call"]}', "'plugins' is not an object"),
    ('{"plugins": {"allow": "voice-call"}}', "'plugins.allow' is not a list of plugin ids"),
])
def test_a_config_it_cannot_merge_is_one_line_and_nothing_is_written(home: Path, capsys: pytest.CaptureFixture[str], text: str, why: str) -> None:
    cfg = home / ".openclaw" / "openclaw.json"
    cfg.write_text(text)
    assert _plugin(home) == 2
    err = capsys.readouterr().err
    assert why in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert cfg.read_text() == text and sorted(p.name for p in cfg.parent.iterdir()) == ["openclaw.json"]


def test_the_cli_installs_hook_and_plugin_and_refuses_what_knowhub_cannot_do(home: Path) -> None:
    run = CliRunner().invoke
    r = run(app, ["hooks", "install", "openclaw", "--knowhub", "--url", URL])
    assert r.exit_code == 0, r.output
    assert (home / ".openclaw" / "hooks" / "hivestream" / "handler.ts").is_file()
    assert (home / ".openclaw" / "extensions" / PLUGIN_ID / "index.js").is_file()
    for args, why in ((["gemini", "--knowhub"], "for claude-code, codex or openclaw, not 'gemini'"),
                      (["openclaw", "--knowhub", "--scope", "project"], "user scope only")):
        r = run(app, ["hooks", "install", *args])
        assert r.exit_code == 2 and why in r.output, r.output
    assert not (home / ".claude").exists() and not (Path.cwd() / "hooks" / "hivestream").exists()  # refused before writing anything
    r = run(app, ["hooks", "uninstall", "openclaw", "--knowhub"])
    assert r.exit_code == 0, r.output
    assert not (home / ".openclaw" / "extensions" / PLUGIN_ID).exists() and not (home / ".openclaw" / "hooks" / "hivestream" / "handler.ts").exists()
    assert json.loads((home / ".openclaw" / "openclaw.json").read_text()) == {}


def test_the_skill_guide_refuses_a_url_or_variable_it_would_paste_into_a_shell() -> None:
    assert "KNOWHUB=https://kb.example.com/hub\n" in skill_text("https://kb.example.com/hub/")
    for url in ("http://h/x?a=1", "http://h/$(rm -rf ~)", "ftp://h", "http://user:pw@h"):
        with pytest.raises(ValueError, match="must be http"):
            skill_text(url)
    with pytest.raises(ValueError, match="not an environment variable name"):
        skill_text(URL, "A-B")
