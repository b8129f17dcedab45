"""Decoding a request body by its ``Content-Encoding`` (pure, bounded: a compression bomb stops at the limit).

The ingest server decodes bodies itself, after the token check, instead of aiohttp's parser
(``auto_decompress``), which runs before any handler: there a bad ``deflate`` body, or any ``br``
body without the Brotli package, became aiohttp's plain-text 400 and a logged traceback, with no
dead letter and no token checked.
"""

from __future__ import annotations

import zlib


class BadEncoding(ValueError):
    """A ``Content-Encoding`` this server does not decode, or a body that does not decode with it."""


class DecodedTooLarge(ValueError):
    """The decoded body is over the limit."""


def decode_body(body: bytes, content_encoding: str, limit: int) -> bytes:
    """``body`` decoded by the codings of a ``Content-Encoding`` header (applied last first, RFC 9110 §8.4).

    Args:
        body: the bytes received.
        content_encoding: the header's value (``""``: none); ``identity``, ``gzip``/``x-gzip``,
            ``deflate`` (zlib-wrapped as RFC 9110 says, or raw, as some clients send it).
        limit: the most bytes the decoded body may have.

    Raises:
        BadEncoding: an unsupported coding (``br`` included) or a body that does not decode.
        DecodedTooLarge: over ``limit`` once decoded.
    """
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    for coding in reversed(codings):
        body = _decode(body, coding, limit)
    return body


def _decode(body: bytes, coding: str, limit: int) -> bytes:
    if coding == "identity":
        return body
    if coding in ("gzip", "x-gzip"):
        return _inflate(body, 16 + zlib.MAX_WBITS, limit)
    if coding == "deflate":
        try:
            return _inflate(body, zlib.MAX_WBITS, limit)
        except BadEncoding:
            return _inflate(body, -zlib.MAX_WBITS, limit)
    raise BadEncoding(f"Content-Encoding {coding!r} is not supported (send identity, gzip or deflate)")


def _inflate(body: bytes, wbits: int, limit: int) -> bytes:
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise BadEncoding(f"not {'gzip' if wbits > zlib.MAX_WBITS else 'deflate'} data ({e})") from None
    if len(out) > limit:
        raise DecodedTooLarge(f"over {limit} bytes once decoded")
    if not d.eof:
        raise BadEncoding("the compressed body is incomplete")
    return out
