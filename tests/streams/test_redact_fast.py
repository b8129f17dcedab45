"""The fast redaction path equals the plain rule-by-rule path (streams.redaction.redact).

:func:`~streams.redaction.redact.redact` skips the rules that cannot match a string (the family
gates of :func:`~streams.redaction.rules.families` and each rule's
:meth:`~streams.redaction.rules.Rule.could_match`). These tests compare it with
``_redact_reference`` (every rule on every pass, the code before the fast path), text and counts,
on: the redaction tests' cases, negatives and fragments; every rule's positives and seeded
near-miss mutations of them; random mixes (hypothesis), also with the characters that case-folding
regexes treat specially; and every distinct string of the session files (generated, and the real corpus when present). They also check the skip
conditions directly: whenever a rule's pattern matches the text it is run on (the input or a text
an earlier rule changed), the rule's family gate and its own condition accept that text.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.redaction.redact import _apply_reference, _redact_reference, _redact_strict, redact
from streams.redaction.rules import RULES, families
from tests.streams.test_redact import _FRAGMENTS, CASES, NEGATIVES
from tests.support.kb_hardening import REDACTION_CLASSES
from tests.support.session_sets import SessionSet

# Characters a case-insensitive regex matches across scripts (long s, dotless i, dotted I, Kelvin
# sign), non-ASCII digits (\d matches them, str.isdigit more), and the rules' separators.
_TRICKY = "ſıİK٣²１ \t\n-_:=@/\\.+()[]{}\"'`~0123456789aZk"
_EXTRA_FRAGMENTS = [
    "ſecret=Abc123def456",
    "PAſſWORD: Xy7pQ2mN9k",
    "apı_key=Zx8cV2bN7mQ1",
    "APİ_KEY=Zx8cV2bN7mQ1",
    "toKen is Qm7vX2pL9wRt",
    "Bearer abcdefgh٣",
    "bEaReR Qm7vX2pL9wRt",
    "AUTHORIZATION: Basic YWxpY2U6aHVudGVyMg==",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "c:/USERS/alice/x",
    "C:\\\\Documents and Settings\\\\bob\\\\y",
    "https://user:pa55word@example.com/",
    "tu-602-1790974815667",
    "call-3-1790974815667 +44 20 7946 0958",
    "(415) 555-0134",
    "030/12345678",
    "４２４２ ４２４２ ４２４２ ４２４２",
]


def _checked(text: str, matched: set[int] | None = None) -> tuple[str, dict[str, int]]:
    """The reference path, asserting before each rule that the fast path would not skip a rule
    whose pattern matches the text at that point (the indexes of those rules go to ``matched``)."""
    counts: Counter[str] = Counter()
    for _ in range(8):
        before = sum(counts.values())
        for i, rule in enumerate(RULES):
            if rule.pattern.search(text) is not None:
                if matched is not None:
                    matched.add(i)
                assert families(text) & rule.family, (i, rule.kind, text)
                assert rule.could_match(text), (i, rule.kind, text)
            text = _apply_reference(rule, text, counts)
        if sum(counts.values()) == before:
            break
    return text, {k: n for k, n in counts.items() if n > 0}


def _assert_same(text: str) -> None:
    expected = _checked(text)
    assert expected == _redact_reference(text)
    assert _redact_strict(text) == expected, text
    r = redact(text)
    assert (r.text, r.counts) == expected


def _positives() -> list[str]:
    texts = [c.text for c in CASES] + [s for c in CASES for s in c.secrets]
    texts += [c.text for pos, _neg in REDACTION_CLASSES.values() for c in pos]
    return texts + _EXTRA_FRAGMENTS


def _near_misses(text: str, rnd: random.Random, n: int) -> Iterator[str]:
    """``n`` seeded one-step mutations of ``text``: a character deleted, doubled, case-swapped or
    replaced, a tricky character inserted, the text cut, or glued to a word character."""
    if not text:
        return
    for _ in range(n):
        i = rnd.randrange(len(text))
        op = rnd.randrange(7)
        c = rnd.choice(_TRICKY)
        if op == 0:
            yield text[:i] + text[i + 1 :]
        elif op == 1:
            yield text[:i] + text[i] + text[i:]
        elif op == 2:
            yield text[:i] + text[i].swapcase() + text[i + 1 :]
        elif op == 3:
            yield text[:i] + c + text[i + 1 :]
        elif op == 4:
            yield text[:i] + c + text[i:]
        elif op == 5:
            yield text[:i] if rnd.random() < 0.5 else text[i:]
        else:
            yield "x" + text + "0"


POOL: list[str] = sorted(set(_positives()) | set(NEGATIVES) | set(_FRAGMENTS))


def test_every_rule_matches_in_the_pool() -> None:
    matched: set[int] = set()
    for text in POOL:
        _checked(text, matched)
    assert matched == set(range(len(RULES)))


@pytest.mark.parametrize("text", POOL)
def test_same_result_on_cases_negatives_and_fragments(text: str) -> None:
    _assert_same(text)


def test_same_result_on_near_misses_of_every_positive() -> None:
    rnd = random.Random(20261201)
    mutants = {m for text in _positives() for m in _near_misses(text, rnd, 24)}
    assert len(mutants) > 5_000
    changed = 0
    for m in sorted(mutants):
        _assert_same(m)
        changed += redact(m).text != m
    assert changed > 1_000  # the mutants exercise the rules, not only the gates


_MIX_FRAGMENTS = sorted(set(_FRAGMENTS) | set(_EXTRA_FRAGMENTS))
_NOISE = st.text(alphabet=_TRICKY + "abcXYZxo", max_size=12)
_MIXED = st.lists(st.one_of(st.sampled_from(_MIX_FRAGMENTS), _NOISE), max_size=14).map("".join)


@settings(max_examples=600, deadline=None)
@given(_MIXED)
def test_same_result_on_random_mixes(text: str) -> None:
    _assert_same(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_same_result_on_arbitrary_text(text: str) -> None:
    _assert_same(text)


def _strings(v: Any) -> Iterator[str]:
    if isinstance(v, str):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _strings(x)


def test_same_result_on_every_session_string(sessions: SessionSet) -> None:
    texts: dict[str, None] = {}
    for p in sorted(sessions.root.rglob("*.jsonl")):
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.update(dict.fromkeys(_strings(json.loads(line))))
    assert len(texts) > 5_000
    differing = [t for t in texts if _redact_strict(t) != _redact_reference(t)]
    assert differing == []
