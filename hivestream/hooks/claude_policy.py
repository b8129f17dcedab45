"""Whether a user's Claude Code settings let the installed ``http`` hooks through (pure).

Two settings can stop them (Claude Code's settings schema, checked in 2.1.197; both arrays merge
across settings sources, user, project, local and managed):

* ``allowedHttpHookUrls``: URL patterns with ``*`` as a wildcard. Once any source sets it, an
  ``http`` hook whose URL matches no pattern is blocked (``[]`` blocks every one).
* ``httpHookAllowedEnvVars``: once set, a hook's ``allowedEnvVars`` is cut down to the names it
  lists, and a variable left out expands to the empty string (the token would be missing: 401).

:func:`url_allowed` reads a pattern as Claude Code does: ``*`` alone allows every URL; otherwise
scheme, host and port are compared apart (``*`` in the host matches any characters, a ``*`` port
or a wildcard host without a port any port, default ports are equal to none), a pattern without a
path allows every path of its origin, and a path (with its query) is matched whole with ``*`` for
any characters. A pattern that is no URL is matched against the whole URL, ``*`` staying within
one path segment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": "80", "https": "443"}
_PATTERN = re.compile(r"(?P<scheme>[A-Za-z*][A-Za-z0-9+.*-]*)://(?P<authority>[^/?#]*)(?P<rest>[^#]*)")


def _glob(pattern: str, star: str) -> str:
    return "".join(star if c == "*" else re.escape(c) for c in pattern)


def _host_port(authority: str) -> tuple[str, str]:
    authority = authority.rpartition("@")[2]
    if authority.startswith("["):
        host, _, after = authority.partition("]")
        return host + "]", after[1:] if after.startswith(":") else ""
    host, colon, port = authority.rpartition(":")
    return (host, port) if colon and (port.isdigit() or port == "*") else (authority, "")


def url_allowed(url: str, pattern: str) -> bool:
    """True when the hook URL ``url`` matches one ``allowedHttpHookUrls`` pattern (see the module)."""
    if pattern == "*":
        return True
    u = urlsplit(url)
    path = u.path + (f"?{u.query}" if u.query else "")
    m = _PATTERN.fullmatch(pattern)
    if m is None:
        return re.fullmatch(_glob(pattern, "[^/]*"), f"{u.scheme}://{u.netloc}{path}") is not None
    scheme = m["scheme"].lower()
    if scheme != "*" and scheme != u.scheme.lower():
        return False
    host, port = _host_port(m["authority"])
    url_host = (u.hostname or "").rstrip(".")
    url_host = f"[{url_host}]" if ":" in url_host else url_host  # an IPv6 host keeps its brackets, as in a URL
    if re.fullmatch(_glob(host.rstrip(".").lower(), "[^/]*"), url_host) is None:
        return False
    if port != "*" and not (port == "" and "*" in host):
        try:
            got = "" if u.port is None or str(u.port) == _DEFAULT_PORTS.get(u.scheme.lower()) else str(u.port)
        except ValueError:
            return False
        if ("" if port == _DEFAULT_PORTS.get(scheme) else port) != got:
            return False
    rest = m["rest"]
    if rest in ("", "/") and not pattern.endswith("/"):
        return True
    return re.fullmatch(_glob(rest, ".*"), path or "/") is not None


def _listed(sources: Iterable[tuple[str, dict[str, Any]]], key: str) -> tuple[list[str], list[str]]:
    """The merged string values of ``key`` and the names of the sources that set it."""
    values: list[str] = []
    where: list[str] = []
    for name, settings in sources:
        v = settings.get(key)
        if isinstance(v, list):
            values += [x for x in v if isinstance(x, str)]
            where.append(name)
    return values, where


def blocking_warnings(sources: list[tuple[str, dict[str, Any]]], hook_url: str, env_vars: list[str]) -> list[str]:
    """One line per setting that would stop the installed hooks, ``[]`` when none does.

    Args:
        sources: ``(where, settings object)`` of every Claude Code settings source found.
        hook_url: the URL the hooks post to (``.../v1/hooks/claude-code``).
        env_vars: the variables the hooks' headers expand (``[]`` when they send no token).
    """
    out: list[str] = []
    patterns, where = _listed(sources, "allowedHttpHookUrls")
    if where and not any(url_allowed(hook_url, p) for p in patterns):
        u = urlsplit(hook_url)
        out.append(f"warning: allowedHttpHookUrls ({', '.join(where)}) matches no pattern for {hook_url}: Claude Code will block "
                   f"the hivestream hooks; add \"{u.scheme}://{u.netloc}/*\" to it")
    allowed, where = _listed(sources, "httpHookAllowedEnvVars")
    missing = [v for v in env_vars if v not in allowed]
    if where and missing:
        out.append(f"warning: httpHookAllowedEnvVars ({', '.join(where)}) leaves out {', '.join(missing)}: Claude Code will send "
                   "the hooks' Authorization header without the token (401); add it to the list")
    return out
