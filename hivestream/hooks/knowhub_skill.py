"""The KnowHub skill guide ``knowhub.md`` (package data; the seed's ``skill/knowhub.md``): when to
search and submit, the tool calls, and a ``curl`` template for every route of the agent API,
rendered with the server's URL and the name of the environment variable that holds the token.
"""

from __future__ import annotations

import re
from importlib.resources import files

URL_MARK = "__KNOWHUB_URL__"
TOKEN_MARK = "__TOKEN_ENV__"
DEFAULT_TOKEN_ENV = "HIVESTREAM_AGENT_TOKEN"
"""The variable the agent-scoped bearer token is read from (the OpenClaw plugin's ``apiTokenEnv`` default)."""

_URL = re.compile(r"https?://[A-Za-z0-9.\-]+(?::\d{1,5})?(?:/[A-Za-z0-9._~\-/]*)?|https?://\[[0-9A-Fa-f:.]+\](?::\d{1,5})?(?:/[A-Za-z0-9._~\-/]*)?")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def skill_text(url: str, token_env: str = DEFAULT_TOKEN_ENV) -> str:
    """``knowhub.md`` with ``url`` (the serve/ingest base URL, trailing ``/`` dropped) and
    ``token_env`` filled in.

    Raises:
        ValueError: ``url`` is not a plain ``http(s)://host[:port][/path]`` (it is pasted into
            shell commands, so no query, credentials or shell characters), or ``token_env`` is
            not a variable name.
    """
    base = url.rstrip("/")
    if not _URL.fullmatch(base):
        raise ValueError(f"the KnowHub URL must be http(s)://host[:port][/path], got {url[:200]!r}")
    if not _ENV.fullmatch(token_env):
        raise ValueError(f"{token_env[:100]!r} is not an environment variable name")
    template = (files("hivestream.hooks") / "knowhub.md").read_text(encoding="utf-8")
    return template.replace(URL_MARK, base).replace(TOKEN_MARK, token_env)
