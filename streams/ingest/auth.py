"""Bearer tokens of ``hivestream ingest``: one gateway id per token, compared in constant time.

Tokens file (``--tokens-file`` / ``HIVESTREAM_INGEST_TOKENS_FILE``), parsed strictly: each line is
blank, or exactly two whitespace-separated fields ``GATEWAY_ID TOKEN``, optionally followed by a
comment: a comment is a whitespace-separated field that starts with ``#`` and the rest of its line
(so a line may be a comment only). ``TOKEN`` is a plain token of at least :data:`MIN_TOKEN_CHARS`
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

GATEWAY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$")
MIN_TOKEN_CHARS = 16
_HASHED = re.compile(r"^sha256:([0-9a-fA-F]{64})$", re.IGNORECASE)


def hash_token(token: str) -> str:
    """The hashed form of ``token`` for a tokens file: ``sha256:<64 lowercase hex>``."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TokenEntry:
    """One line of a tokens file: the gateway id and the SHA-256 digest (32 bytes) of its token."""

    gateway_id: str
    digest: bytes


def parse_tokens(text: str) -> list[TokenEntry]:
    """Parse a tokens file (the format is this module's).

    Raises:
        ValueError: naming the line number (never the token) for a line without exactly two
            fields, an invalid gateway id, a token holding ``#``, a ``sha256:`` value that is not
            64 hex digits, a plain token shorter than :data:`MIN_TOKEN_CHARS`, or a digest that
            appears twice.
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
        if len(parts) != 2:
            raise ValueError(f"tokens file line {n}: expected 'GATEWAY_ID TOKEN' (two whitespace-separated fields)")
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
        out.append(TokenEntry(gw, digest))
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

    def gateway_for(self, authorization: str | None) -> str | None:
        """The gateway id of an ``Authorization`` header value ``Bearer TOKEN``, or ``None``
        when the header is missing, malformed or the token is unknown."""
        if not authorization:
            return None
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found: str | None = None
        for e in self._entries:  # no early exit: every entry is compared
            if hmac.compare_digest(digest, e.digest):
                found = e.gateway_id
        return found


def is_loopback(host: str) -> bool:
    """True when ``host`` is ``localhost`` or a loopback IP (127.0.0.0/8, ::1); a name or any
    other address (``0.0.0.0`` included) is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
