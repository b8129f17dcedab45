"""Bearer tokens of ``hivestream ingest``: one gateway id and its scopes per token, compared in constant time.

Tokens file (``--tokens-file`` / ``HIVESTREAM_INGEST_TOKENS_FILE``), parsed strictly: each line is
blank, or the whitespace-separated fields ``GATEWAY_ID TOKEN [scopes=NAME[,NAME...]]``, optionally
followed by a comment: a comment is a whitespace-separated field that starts with ``#`` and the
rest of its line (so a line may be a comment only). A scope (:class:`Scope`) is what a token may
do; a line without ``scopes=`` has the ``hooks`` scope only (a gateway posting hook events, as
every token did before scopes existed). ``TOKEN`` is a plain token of at least :data:`MIN_TOKEN_CHARS`
characters with no ``#`` in it, or ``sha256:<64 hex>`` (the
SHA-256 of the token, so the file need not hold the secret; the prefix and the hex digits in any
case); anything that starts with ``sha256:`` but is not followed by exactly 64 hex digits is an
error, never a plain token. Only SHA-256 digests are kept in memory; a presented token is hashed
and compared with *every* entry by :func:`hmac.compare_digest`, so the time taken does not depend
on which entry (if any) matches, nor on how much of it matches. Tokens never appear in errors or
logs (errors name the line number only).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from dataclasses import dataclass
from enum import StrEnum

GATEWAY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$")
MIN_TOKEN_CHARS = 16
_HASHED = re.compile(r"^sha256:([0-9a-fA-F]{64})$", re.IGNORECASE)


class Scope(StrEnum):
    """What a bearer of a token may do. New scopes are new members: a tokens file names them the same way."""

    HOOKS = "hooks"
    """Post hook events and KnowHub event lines other than reviews (a gateway, an agent's hooks); never read memory."""
    AGENT = "agent"
    """The agent API: search, submit and read experiences, request an extraction, recall frames (``/api/*`` but review, and ``/mcp``)."""
    REVIEW = "review"
    """Review: list pending experiences, approve or reject one (``/api/pending|approve|reject``, ``experience-reviewed`` events)."""
    READ = "read"
    """Analytics. Serve's read listener keeps its own per-start read token (its note); this scope names the authority in a tokens file."""


DEFAULT_SCOPES = frozenset({Scope.HOOKS})
"""The scopes of a tokens-file line without ``scopes=``."""
LOCAL_SCOPES = frozenset({Scope.HOOKS, Scope.AGENT})
"""The scopes of a request to a loopback server without tokens (the one local user: post hook events, use the agent API)."""

_SCOPES_FIELD = "scopes="


def parse_scopes(text: str) -> frozenset[Scope]:
    """The scopes of a comma-separated list of :class:`Scope` names (``hooks,review``).

    Raises:
        ValueError: for an empty list, an empty or unknown name (the message names the known ones).
    """
    names = text.split(",")
    known = ", ".join(s.value for s in Scope)
    out: set[Scope] = set()
    for name in names:
        try:
            out.add(Scope(name))
        except ValueError:
            raise ValueError(f"unknown scope {name[:40]!r} (known: {known})") from None
    return frozenset(out)


def hash_token(token: str) -> str:
    """The hashed form of ``token`` for a tokens file: ``sha256:<64 lowercase hex>``."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TokenEntry:
    """One line of a tokens file: the gateway id, the SHA-256 digest (32 bytes) of its token and its scopes."""

    gateway_id: str
    digest: bytes
    scopes: frozenset[Scope] = DEFAULT_SCOPES


@dataclass(frozen=True)
class Grant:
    """Who a request is and what it may do: the gateway id and the scopes of its token."""

    gateway_id: str
    scopes: frozenset[Scope]


def parse_tokens(text: str) -> list[TokenEntry]:
    """Parse a tokens file (the format is this module's).

    Raises:
        ValueError: naming the line number (never the token) for a line without two fields (or
            three, the third ``scopes=...``), an invalid gateway id, a token holding ``#``, a
            ``sha256:`` value that is not 64 hex digits, a plain token shorter than
            :data:`MIN_TOKEN_CHARS`, an unknown scope, or a digest that appears twice.
    """
    out: list[TokenEntry] = []
    seen: set[bytes] = set()
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        for i, field in enumerate(parts):  # a comment is a field that starts with '#', and the rest of the line
            if field.startswith("#"):
                parts = parts[:i]
                break
        if not parts:
            continue
        scopes = DEFAULT_SCOPES
        if len(parts) == 3 and parts[2].startswith(_SCOPES_FIELD):
            try:
                scopes = parse_scopes(parts[2][len(_SCOPES_FIELD):])
            except ValueError as e:
                raise ValueError(f"tokens file line {n}: {e}") from None
            parts = parts[:2]
        if len(parts) != 2:
            raise ValueError(f"tokens file line {n}: expected 'GATEWAY_ID TOKEN [scopes=NAME,...]' (whitespace-separated fields)")
        gw, tok = parts
        if not GATEWAY_ID.match(gw):
            raise ValueError(f"tokens file line {n}: invalid gateway id (letters, digits, . _ : @ -; at most 100)")
        if "#" in tok:
            raise ValueError(f"tokens file line {n}: '#' is not allowed in a token (a comment starts a field of its own)")
        if tok[:7].lower() == "sha256:":
            m = _HASHED.match(tok)
            if not m:
                raise ValueError(f"tokens file line {n}: a sha256: token needs exactly 64 hex digits")
            digest = bytes.fromhex(m.group(1))
        elif len(tok) < MIN_TOKEN_CHARS:
            raise ValueError(f"tokens file line {n}: token shorter than {MIN_TOKEN_CHARS} characters")
        else:
            digest = hashlib.sha256(tok.encode("utf-8")).digest()
        if digest in seen:
            raise ValueError(f"tokens file line {n}: this token is already given to another line")
        seen.add(digest)
        out.append(TokenEntry(gw, digest, scopes))
    return out


def load_tokens(text: str) -> list[TokenEntry]:
    """:func:`parse_tokens` for a server about to start: it fails closed.

    Raises:
        ValueError: as :func:`parse_tokens`, and when the file yields no token (an empty or
            comment-only file must not turn authentication off).
    """
    entries = parse_tokens(text)
    if not entries:
        raise ValueError("no token in the tokens file (to run without authentication, on loopback only, "
                         "start without --tokens-file and HIVESTREAM_INGEST_TOKENS_FILE)")
    return entries


class TokenTable:
    """Looks up the gateway of a bearer token (constant time over the whole table)."""

    def __init__(self, entries: list[TokenEntry]) -> None:
        """Args: entries: from :func:`parse_tokens` (may be empty: then nothing authenticates)."""
        self._entries = list(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def grant_for(self, authorization: str | None) -> Grant | None:
        """The gateway id and scopes of an ``Authorization`` header value ``Bearer TOKEN``, or
        ``None`` when the header is missing, malformed or the token is unknown."""
        digest = bearer_digest(authorization)
        if digest is None:
            return None
        found: Grant | None = None
        for e in self._entries:  # no early exit: every entry is compared
            if hmac.compare_digest(digest, e.digest):
                found = Grant(e.gateway_id, e.scopes)
        return found

    def gateway_for(self, authorization: str | None) -> str | None:
        """The gateway id of :meth:`grant_for` (any scope), or ``None``."""
        grant = self.grant_for(authorization)
        return None if grant is None else grant.gateway_id


def bearer_digest(authorization: str | None) -> bytes | None:
    """The SHA-256 digest (32 bytes) of the token of an ``Authorization`` header value ``Bearer
    TOKEN``; ``None`` when the header is missing or not of that form."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def is_loopback(host: str) -> bool:
    """True when ``host`` is ``localhost`` or a loopback IP (127.0.0.0/8, ::1); a name or any
    other address (``0.0.0.0`` included) is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
