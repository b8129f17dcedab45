"""Text preparation and clause context for the prompt-injection rules (pure).

:func:`normalise` and :func:`line_form` turn a text into the form the rules of
:mod:`streams.experiences.injection` are matched against; :data:`CONFUSABLES` folds look-alike
letters; :func:`clause_words`, :func:`not_descriptive` and :func:`imperative` tell an order aimed
at the reading model from a description (see that module's docstring for why).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

__all__ = ["CONFUSABLES", "WORD_RE", "Guard", "both_forms", "clause_words", "imperative", "line_form", "normalise", "not_descriptive"]

Guard = Callable[[str, re.Match[str]], bool]
"""A rule's context check: ``(normalised text, match) -> counts``."""

# --------------------------------------------------------------------------- normalisation

_INVISIBLE_RE = re.compile("[\u00ad\u034f\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\u3164\ufe00-\ufe0f\ufeff\uffa0]")
_TAG_CHARS: dict[int, str | None] = {cp: chr(cp - 0xE0000) for cp in range(0xE0020, 0xE007F)}
_TAG_CHARS.update({0xE0001: None, 0xE007F: None})
_WHITESPACE_RE = re.compile(r"\s+")

# Look-alike letters NFKC leaves alone (applied by the detector after normalise, lower case only).
CONFUSABLES = str.maketrans(
    {
        "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d",
        "һ": "h", "ӏ": "l", "ɡ": "g", "ο": "o", "α": "a", "ι": "i", "κ": "k", "ν": "v", "ρ": "p", "υ": "u", "χ": "x",
        "\u2018": "'", "\u2019": "'", "\u02bc": "'", "\u2032": "'", "\u201c": '"', "\u201d": '"', "\u2033": '"',
    }
)  # fmt: skip


def _fold(text: str) -> str:
    """NFKC, invisible characters removed, tag characters decoded, casefolded (no whitespace change)."""
    folded = unicodedata.normalize("NFKC", text)
    return _INVISIBLE_RE.sub("", folded).translate(_TAG_CHARS).casefold()


def normalise(text: str) -> str:
    """Return ``text`` in the form the injection rules are matched against.

    Steps: Unicode NFKC (fullwidth letters and symbols become ASCII, ligatures split, NBSP and
    ideographic space become spaces); invisible characters removed (zero-width space, ZWNJ, ZWJ,
    word joiner, BOM, soft hyphen, bidi marks and overrides, variation selectors, Hangul fillers);
    Unicode tag characters U+E0020–U+E007E replaced by the ASCII character they encode; casefold;
    every run of whitespace (spaces, tabs, newlines, other Unicode spaces) collapsed to one space;
    leading/trailing whitespace stripped.

    ``normalise("IGNORE   previous\\ninstructions") == "ignore previous instructions"`` and
    ``normalise("Ignore\\u200b previous") == "ignore previous"``. Pure; raises nothing for any str.
    """
    return _WHITESPACE_RE.sub(" ", _fold(text)).strip()


_HSPACE_RE = re.compile(r"[^\S\n]+")


def _lines(folded: str) -> str:
    folded = folded.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(_HSPACE_RE.sub(" ", line).strip() for line in folded.split("\n"))


def line_form(text: str) -> str:
    """:func:`normalise`, but line breaks kept (each line's other whitespace collapsed): for rules
    that need the start and end of a line, such as a bare ``### system`` header. Pure."""
    return _lines(_fold(text))


def both_forms(text: str) -> tuple[str, str]:
    """``(normalise(text), line_form(text))``, folding the text once (a text without a line break
    has one form). Pure; raises nothing."""
    folded = _fold(text)
    one_line = _WHITESPACE_RE.sub(" ", folded).strip()
    return one_line, (_lines(folded) if "\n" in folded or "\r" in folded else one_line)


# --------------------------------------------------------------------------- clause context

_CLAUSE_BREAK_RE = re.compile(r"[.!?;:,>\"`*()\[\]{}|\u2014\u2013]| - ")
WORD_RE = re.compile(r"[\w']+")

_ADDRESSEE = frozenset({"you", "u", "ya", "thou", "assistant", "ai", "chatbot", "bot", "claude", "chatgpt", "gpt"})
# A verb right after one of these is a description, not an order ("models ignore …", "could leak …").
_DESCRIPTIVE_PREV = frozenset(
    {
        "may", "might", "would", "could", "can", "cannot", "can't", "cant", "does", "did", "doesn't", "didn't", "won't",
        "will", "not", "never", "don't", "dont", "often", "sometimes", "occasionally", "usually", "frequently", "rarely",
        "typically", "still", "models", "model", "llms", "llm", "agents", "agent", "it", "they", "we", "which", "who",
        "attackers", "attacker", "prompts", "injections", "users",
    }
)  # fmt: skip
# "<word> to <verb>" is descriptive after these ("tends to ignore", "tried to leak").
_TO_DESCRIPTIVE = frozenset(
    {
        "tends", "tend", "seem", "seems", "likely", "unlikely", "able", "unable", "how", "trying", "tried", "try", "tries",
        "attempt", "attempts", "attempted", "designed", "used", "meant", "fail", "fails", "failed", "refuse", "refused",
        "refuses", "appears", "appear", "told", "trained", "taught", "supposed", "going", "want", "wants", "wanted",
    }
)  # fmt: skip
# Words that introduce an imperative ("please act as", "then call the tool").
_IMPERATIVE_LEAD = frozenset(
    {
        "please", "pls", "plz", "kindly", "now", "then", "and", "so", "just", "simply", "also", "immediately", "instead",
        "first", "next", "finally", "always", "henceforth", "must", "should", "shall", "hereby", "quickly",
    }
)  # fmt: skip


def clause_words(text: str, start: int) -> list[str]:
    """The words between the last clause break before ``start`` and ``start``."""
    window = text[max(0, start - 80) : start]
    last_break = 0
    for found in _CLAUSE_BREAK_RE.finditer(window):
        last_break = found.end()
    return WORD_RE.findall(window[last_break:])


def not_descriptive(text: str, start: int, *, any_to: bool = False) -> bool:
    """True unless the verb at ``start`` follows a descriptive subject/auxiliary (see module doc)."""
    words = clause_words(text, start)
    if not words or _ADDRESSEE.intersection(words[-3:]):
        return True
    prev = words[-1]
    if prev in _DESCRIPTIVE_PREV:
        return False
    if prev == "to":
        return not (any_to or (len(words) >= 2 and words[-2] in _TO_DESCRIPTIVE))
    return True


def imperative(text: str, start: int) -> bool:
    """True when the verb at ``start`` starts a clause, follows a lead word, or follows "you"."""
    words = clause_words(text, start)
    if not words or _ADDRESSEE.intersection(words[-3:]):
        return True
    return words[-1] in _IMPERATIVE_LEAD
