"""``hivestream stubs archive`` and ``hivestream stubs refresh``: the stub lifecycle as the memory-stubs seed runs it.

Thin: the work is :mod:`hivestream.services.stub_lifecycle`'s. Mistakes and failures print one line
on stderr and exit 2; a refresh in which some stub failed exits 1 after its table.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from hivestream.cli.console import table

if TYPE_CHECKING:
    from streams.stubs.embedder_choice import Embedder
    from streams.stubs.log import StubEventT

out = Console(width=max(100, Console().width))
err = Console(stderr=True, width=200)


def _fail(message: str) -> NoReturn:
    err.print(Text.assemble(("error: ", "red"), message), soft_wrap=True)
    raise typer.Exit(2)


def _emit(db: Path, events: Sequence[StubEventT]) -> str:
    """Send ``events`` through the ``hivestream serve`` holding ``db`` (its stub route, with its review token, as ``stubs
    import`` does: its log, its tables, its live matcher), else into ``db``'s own stub event log.

    Raises:
        StubEventsError: serve refused them or could not be reached, or the log cannot be written.
    """
    from hivestream.serve.event_client import STUB_EVENTS_PATH, NotSent, running_serve, send_lines
    from hivestream.services.stub_events import StubEventsError, emit_stub_events

    note = running_serve(db)
    if note is None:
        return emit_stub_events(db, events)
    try:
        sent = send_lines(db, note, [ev.model_dump_json().encode() for ev in events], STUB_EVENTS_PATH, review=True)
    except NotSent as e:
        raise StubEventsError(str(e)) from None
    if sent.rejected:
        raise StubEventsError(f"the hivestream serve (pid {sent.pid}) holding {db} dead-lettered {sent.rejected} of the events (see its dead_letters table)")
    return f"hivestream serve (pid {sent.pid}) holding {db}, " + ("applied" if sent.applied else "durable in its log, applied in order")


def _embedder() -> tuple[Embedder, str]:
    """The configured embedder and its one-line description; a bad setting or a missing model exits 2 with one line."""
    from streams.stubs.embedder_choice import EmbedderSettings, EmbedderUnavailable, make_embedder

    try:
        s = EmbedderSettings()
    except ValidationError as e:
        first = e.errors()[0]
        _fail(f"bad setting HIVESTREAM_EMBED_{str(first['loc'][0]).upper()}: {first['msg']}")
    try:
        return make_embedder(s), s.describe()
    except EmbedderUnavailable as e:
        _fail(str(e))


def archive(
    db: Annotated[Path, typer.Option("--db", help="the DuckDB file holding the stubs")],
    memory_file: Annotated[Path, typer.Option("--memory-file", help="the memory.md to cut the section out of")],
    section: Annotated[str, typer.Option("--section", help='the section heading as written, e.g. "## Trello API"')],
    archive_dir: Annotated[Path, typer.Option("--archive-dir", help="where the archive file goes (<slug of the title>.md, appended to)")],
    stub_text: Annotated[str, typer.Option("--stub-text", help="the short hook text prompts are matched against")],
    channel: Annotated[str | None, typer.Option("--channel", help="the stub's channel (the project); omit for a global stub")] = None,
    refresh_source: Annotated[str | None, typer.Option("--refresh-source", help='refresh_source JSON (default: file-watch of the archive)')] = None,
) -> None:
    """Archive a section of memory.md behind a stub: cut (atomically, with a backup), appended to its archive, the stub embedded and recorded."""
    from hivestream.services.stub_lifecycle import LifecycleError, archive_section

    emb, which = _embedder()
    try:
        done = archive_section(db, memory_file, section, archive_dir, stub_text, emb, channel=channel, refresh_spec=refresh_source, emit=_emit)
    except LifecycleError as e:
        _fail(str(e))
    where = "the global set" if done.channel is None else f"channel {done.channel}"
    out.print(f"[bold]archived[/] {done.title!r} as stub {done.stub_id} of {where} (embedded with {which})", soft_wrap=True)
    out.print(f"[bold]archive[/]: {done.archive} ({done.archive_tokens} tokens)   [bold]backup of {memory_file.name}[/]: {done.backup}", soft_wrap=True)
    out.print(f"[bold]event[/]: {done.where}", soft_wrap=True)


def refresh(
    db: Annotated[Path, typer.Option("--db", help="the DuckDB file holding the stubs")],
    ids: Annotated[list[int] | None, typer.Argument(help="stub ids (of --channel, or global)")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every live stub of every channel (the nightly job)")] = False,
    channel: Annotated[str | None, typer.Option("--channel", help="the channel of the ids; omit for global stubs")] = None,
) -> None:
    """Refresh stubs from their refresh_source (file-watch, script, scheduler-db-query; manual and NULL are skipped)."""
    from hivestream.services.stub_lifecycle import LifecycleError, refresh_stubs

    if all_ == bool(ids):
        _fail("give stub ids or --all")
    if not db.is_file():
        _fail(f"no such DuckDB file: {db}")
    emb, which = _embedder()
    try:
        outcomes, where = refresh_stubs(db, emb, ids, channel=channel, all_channels=all_, emit=_emit)
    except LifecycleError as e:
        _fail(str(e))
    out.print(table(f"stub refresh ({which})", ["stub", "outcome", "detail"], [(o.stub, o.status, o.detail) for o in outcomes]))
    counts = {s: sum(o.status == s for o in outcomes) for s in ("refreshed", "unchanged", "skipped", "failed")}
    out.print(", ".join(f"{n} {s}" for s, n in counts.items()) + (f"; [bold]events[/]: {where}" if where else "; nothing recorded"), soft_wrap=True)
    if counts["failed"]:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``archive`` and ``refresh`` to the ``stubs`` command group."""
    app.command("archive")(archive)
    app.command("refresh")(refresh)
