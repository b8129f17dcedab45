"""One ``hivestream ingest`` per spool directory: an exclusive lock, a second process
refuses to start with a clear message, and the default spool does not depend on the working
directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hivestream.ingest.server import IngestConfig
from hivestream.ingest.spool import Spool, SpoolInUse, default_spool_dir
from tests.support.ingest_harness import REPO_ROOT


def test_a_locked_spool_refuses_a_second_owner_until_closed(tmp_path: Path) -> None:
    first = Spool(tmp_path / "s", lock=True)
    with pytest.raises(SpoolInUse, match=f"in use by another process \\(pid {os.getpid()}\\).*own --spool-dir"):
        Spool(tmp_path / "s", lock=True)
    assert Spool(tmp_path / "s").records == 0  # reading it (no lock) is still fine
    first.close()
    Spool(tmp_path / "s", lock=True).close()


def test_a_second_ingest_on_the_same_spool_refuses_to_start(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    args = [sys.executable, "-m", "hivestream", "ingest", "--port", "0", "--spool-dir", str(spool), "--bootstrap", "127.0.0.1:9"]
    first = subprocess.Popen(args, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert first.stderr is not None
        for line in first.stderr:
            if "listening on" in line:
                break
        else:
            pytest.fail("the first ingest did not start")
        r = subprocess.run(args, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert f"spool directory {spool} is in use by another process (pid {first.pid})" in r.stderr
    finally:
        first.terminate()
        first.wait(timeout=60)


def test_the_default_spool_is_under_the_users_state_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_spool_dir() == tmp_path / "state" / "hivestream" / "ingest-spool"
    assert IngestConfig().spool_dir == default_spool_dir()
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_spool_dir() == tmp_path / "home" / ".local" / "state" / "hivestream" / "ingest-spool"
    assert default_spool_dir().is_absolute()
