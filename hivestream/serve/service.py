"""``hivestream serve --install-service``: a user service that starts serve at login and restarts it.

* Linux: a systemd user unit ``~/.config/systemd/user/hivestream-serve.service`` (``$XDG_CONFIG_HOME``
  honoured): ``Restart=always``, ``WantedBy=default.target``; enable with ``systemctl --user
  enable --now hivestream-serve``, and ``loginctl enable-linger`` to start it at boot before any
  login (systemd.service(5), systemd.exec(5), systemd.syntax(7) quoting).
* macOS: a launchd agent ``~/Library/LaunchAgents/io.hivestream.serve.plist`` with ``RunAtLoad``
  and ``KeepAlive`` (launchd.plist(5)); load with ``launchctl bootstrap gui/$(id -u) PLIST``.

The unit runs the same ``hivestream`` executable with the same arguments (paths made absolute)
and the same ``HIVESTREAM_*`` settings of the environment (:func:`carried_environment`: the dedup
window, the KnowHub privacy and approval settings and every other one that shapes the tables; a
file built with one window refuses another, so a unit without them would restart in a loop), so
the service serves what the command line would have. Secrets (a name with ``PASSWORD``,
``SECRET``, ``API_KEY`` or ``TOKEN``) are never written into it: their names are returned for the
caller to say so. Pure text builders plus one atomic write.
"""

from __future__ import annotations

import os
import plistlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

UNIT_NAME = "hivestream-serve.service"
LAUNCHD_LABEL = "io.hivestream.serve"
SETTINGS_PREFIX = "HIVESTREAM_"
_SECRET = re.compile(r"PASSWORD|SECRET|API_KEY|TOKEN")
_PASSED_AS_OPTION = {"HIVESTREAM_INGEST_TOKENS_FILE"}  # serve's --tokens-file: already in the command line


@dataclass(frozen=True)
class Installed:
    """What was written and how to start it: the file and the commands to run (one per line)."""

    path: Path
    commands: list[str]
    notes: list[str]


def carried_environment(env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The ``HIVESTREAM_*`` variables of ``env`` the service sets as they are now, and the names of
    those it does not because they hold a secret (sorted)."""
    carried: dict[str, str] = {}
    secret: list[str] = []
    for name in sorted(env):
        if not name.startswith(SETTINGS_PREFIX) or name in _PASSED_AS_OPTION:
            continue
        if _SECRET.search(name):
            secret.append(name)
        else:
            carried[name] = env[name]
    return carried, secret


def _quoted(text: str) -> str:
    """``text`` as one double-quoted word of a unit line (systemd.syntax(7): C-style escapes are resolved inside quotes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


def _systemd_quote(arg: str) -> str:
    """One ``ExecStart`` word (systemd.service(5) "Command lines"): ``%`` and ``$`` doubled, quoted when it needs to be."""
    arg = arg.replace("%", "%%").replace("$", "$$")
    if arg and not any(c in arg for c in ' \t\n\r"\'\\;'):
        return arg
    return _quoted(arg)


def _systemd_path(path: Path) -> str:
    """A path for a setting that takes one path (``WorkingDirectory=``, systemd.exec(5)): written as
    it is, not quoted (quotes would be part of the path: "path is not absolute"), ``%`` doubled
    (specifiers).

    Raises:
        ValueError: for what such a line cannot carry: a newline (it ends the line), a trailing
            backslash (it continues the line), blanks at either end (they are stripped).
    """
    text = str(path)
    if "\n" in text or "\r" in text or text.endswith("\\") or text != text.strip():
        raise ValueError(f"the path {text!r} cannot be a systemd unit's WorkingDirectory= (a newline, a trailing backslash "
                         "or blanks at an end): choose another directory for the DuckDB file")
    return text.replace("%", "%%")


def _systemd_environment(env: dict[str, str]) -> str:
    """``Environment=`` lines (systemd.exec(5)): one quoted assignment each, ``%`` doubled (specifiers)."""
    return "".join(f"Environment={_quoted(f'{name}={value}'.replace('%', '%%'))}\n" for name, value in env.items())


def systemd_unit(argv: list[str], workdir: Path, env: dict[str, str] | None = None) -> str:
    """The unit file text running ``argv`` in ``workdir`` with the variables ``env`` set.

    Raises:
        ValueError: for an empty ``argv``, or a path, argument or value a unit line cannot carry.
    """
    if not argv:
        raise ValueError("no command to run")
    exec_start = " ".join(_systemd_quote(a) for a in argv)
    return (
        "[Unit]\n"
        "Description=hivestream serve: live capture of agent hook events into DuckDB\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"WorkingDirectory={_systemd_path(workdir)}\n"
        f"ExecStart={exec_start}\n"
        "Environment=PYTHONUNBUFFERED=1\n"
        f"{_systemd_environment(env or {})}"
        "Restart=always\n"
        "RestartSec=2\n"
        "KillSignal=SIGTERM\n"
        "TimeoutStopSec=30\n\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def launchd_plist(argv: list[str], workdir: Path, log_file: Path, env: dict[str, str] | None = None) -> bytes:
    """The launchd agent's property list running ``argv`` in ``workdir`` with the variables ``env`` set, output to ``log_file``.

    Raises:
        ValueError: for an empty ``argv``.
    """
    if not argv:
        raise ValueError("no command to run")
    return plistlib.dumps({
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(argv),
        "WorkingDirectory": str(workdir),
        "RunAtLoad": True,
        "KeepAlive": True,
        "ThrottleInterval": 5,
        "EnvironmentVariables": {"PYTHONUNBUFFERED": "1", **(env or {})},
        "StandardOutPath": str(log_file),
        "StandardErrorPath": str(log_file),
    })


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def install(platform: str, argv: list[str], workdir: Path, home: Path, env: dict[str, str] | None = None,
            settings: dict[str, str] | None = None) -> Installed:
    """Write the service for ``platform`` (``linux`` or ``darwin``) running ``argv``.

    Args:
        platform: ``sys.platform``-style name.
        argv: the command (absolute executable and absolute paths).
        workdir: its working directory.
        home: the user's home (``$HOME``).
        env: the environment (``XDG_CONFIG_HOME``).
        settings: the variables the service sets (:func:`carried_environment`'s first part).

    Raises:
        ValueError: for a platform without a supported service manager, or what a unit cannot carry.
        OSError: when the file cannot be written.
    """
    env = env or {}
    if platform.startswith("linux"):
        base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
        path = base / "systemd" / "user" / UNIT_NAME
        _write(path, systemd_unit(argv, workdir, settings).encode())
        return Installed(path, ["systemctl --user daemon-reload", f"systemctl --user enable --now {UNIT_NAME}"],
                         [f"logs: journalctl --user -u {UNIT_NAME} -f",
                          "start at boot, before you log in: loginctl enable-linger \"$USER\"",
                          f"remove: systemctl --user disable --now {UNIT_NAME} && rm {shlex.quote(str(path))}"])
    if platform == "darwin":
        path = home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
        log_file = home / "Library" / "Logs" / "hivestream-serve.log"
        _write(path, launchd_plist(argv, workdir, log_file, settings))
        q = shlex.quote(str(path))
        return Installed(path, [f"launchctl bootstrap gui/$(id -u) {q}"],
                         [f"logs: {log_file}", f"restart: launchctl kickstart -k gui/$(id -u)/{LAUNCHD_LABEL}",
                          f"remove: launchctl bootout gui/$(id -u) {q} && rm {q}"])
    raise ValueError(f"no user service manager supported on {platform!r} (systemd on Linux, launchd on macOS); "
                     "start `hivestream serve` from your session's startup instead")
