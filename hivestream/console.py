"""Rich output helpers shared by the CLI modules."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text


def table(title: str, cols: list[str], rows: list[tuple[object, ...]]) -> Table:
    """A rich table of ``rows``; cells are plain text (``[hm …]`` is never read as markup)."""
    t = Table(title=title, title_justify="left")
    for c in cols:
        t.add_column(c)
    for r in rows:
        t.add_row(*(Text("" if v is None else str(v)) for v in r))
    return t
