"""Privacy redaction of KnowHub experience text before it is written to any topic or table.

In ``strict`` mode (the default) home-directory user names, e-mail addresses, phone numbers and
secrets (API keys, tokens, credentials, private key blocks) are replaced by typed placeholders
``[REDACTED:<kind>]``; ``relaxed`` mode keeps the content. The number of replacements per kind
is reported, and redaction is idempotent: ``redact(redact(s).text)`` returns the same text with
no replacements.

Source: the seed's ``redactSensitiveInfo`` (the KnowHub integration design (docs/design.md#sources), 数据脱敏), which
replaced ``/Users/<name>``, e-mail addresses, ``ddd-ddd-dddd`` phone numbers and
``sk-[a-zA-Z0-9]{32,}`` keys with untyped markers; this module widens each rule and adds the
providers' documented token formats (see :class:`PiiKind`).

Rules run in a fixed order, most specific first: private key blocks, then provider tokens,
then generic credentials (``Bearer``, ``Authorization``, URL user info, ``NAME_TOKEN=value``,
then a credential named in prose), then home paths, e-mail addresses, card numbers and, last,
phone numbers — so that the digits inside a key
are never read as a phone number. A placeholder is never matched by any rule, and a pass is
repeated until it replaces nothing, which makes the result a fixed point (a replacement can
change a neighbour's context, e.g. ``alice@example.com/home/bob``).

The rules are in :mod:`streams.redaction.rules`. A pass skips the rules that cannot match
the text (most strings are short and match none): three family gates and each rule's own
literals / trigger decide that, cheaper than the rules' scans; the result is the same as running
every rule (``_redact_reference``, checked by ``tests/streams/test_redact_fast.py``).

Deliberately not detected (precision over recall, or out of scope): personal names, postal
addresses, IP addresses, IBANs / social-security numbers, card numbers outside the 2–6 IIN
ranges or failing the Luhn check, a number that is a card's by chance (a 13–19-digit id starting
with 2–6 that passes Luhn, one in ten of them, is replaced); ``~user`` paths and shell
prompts (``alice@laptop:~$``, no TLD); phone numbers without separators (``4155550134``) or
without a trunk ``0`` outside North America (``612 34 56 78``) or with an ``00`` international
prefix; percent-encoded or obfuscated e-mail addresses; credentials without a known prefix or a
credential-like name (``curl -u user:pw``; ``--password hunter2`` is kept only because the value
is short), named values that do not read as random (``password is hunter``, ``the secret is
v2-2024-final``), digit-free or letter-free assigned values, assigned values longer than 4096 characters, and ``Bearer`` tokens without a
digit. Known over-redaction: any ``/Users/<x>`` or ``/home/<x>`` path root (also in docs),
``123 456 7890``-shaped number runs, ``01 02 03 04 05``-shaped runs, example credentials in docs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from streams.model.text_memo import TextMemo
from streams.redaction.rules import PLACEHOLDER_RE, RULES, Family, PiiKind, Rule, families, placeholder

__all__ = [
    "PLACEHOLDER_RE",
    "PiiKind",
    "Redacted",
    "RedactionMode",
    "placeholder",
    "redact",
    "redact_fields",
    "strict_redaction",
]


class RedactionMode(StrEnum):
    """How much of an experience's text is kept (the seed's ``privacyMode``).

    ``strict`` (default): sensitive substrings are replaced by typed placeholders.
    ``relaxed``: the text is kept verbatim.
    """

    STRICT = "strict"
    RELAXED = "relaxed"


@dataclass(frozen=True)
class Redacted:
    """The result of :func:`redact`.

    ``text``: the redacted text (the input itself in relaxed mode).
    ``counts``: kind value (:class:`PiiKind`) → number of replacements, only kinds with a
    count > 0 (empty when nothing was replaced or in relaxed mode).
    """

    text: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Total number of replacements over all kinds (0 in relaxed mode)."""
        return sum(self.counts.values())


_MAX_PASSES: Final = 8
_RELAXED: Final = RedactionMode.RELAXED


@dataclass(frozen=True)
class _Compiled:
    """A rule with what its replacement needs, computed once at import."""

    index: int
    rule: Rule
    family: int
    kind: str
    marker: str
    has_secret: bool


_COMPILED: Final = tuple(
    _Compiled(i, r, int(r.family), r.kind.value, placeholder(r.kind), "secret" in r.pattern.groupindex) for i, r in enumerate(RULES)
)
# Bit mask of families (every combination) -> the rules of those families, in rule order.
_BY_MASK: Final = {mask: tuple(c for c in _COMPILED if c.family & mask) for mask in range(1 << len(Family))}


def _replace(c: _Compiled, text: str, counts: Counter[str]) -> str:
    """``text`` with the accepted matches of ``c``'s pattern replaced (``text`` itself when none is).

    The same result as ``re.sub`` with the reference's replacement function: matches are found
    left to right without overlap, a rejected match is kept as it is."""
    rule = c.rule
    pieces: list[str] | None = None
    last = 0
    for m in rule.pattern.finditer(text):
        if rule.accept is not None and not rule.accept(m):
            continue
        counts[c.kind] += 1
        start, end = m.span("secret") if c.has_secret and m.start("secret") >= 0 else m.span()
        if pieces is None:
            pieces = []
        pieces.append(text[last:start])
        pieces.append(c.marker)
        last = end
    if pieces is None:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def _pass(text: str, mask: int, counts: Counter[str]) -> tuple[str, bool]:
    """One pass of the rules in order over ``text``, skipping those that cannot match it; ``mask``
    is ``families(text)``. Returns the new text and whether anything was replaced. The families
    are tested again after each replacement, since the later rules see the changed text."""
    start, replaced = 0, False
    while mask:
        for c in _BY_MASK[mask]:
            if c.index < start or not c.rule.could_match(text):
                continue
            out = _replace(c, text, counts)
            if out is not text:
                text, replaced, start = out, True, c.index + 1
                mask = families(text)
                break
        else:
            break
    return text, replaced


def _redact_strict(text: str) -> tuple[str, dict[str, int]]:
    """Strict redaction by :func:`_pass` until a pass replaces nothing: the redacted text and the
    counts per kind (only kinds > 0); the same result as :func:`_redact_reference` for every input
    (``tests/streams/test_redact_fast.py``)."""
    mask = families(text)
    if not mask:
        return text, {}
    counts: Counter[str] = Counter()
    for _ in range(_MAX_PASSES):
        text, replaced = _pass(text, mask, counts)
        if not replaced:
            break
        mask = families(text)
        if not mask:
            break
    return text, {kind: n for kind, n in counts.items() if n > 0}


def _apply_reference(rule: Rule, text: str, counts: Counter[str]) -> str:
    marker = placeholder(rule.kind)
    has_secret = "secret" in rule.pattern.groupindex

    def repl(m: re.Match[str]) -> str:
        if rule.accept is not None and not rule.accept(m):
            return m.group(0)
        counts[rule.kind.value] += 1
        if has_secret and m.start("secret") >= 0:
            start, end = m.start("secret") - m.start(), m.end("secret") - m.start()
            whole = m.group(0)
            return whole[:start] + marker + whole[end:]
        return marker

    return rule.pattern.sub(repl, text)


def _redact_reference(text: str) -> tuple[str, dict[str, int]]:
    """Strict redaction, every rule in order on every pass (the plain definition that
    :func:`_redact_strict` must equal; kept for the differential test and the benchmark)."""
    counts: Counter[str] = Counter()
    for _ in range(_MAX_PASSES):
        before = sum(counts.values())
        for rule in RULES:
            text = _apply_reference(rule, text, counts)
        if sum(counts.values()) == before:
            break
    return text, {kind: n for kind, n in counts.items() if n > 0}


def redact(text: str, mode: RedactionMode = RedactionMode.STRICT) -> Redacted:
    """Redact one string.

    ``text``: any string (may be empty). ``mode``: :class:`RedactionMode` (a plain ``"strict"`` /
    ``"relaxed"`` string compares equal). Returns :class:`Redacted` with the redacted text and the
    per-kind replacement counts; in relaxed mode the text is returned unchanged with empty counts.

    Pure (the result depends on ``text`` alone; strict results of short texts are remembered in a
    bounded memo) and idempotent: ``redact(redact(s).text)`` returns the same text and
    empty counts, because placeholders are never matched and a pass is repeated until it
    replaces nothing (at most 8 passes; in practice 1 or 2). Raises nothing.

    Source: the seed's ``redactSensitiveInfo`` and the providers' documented token formats
    (see :class:`PiiKind`).
    """
    if mode == _RELAXED:
        return Redacted(text, {})
    out, counts = strict_redaction(text)
    return Redacted(out, dict(counts))


def _strict_result(text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    out, counts = _redact_strict(text)
    return out, tuple(counts.items())


strict_redaction: Final[TextMemo[tuple[str, tuple[tuple[str, int], ...]]]] = TextMemo(_strict_result)
"""``strict_redaction(text)`` → ``(redacted text, ((kind, count), ...))``: :func:`redact` in strict mode without
the :class:`Redacted` wrapper (for walks over many strings, :mod:`streams.redaction.scrub`), remembered per text
(a KnowHub payload repeats its tool names, hook names and lesson texts: about three calls in four hit on the
generated KnowHub backlog) within :class:`~streams.model.text_memo.TextMemo`'s bounds. Raises nothing."""


def redact_fields(fields: Mapping[str, str], mode: RedactionMode = RedactionMode.STRICT) -> tuple[dict[str, str], dict[str, int]]:
    """Redact several string fields (e.g. an experience's ``title``, ``problem``, ``solution``).

    ``fields``: field name → text. Returns ``(redacted fields, counts)``: a new dict with the same
    keys in the same order, each value passed through :func:`redact`, and the per-kind counts
    summed over all fields (only kinds > 0). Relaxed mode returns a copy and empty counts.
    Pure; raises nothing.
    """
    out: dict[str, str] = {}
    total: Counter[str] = Counter()
    for name, value in fields.items():
        result = redact(value, mode)
        out[name] = result.text
        total.update(result.counts)
    return out, {kind: n for kind, n in total.items() if n > 0}
