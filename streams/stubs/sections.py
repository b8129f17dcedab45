"""Cutting one ``## Section`` out of a Markdown memory file (pure), as NanoClaw's ``archive-section`` does.

A section is its heading line and every line after it up to the next ATX heading of the same or a
higher level (as many ``#`` or fewer), or the end of the file. Lines inside fenced code blocks
(```` ``` ```` or ``~~~``) are never headings. The heading is given as written (``"## Trello API"``);
it matches a line equal to it once trailing whitespace and closing ``#``s are dropped. Line ends are
kept as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*(?:#+[ \t]*)?$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class SectionError(ValueError):
    """The heading is not a Markdown heading, is missing, or occurs more than once (one line saying which)."""


@dataclass(frozen=True, slots=True)
class Cut:
    """A section cut out: its ``title`` (heading text without ``#``), the ``section`` text (heading included) and the ``rest`` of the file."""

    title: str
    section: str
    rest: str


def _parse(line: str) -> tuple[int, str] | None:
    m = _HEADING.match(line.rstrip("\r\n"))
    return (len(m.group(1)), m.group(2).strip()) if m else None


def cut_section(text: str, heading: str) -> Cut:
    """Cut the section headed ``heading`` out of ``text``.

    Raises:
        SectionError: ``heading`` is no ATX heading, or ``text`` holds it zero or several times.
    """
    want = _parse(heading.strip())
    if want is None:
        raise SectionError(f"{heading!r} is not a Markdown heading (give it as written, e.g. \"## Trello API\")")
    lines = text.splitlines(keepends=True)
    fence: str | None = None
    starts: list[int] = []
    level_at: dict[int, int] = {}
    for i, line in enumerate(lines):
        f = _FENCE.match(line)
        if f:
            mark = f.group(1)
            if fence is None:
                fence = mark
            elif mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
            continue
        if fence is not None:
            continue
        h = _parse(line)
        if h is None:
            continue
        level_at[i] = h[0]
        if h == want:
            starts.append(i)
    if not starts:
        raise SectionError(f"no heading {heading.strip()!r} in the memory file")
    if len(starts) > 1:
        raise SectionError(f"the heading {heading.strip()!r} occurs {len(starts)} times (lines {', '.join(str(s + 1) for s in starts)}): "
                           "rename one first")
    start = starts[0]
    end = next((i for i in sorted(level_at) if i > start and level_at[i] <= want[0]), len(lines))
    return Cut(want[1], "".join(lines[start:end]), "".join(lines[:start] + lines[end:]))
