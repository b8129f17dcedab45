"""Value checks of the redaction rules' matches (pure): a match is replaced only when its check
accepts it (see :mod:`streams.redaction.redact` for the rules and :class:`~streams.redaction.redact.PiiKind`
for what each kind covers).

Sources: E.164 (international numbers of at most 15 digits), ISO/IEC 7812-1 (card numbers, the
Luhn check), the providers' credential formats for what a credential value looks like.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "accept_card",
    "accept_email",
    "accept_international",
    "accept_named_secret",
    "accept_national",
    "accept_secret",
    "credential_like",
    "luhn",
]

_SIGNED_DATE: Final = re.compile(r"\+\d{4,6}-\d{2}-\d{2}(?!\d)")
_ZIP4: Final = re.compile(r"\d{5}-\d{4}")
# A value that reads as code (``secret_key = s3_example``, ``token = self.token2``).
_CODE_VALUE: Final = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _digits(m: re.Match[str]) -> int:
    return sum(ch.isdigit() for ch in m.group(0))


def accept_international(m: re.Match[str]) -> bool:
    """E.164 allows at most 15 digits; 8 is the shortest realistic international number. A
    dot-separated number needs 3+ groups, so ``+37.774929`` (a coordinate) is not a phone, and
    ``+1980-02-29`` (an ISO 8601 expanded year) is a date."""
    n = _digits(m)
    if not 8 <= n <= 15 or _SIGNED_DATE.match(m.group(0)):
        return False
    groups = re.findall(r"\d+", m.group(0))
    return not ("." in m.group(0) and len(groups) < 3)


def accept_national(m: re.Match[str]) -> bool:
    """European national numbers with the trunk ``0`` have 9–13 digits (dates have 8); a US
    ZIP+4 code (``02110-1301``) is not a phone."""
    return 9 <= _digits(m) <= 13 and not _ZIP4.fullmatch(m.group(0))


def accept_secret(m: re.Match[str]) -> bool:
    """An assigned credential mixes letters and digits (``token: string``, ``password=hunter``
    are code or prose); an unquoted dotted / underscored identifier after `` = `` is code."""
    value = m.group("secret")
    if not (any(ch.isdigit() for ch in value) and any(ch.isalpha() for ch in value)):
        return False
    code_like = m.group("sep") != m.group("sep").strip() and "q" not in m.groupdict() and ("_" in value or "." in value)
    return not (code_like and _CODE_VALUE.fullmatch(value))


# A value piece: split on separators, a piece of 6+ characters mixing letters and digits reads as random.
_PIECE_SPLIT: Final = re.compile(r"[\-_./:+=~]+")
_DOTTED_OR_SNAKE: Final = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[._][A-Za-z0-9]+)+")
_DATE_OR_VERSION: Final = re.compile(r"v?\d+(?:[.\-/:]\d+)+[a-z]*")


def credential_like(value: str) -> bool:
    """A value named as a secret reads as one: 8–256 characters, letters and digits, and either a
    piece (between ``-_./:+=~``) of 6+ characters mixing letters and digits, or upper case, lower
    case and digits together; not a version or date (``2026-11-30``, ``v1.2.3``), not a dotted or
    ``snake_case`` identifier whose pieces are words (``cl100k_base``, ``self.token2``)."""
    if not 8 <= len(value) <= 256 or _DATE_OR_VERSION.fullmatch(value):
        return False
    if not (any(ch.isdigit() for ch in value) and any(ch.isalpha() for ch in value)):
        return False
    pieces = [p for p in _PIECE_SPLIT.split(value) if p]
    mixed_piece = any(len(p) >= 6 and any(c.isdigit() for c in p) and any(c.isalpha() for c in p) for p in pieces)
    three_classes = any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)
    if _DOTTED_OR_SNAKE.fullmatch(value) and not any(len(p) >= 8 and sum(c.isdigit() for c in p) >= 2 for p in pieces):
        return False
    return mixed_piece or (three_classes and len(value) >= 10)


def accept_named_secret(m: re.Match[str]) -> bool:
    """See :func:`credential_like`."""
    return credential_like(m.group("secret"))


def luhn(digits: str) -> bool:
    """The Luhn (mod 10) check of ISO/IEC 7812-1."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def accept_card(m: re.Match[str]) -> bool:
    """13–19 digits that pass the Luhn check (the pattern fixes the first digit to 2–6)."""
    digits = re.sub(r"\D", "", m.group(0))
    return 13 <= len(digits) <= 19 and luhn(digits)


def accept_email(m: re.Match[str]) -> bool:
    """``git@host`` is an SSH remote, not a personal address."""
    return m.group("local").lower() != "git"
