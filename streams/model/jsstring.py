"""JavaScript string semantics needed for parity with hive-mind (docs/design.md#frame-prefix-and-dedup-key).

hive-mind computes its content hash in JavaScript, where:

* ``\\s`` in a regular expression and ``String.prototype.trim`` use the same set: the
  ECMAScript *WhiteSpace* and *LineTerminator* code points (ECMA-262 §12.2, §12.3). It differs
  from Python's ``str.strip()`` (which also strips U+001C..U+001F and U+0085 but not U+FEFF)
  and from Python ``re``'s ``\\s``.
* strings are sequences of UTF-16 code units; Node's ``Buffer.from(s, 'utf8')`` (used by
  ``crypto.createHash().update(s)``) encodes every unpaired surrogate as U+FFFD (EF BF BD).
"""

from __future__ import annotations

import re

# ECMA-262 WhiteSpace (TAB, VT, FF, SP, NBSP, ZWNBSP/BOM, Zs category) + LineTerminator
# (LF, CR, LS, PS). The Zs set is that of Unicode 15/16, which Node 20 uses.
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_JS_WS_CLASS = "".join(f"\\u{ord(c):04x}" for c in JS_WHITESPACE)
JS_WS_RE = f"[{_JS_WS_CLASS}]"

_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def js_trim(s: str) -> str:
    """Return ``s`` trimmed as JavaScript's ``String.prototype.trim`` does.

    Args:
        s: any Python string (may contain lone surrogates).

    Returns:
        ``s`` without leading and trailing ECMAScript whitespace (:data:`JS_WHITESPACE`).
    """
    return s.strip(JS_WHITESPACE)


def to_js_utf16(s: str) -> str:
    """``s`` as JavaScript holds it after ``JSON.parse`` of the same text: adjacent high+low
    surrogates combined into one code point, every unpaired surrogate U+FFFD (as Node's UTF-8
    encoder writes it). The result always encodes to UTF-8; a string without surrogates is
    returned as it is."""
    if not _SURROGATE_RE.search(s):
        return s
    units = s.encode("utf-16-le", "surrogatepass")
    return units.decode("utf-16-le", "replace")


def js_utf8(s: str) -> bytes:
    """Encode ``s`` to UTF-8 bytes exactly as Node's ``Buffer.from(s, 'utf8')`` does.

    Args:
        s: any Python string, lone surrogates allowed.

    Returns:
        UTF-8 bytes; each unpaired surrogate becomes EF BF BD (U+FFFD).
    """
    return to_js_utf16(s).encode("utf-8")
