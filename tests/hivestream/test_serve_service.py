"""``serve --install-service`` writes a unit systemd accepts for any directory (a space, a quote, a
``%``) and carries what shapes the tables: the ``HIVESTREAM_*`` settings of the environment (never
a secret) and every option, ``--access-log`` included."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hivestream.cli.app import app
from hivestream.serve.service import carried_environment, install, systemd_unit

SETTINGS = {"HIVESTREAM_WINDOW_MS": "1000", "HIVESTREAM_KB_PRIVACY_MODE": "relaxed", "HIVESTREAM_KB_REQUIRE_APPROVAL": "false",
            "HIVESTREAM_MEMORY_TOOL_RULES": 'rules "of" 100% mine'}
SECRET = "sk-do-not-write-me-0123456789"


def test_the_environment_carried_is_hivestream_s_settings_without_secrets() -> None:
    env = {**SETTINGS, "HIVESTREAM_KB_EXTRACTION_API_KEY": SECRET, "HIVESTREAM_KAFKA_SASL_PASSWORD": "pw",
           "HIVESTREAM_INGEST_TOKENS_FILE": "/t", "PATH": "/bin", "HOME": "/h"}
    carried, secret = carried_environment(env)
    assert carried == SETTINGS
    assert secret == ["HIVESTREAM_KAFKA_SASL_PASSWORD", "HIVESTREAM_KB_EXTRACTION_API_KEY"]


def test_a_unit_for_a_directory_with_a_space_is_one_systemd_accepts(tmp_path: Path) -> None:
    work = tmp_path / "my memory's 50%"
    work.mkdir()
    unit = systemd_unit([sys.executable, "-m", "hivestream", "serve", "--db", str(work / "m.duckdb")], work, SETTINGS)
    assert f"\nWorkingDirectory={str(work).replace('%', '%%')}\n" in unit  # as it is: quotes would be part of the path
    assert 'Environment="HIVESTREAM_MEMORY_TOOL_RULES=rules \\"of\\" 100%% mine"' in unit
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("no systemd-analyze here to verify the unit")
    path = tmp_path / "hivestream-serve.service"
    path.write_text(unit)
    r = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)})
    assert "WorkingDirectory" not in r.stderr and "bad unit file setting" not in r.stderr and r.returncode == 0, r.stderr


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_install_service_carries_the_settings_and_every_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, platform: str) -> None:
    work = tmp_path / "a b"
    work.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    for k, v in {**SETTINGS, "HIVESTREAM_KB_EXTRACTION_API_KEY": SECRET}.items():
        monkeypatch.setenv(k, v)
    r = CliRunner().invoke(app, ["serve", "--db", str(work / "m.duckdb"), "--access-log", "--window-ms", "1000",
                                 "--install-service", "--service-platform", platform])
    assert r.exit_code == 0, r.output
    assert "HIVESTREAM_KB_EXTRACTION_API_KEY" in r.output and SECRET not in r.output
    if platform == "linux":
        text = (tmp_path / "cfg" / "systemd" / "user" / "hivestream-serve.service").read_text()
        assert f"WorkingDirectory={work}\n" in text and " --access-log" in text and '"--db" ' not in text
        assert 'Environment="HIVESTREAM_WINDOW_MS=1000"' in text and 'Environment="HIVESTREAM_KB_PRIVACY_MODE=relaxed"' in text
    else:
        plist = plistlib.loads((tmp_path / "home" / "Library" / "LaunchAgents" / "io.hivestream.serve.plist").read_bytes())
        assert "--access-log" in plist["ProgramArguments"] and plist["WorkingDirectory"] == str(work)
        assert {k: plist["EnvironmentVariables"][k] for k in SETTINGS} == SETTINGS
        text = plistlib.dumps(plist).decode()
    assert SECRET not in text


def test_a_directory_a_unit_line_cannot_carry_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="WorkingDirectory"):
        install("linux", ["/bin/hivestream", "serve"], Path("/data/a\nb"), tmp_path, {"XDG_CONFIG_HOME": str(tmp_path)})
    assert list(tmp_path.iterdir()) == []
