"""A bounded memo of a pure function of one string (the redaction and injection checks of KnowHub payloads).

KnowHub payloads repeat their strings: hook and tool names, the same lesson captured by the
gateway and by the backend, a re-sent prompt. The strict redaction and the injection rules are
pure functions of their text, so their results can be kept per text; a memo bounds what it holds
by characters and is emptied when full (no LRU bookkeeping on the hot path). Texts longer than
``max_chars`` are computed every time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

R = TypeVar("R")


class TextMemo(Generic[R]):
    """``fn(text)`` remembered for texts of at most ``max_chars`` characters, up to ``budget_chars`` characters in all.

    ``fn`` must be pure (its result depends on ``text`` alone) and its results must not be mutated
    by callers (they are shared). Thread-safe in the GIL's sense: two threads may both compute and
    store one text, which only moves the bound by a text. Raises what ``fn`` raises.
    """

    def __init__(self, fn: Callable[[str], R], *, max_chars: int = 2_048, budget_chars: int = 4_000_000) -> None:
        """Wrap ``fn``; ``max_chars`` (characters) bounds a remembered text, ``budget_chars`` (characters) all of them."""
        self._fn = fn
        self._max = max_chars
        self._budget = budget_chars
        self._kept: dict[str, R] = {}
        self._chars = 0

    def __call__(self, text: str) -> R:
        """``fn(text)``, from the memo when it holds ``text``."""
        kept = self._kept.get(text, _MISSING)
        if kept is not _MISSING:
            return kept  # type: ignore[return-value]
        result = self._fn(text)
        if len(text) <= self._max:
            if self._chars + len(text) > self._budget:
                self._kept.clear()
                self._chars = 0
            self._kept[text] = result
            self._chars += len(text)
        return result

    @property
    def lookup(self) -> Callable[[str], R | None]:
        """The memo's own lookup, ``text`` → its remembered result or ``None`` (nothing computed), for
        hot loops that call :meth:`__call__` only on a miss; valid for the memo's lifetime."""
        return self._kept.get

    def __len__(self) -> int:
        """Texts held."""
        return len(self._kept)


_MISSING = object()
