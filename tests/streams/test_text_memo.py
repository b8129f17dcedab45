"""The bounded text memo (streams.model.text_memo) and the two checks it serves: strict redaction and
the injection rules give the same answers from the memo as computed afresh, in any call order."""

from __future__ import annotations

import itertools

from streams.experiences.injection import _RULES, InjectionVerdict, detect_injection
from streams.experiences.injection_text import CONFUSABLES, both_forms
from streams.model.text_memo import TextMemo
from streams.redaction.redact import _redact_strict, redact
from tests.streams.test_injection import HARDENING_NEGATIVE, HARDENING_POSITIVE, NEGATIVE, POSITIVE
from tests.streams.test_redact import CASES, NEGATIVES


def test_a_kept_text_is_not_computed_again_and_a_long_one_always_is() -> None:
    calls: list[str] = []
    memo = TextMemo(lambda t: (calls.append(t), t.upper())[1], max_chars=5, budget_chars=100)
    assert [memo("abc"), memo("abc"), memo("abcdef"), memo("abcdef")] == ["ABC", "ABC", "ABCDEF", "ABCDEF"]
    assert calls == ["abc", "abcdef", "abcdef"]
    assert len(memo) == 1


def test_the_memo_is_emptied_when_its_texts_reach_the_budget() -> None:
    memo = TextMemo(str.upper, max_chars=10, budget_chars=12)
    for t in ("aaaa", "bbbb", "cccc"):
        memo(t)
    assert len(memo) == 3
    memo("dddd")  # 16 characters > 12: emptied first, then kept
    assert len(memo) == 1 and memo("dddd") == "DDDD"


def _redaction_texts() -> list[str]:
    return [c.text for c in CASES] + list(NEGATIVES)


def test_redact_from_the_memo_equals_a_fresh_redaction_and_its_counts_are_not_shared() -> None:
    texts = _redaction_texts()
    assert len(texts) > 50
    for t in texts + texts:  # the second round comes from the memo
        fresh_text, fresh_counts = _redact_strict(t)
        r = redact(t)
        assert (r.text, r.counts) == (fresh_text, fresh_counts), t
        r.counts["mutated"] = 1  # a caller changing its result does not change the next one
    assert all("mutated" not in redact(t).counts for t in texts)


def _verdict_fresh(*texts: str) -> InjectionVerdict:
    """detect_injection as it was before the memo: every text's forms against every rule, names in rule order."""
    both = [both_forms(text) for text in texts if text]
    forms = [one.translate(CONFUSABLES) for one, _ in both]
    line_forms = [lines.translate(CONFUSABLES) if lines is not one else f for (one, lines), f in zip(both, forms, strict=True)]
    hits: list[str] = []
    for rule in _RULES:
        if rule.name not in hits and any(rule.matches(f) for f in (line_forms if rule.lines else forms)):
            hits.append(rule.name)
    return InjectionVerdict(flagged=bool(hits), rules=tuple(hits))


def test_injection_verdicts_from_the_memo_equal_fresh_ones_on_every_case_and_mix() -> None:
    triples = [f for _i, f, _fam in POSITIVE] + [f for _i, f in NEGATIVE]
    singles = [c.text for c in HARDENING_POSITIVE] + [t for _i, t in HARDENING_NEGATIVE]
    flagged = 0
    for fields in triples + triples:
        assert detect_injection(*fields) == _verdict_fresh(*fields), fields
        flagged += _verdict_fresh(*fields).flagged
    rng_mixes = list(itertools.islice(itertools.combinations(singles, 3), 0, 3000, 7))
    for mix in rng_mixes + rng_mixes:  # several flagged texts in one call: the rule order of the union
        assert detect_injection(*mix) == _verdict_fresh(*mix), mix
    assert flagged > 20 and any(len(_verdict_fresh(*m).rules) > 1 for m in rng_mixes)
