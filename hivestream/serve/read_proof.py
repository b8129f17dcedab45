"""How a reader and serve's read listener prove to each other that both hold the read token of the
note ``<db>.serve`` (:mod:`hivestream.serve.read_marker`) without the token crossing the socket.

A note outlives its serve (kill -9, a reboot) and a process id is reused, so whatever listens on
the note's port may be another local process. The reader therefore never sends the token: each
request carries a fresh random nonce and an HMAC-SHA256 (RFC 2104) keyed with the token over the
nonce, the method, the path and the body's SHA-256; serve signs each answer the same way over the
nonce, the status and the body. Only the serve that wrote the note can sign, an answer cannot be
replayed for another request (the nonce) and a request's MAC is no answer's (each message starts
with its own label). Standard library only, pure.

Headers: ``X-Hivestream-Nonce: NONCE`` and ``Authorization: Hivestream-HMAC MAC`` on the request,
``X-Hivestream-Proof: MAC`` on the answer (hex digests).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

NONCE_HEADER = "X-Hivestream-Nonce"
PROOF_HEADER = "X-Hivestream-Proof"
SCHEME = "Hivestream-HMAC"
_NONCE = re.compile(r"[0-9a-f]{32,128}")


def new_nonce() -> str:
    """A fresh nonce: 128 random bits as 32 hex digits."""
    return secrets.token_hex(16)


def valid_nonce(nonce: str | None) -> bool:
    """Whether ``nonce`` is one :func:`new_nonce` could have made (32 to 128 lowercase hex digits)."""
    return nonce is not None and _NONCE.fullmatch(nonce) is not None


def _mac(token: str, *parts: str) -> str:
    return hmac.new(token.encode(), "\n".join(parts).encode(), hashlib.sha256).hexdigest()


def request_mac(token: str, nonce: str, method: str, path: str, body: bytes) -> str:
    """The request's MAC (hex): HMAC-SHA256 keyed with ``token`` over the nonce, ``method``, ``path`` and the body's SHA-256."""
    return _mac(token, "hivestream-read-request/1", nonce, method.upper(), path, hashlib.sha256(body).hexdigest())


def answer_mac(token: str, nonce: str, status: int, body: bytes) -> str:
    """The answer's proof (hex): HMAC-SHA256 keyed with ``token`` over the request's nonce, the HTTP status and the body's SHA-256."""
    return _mac(token, "hivestream-read-answer/1", nonce, str(status), hashlib.sha256(body).hexdigest())


def authorization(token: str, nonce: str, method: str, path: str, body: bytes) -> dict[str, str]:
    """The request headers proving the reader holds ``token``: the nonce and the ``Authorization`` MAC."""
    return {NONCE_HEADER: nonce, "Authorization": f"{SCHEME} {request_mac(token, nonce, method, path, body)}"}


def request_proven(token: str, authorization_value: str, nonce: str | None, method: str, path: str, body: bytes) -> bool:
    """Whether ``authorization_value`` (the ``Authorization`` header) is :func:`authorization`'s for this request (constant time)."""
    scheme, _, mac = authorization_value.partition(" ")
    if scheme != SCHEME or nonce is None or not valid_nonce(nonce):
        return False
    return hmac.compare_digest(mac.strip().encode("ascii", "replace"), request_mac(token, nonce, method, path, body).encode())


def answer_proven(token: str, nonce: str, status: int, body: bytes, proof: str | None) -> bool:
    """Whether ``proof`` (the answer's ``X-Hivestream-Proof``) is :func:`answer_mac`'s for this answer (constant time)."""
    if not proof:
        return False
    return hmac.compare_digest(proof.strip().encode("ascii", "replace"), answer_mac(token, nonce, status, body).encode())
