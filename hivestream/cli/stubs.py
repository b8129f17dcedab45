"""``hivestream stubs``: import NanoClaw stubs.db files, run stub logs into DuckDB, what-if by replay, stub queries.

Mount with ``app.add_typer(stubs_app, name="stubs")``. User mistakes print one line on stderr
and exit with code 2.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TextIO

import duckdb
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from hivestream.cli.console import print_named_query, table
from projections.stubs.queries import STUB_QUERIES
from streams.model.deadletter import RejectedInput
from streams.stubs.errors import code_of
from streams.stubs.events import StubUpserted
from streams.stubs.log import LogEntry, read_log
from streams.stubs.settings import MatchPolicy, MatchSettings
from streams.stubs.sqlite_import import DEFAULT_MODEL, estimate_archive_tokens, iter_stub_rows
from streams.stubs.whatif import ChannelStats, WhatIfReport, what_if

if TYPE_CHECKING:
    from hivestream.embedded.stubs import StubRunReport
    from hivestream.serve.read_marker import ReadMarker

# hivestream.embedded.stubs and projections.stubs.projection (DuckDB, pyarrow, numpy: ~0.3 s) are imported by the commands that write or read a file

stubs_app = typer.Typer(help="Memory stubs: import stubs.db, run stub logs into DuckDB, what-if by replay, stub queries.",
                        no_args_is_help=True, pretty_exceptions_enable=False)
out = Console(width=max(100, Console().width))
err = Console(stderr=True, width=200)

ThresholdOpt = Annotated[float | None, typer.Option("--threshold", help="minimum similarity, -1..1 (default 0.65)")]
TopNOpt = Annotated[int | None, typer.Option("--top-n", help="at most N stubs per message (default 3)")]
BudgetOpt = Annotated[int | None, typer.Option("--budget", help="at most this many archive tokens per message (default 4000)")]
DbOpt = Annotated[Path, typer.Option("--db", help="DuckDB file")]


def _say(message: str | Text) -> None:
    out.print(message, soft_wrap=True)


def _fail(message: str) -> NoReturn:
    err.print(Text.assemble(("error: ", "red"), message), soft_wrap=True)
    raise typer.Exit(2)


def _settings(base: MatchSettings, threshold: float | None, top_n: int | None, budget: int | None, what: str = "") -> MatchSettings:
    given = {k: v for k, v in (("threshold", threshold), ("top_n", top_n), ("token_budget", budget)) if v is not None}
    try:
        return MatchSettings(**{**base.model_dump(), **given})
    except ValidationError as e:
        first = e.errors()[0]
        _fail(f"invalid {what}setting {'.'.join(map(str, first['loc']))}: {first['msg']} (input {first.get('input')!r})")


def _existing(paths: list[Path]) -> list[Path]:
    for p in paths:
        if not p.is_file():
            _fail(f"no such file: {p}")
    return paths


@stubs_app.command("import")
def import_(
    stubs_db: Annotated[Path, typer.Argument(help="a NanoClaw stubs.db (or stubs-global.db)")],
    channel: Annotated[str | None, typer.Option("--channel", help="the channel the database belongs to")] = None,
    global_: Annotated[bool, typer.Option("--global", help="the database is stubs-global.db (no channel)")] = False,
    out_path: Annotated[Path | None, typer.Option("--out", help="write the stub-upserted events here as JSONL")] = None,
    db: Annotated[Path | None, typer.Option("--db", help="also project the stubs into this DuckDB file")] = None,
    model: Annotated[str, typer.Option("--model", help="embedding model of the stored vectors")] = DEFAULT_MODEL,
    default_tokens: Annotated[int | None, typer.Option("--default-tokens", help="archive tokens when an archive file is not readable here")] = None,
) -> None:
    """Read a stubs.db into stub-upserted events (match_count, last_matched_at, last_refreshed_at kept as starting state)."""
    if not stubs_db.is_file():
        _fail(f"no such file: {stubs_db}")
    if (channel is None) == (not global_):
        _fail("give exactly one of --channel NAME or --global")
    if out_path is None and db is None:
        _fail("give --out events.jsonl and/or --db FILE")
    if default_tokens is not None and default_tokens < 0:
        _fail("--default-tokens must be >= 0")

    def tokens_for(path: str) -> int:
        try:
            return estimate_archive_tokens(path)
        except RejectedInput:
            if default_tokens is None:
                raise
            return default_tokens

    rows = iter_stub_rows(stubs_db, channel, model=model, tokens_for=tokens_for)
    try:  # the first row read: a file that is no stubs.db is refused before anything is written
        first = next(rows, None)
    except sqlite3.Error as e:
        _fail(f"{stubs_db} is not a NanoClaw stubs.db ({type(e).__name__}: {e})")
    tally = ImportTally()
    with stubs_db.open("rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()[:12]
    source = f"stubs-db:{stubs_db.resolve()}#{digest}"

    def entries(out_file: TextIO | None) -> Iterator[LogEntry]:
        """The rows as log entries, one at a time (a stubs.db of 100 MB never sits in memory), each written to ``--out`` as it goes."""
        for n, item in enumerate(itertools.chain([] if first is None else [first], rows)):
            if isinstance(item, StubUpserted):
                line = item.model_dump_json()
                if out_file is not None:
                    try:
                        out_file.write(line + "\n")
                    except OSError as e:
                        raise _OutFailed(e.strerror or str(e)) from e
                tally.stub(item.stub_id)
                yield LogEntry(source, n, line.encode(), item)
            else:
                tally.rejected += 1
                _say(Text(f"  {item.detail if code_of(item) else f'{item.reason}: {item.detail}'}"))
                yield LogEntry(source, n, f"stubs.db row {n}".encode(), item)

    where = "the global set" if channel is None else f"channel {channel}"
    done = ""
    try:
        with contextlib.ExitStack() as stack:
            out_file = stack.enter_context(out_path.open("w", encoding="utf-8")) if out_path is not None else None
            if db is None:
                for _ in entries(out_file):
                    pass
            else:
                done = _project_import(entries(out_file), db)
    except sqlite3.Error as e:
        _fail(f"{stubs_db}: a row could not be read ({type(e).__name__}: {e})")
    except (OSError, _OutFailed) as e:  # opening or writing --out
        _fail(f"cannot write {out_path}: {e.strerror if isinstance(e, OSError) and e.strerror else e}")
    _say(f"[bold]imported[/]: {len(tally.ids)} stubs of {where} from {stubs_db}; [bold]rejected rows[/]: {tally.rejected}"
         + (f"; {tally.repeated} {'row' if tally.repeated == 1 else 'rows'} repeated a stub id already read (the later row is kept)"
            if tally.repeated else ""))
    if out_path is not None:
        _say(f"[bold]events[/]: {out_path}")
    if done:
        _say(done)


def _project_import(entries: Iterator[LogEntry], db: Path) -> str:
    """Project an import's entries into ``db``: through the serve holding it when one does (its
    stub route, with its review token; :mod:`hivestream.serve.event_client`), else into the file
    (positions keep a second import of the same ``stubs.db`` from applying twice; no match settings
    are bound); the line saying what happened (exits 2 with one line when nothing could be)."""
    from hivestream.serve.event_client import running_serve

    note = running_serve(db)
    if note is None:
        from hivestream.embedded.stubs import run_stub_logs

        report = _run_guarded(lambda: run_stub_logs([entries], db, bind_settings=False), db)
        return f"[bold]projected[/]: {report.stub_events} stub events into {db} ({report.skipped} already applied)"
    return _through_serve((e.raw for e in entries if isinstance(e.item, StubUpserted)), db, note, "stub events")


def _raw_lines(path: Path) -> Iterator[bytes]:
    """The non-blank lines of a stub log file, as bytes (``\\r\\n`` endings cut)."""
    try:
        with path.open("rb") as f:
            for raw in f:
                line = raw.rstrip(b"\r\n")
                if line.strip():
                    yield line
    except OSError as e:
        _fail(f"cannot read {path}: {e}")


def _through_serve(lines: Iterator[bytes], db: Path, note: ReadMarker, what: str) -> str:
    """Post stub event ``lines`` to the serve of ``note`` holding ``db`` (its stub route, with its
    review token; :mod:`hivestream.serve.event_client`); the line saying what happened (exits 2 with
    one line when serve refused or could not be reached)."""
    from hivestream.serve.event_client import STUB_EVENTS_PATH, NotSent, send_lines

    count = [0]

    def counted() -> Iterator[bytes]:
        for line in lines:
            count[0] += 1
            yield line

    try:
        sent = send_lines(db, note, counted(), STUB_EVENTS_PATH, review=True)
    except NotSent as e:
        _fail(str(e))
    refused = f"; {sent.rejected} dead-lettered by serve (see its dead_letters table)" if sent.rejected else ""
    state = "applied" if sent.applied else "durable in its log, not applied yet (its loop is behind; it applies them in order)"
    return f"[bold]projected[/]: {count[0]} {what} through hivestream serve (pid {sent.pid}) holding {db}: {state}{refused}"


class _OutFailed(Exception):
    """Writing ``--out`` failed (not an OSError: a failure to read the input is one)."""


class ImportTally:
    """What ``stubs import`` read: the distinct stub ids, the rows that repeated one, the rows refused."""

    def __init__(self) -> None:
        self.ids: set[int] = set()
        self.repeated = 0
        self.rejected = 0

    def stub(self, stub_id: int) -> None:
        """A stub row read."""
        if stub_id in self.ids:
            self.repeated += 1
        self.ids.add(stub_id)


def _run_guarded(fn: Callable[[], StubRunReport], db: Path) -> StubRunReport:
    from projections.stubs.projection import StubMetaMismatch

    try:
        return fn()
    except StubMetaMismatch as e:
        _fail(str(e))
    except duckdb.IOException as e:
        _fail(f"cannot open {db}: {e}")
    except OSError as e:
        _fail(f"cannot read input: {e}")


@stubs_app.command()
def run(
    files: Annotated[list[Path], typer.Argument(help="stub event logs (JSONL), in order")],
    db: DbOpt = Path("hivestream.duckdb"),
    threshold: ThresholdOpt = None,
    top_n: TopNOpt = None,
    budget: BudgetOpt = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="log items per DuckDB transaction")] = 1000,
) -> None:
    """Replay stub logs: stubs and message embeddings → matches → DuckDB (stubs, stub_matches, stub_messages).

    When a ``hivestream serve`` holds ``--db``, the lines go through it instead (its stub route; it
    matches with the settings its file holds)."""
    from hivestream.embedded.stubs import run_stub_logs
    from hivestream.serve.event_client import running_serve
    from projections.stubs.projection import stored_settings

    _existing(files)
    if batch_size < 1:
        _fail("--batch-size must be >= 1")
    note = running_serve(db)
    if note is not None:
        if (threshold, top_n, budget) != (None, None, None):
            _fail(f"the hivestream serve (pid {note.pid}) holding {db} matches with the settings its file holds: "
                  "drop --threshold/--top-n/--budget, or stop serve and run again")
        _say(_through_serve((raw for p in files for raw in _raw_lines(p)), db, note, "lines"))
        return
    try:
        base = stored_settings(db) or MatchSettings()
    except duckdb.Error as e:
        _fail(f"cannot read {db}: {e}")
    settings = _settings(base, threshold, top_n, budget)
    report = _run_guarded(lambda: run_stub_logs([read_log(p) for p in files], db, MatchPolicy(defaults=settings), batch_size=batch_size), db)
    _print_run(report, settings)


def _print_run(r: StubRunReport, s: MatchSettings) -> None:
    _say(f"[bold]settings[/]: threshold {s.threshold}, top-n {s.top_n}, budget {s.token_budget} tokens")
    _say(f"[bold]inputs[/]: {len(r.inputs)}; {r.items} log items applied, {r.skipped} already applied")
    rate = f"{r.matched_messages / r.messages:.1%}" if r.messages else "n/a"
    _say(f"[bold]messages[/]: {r.messages} main (+{r.subagent_messages} subagent, {r.repeated} repeated); "
              f"{r.matched_messages} matched (hit rate {rate}); {r.matches} matches, {r.tokens} tokens injected")
    _say(f"[bold]stub events[/]: {r.stub_events}; runtime-logged matches in the input: {r.logged} (kept for whatif, not applied)")
    dl = ", ".join(f"{k} {v}" for k, v in r.dead_letters.most_common())
    _say(f"[bold]dead-lettered[/]: {sum(r.dead_letters.values())}" + (f" ({dl})" if dl else ""))
    con = duckdb.connect(r.db, read_only=True)
    try:
        rows = con.execute("""SELECT channel, count(*) FILTER (WHERE origin = 'main'),
                                     count(*) FILTER (WHERE matched), sum(match_count), sum(tokens_injected)
                              FROM stub_messages GROUP BY channel ORDER BY channel""").fetchall()
        live = con.execute("SELECT count(*) FILTER (WHERE NOT deleted), count(*) FILTER (WHERE deleted) FROM stubs").fetchone() or (0, 0)
    finally:
        con.close()
    out.print(table("per channel (whole file)", ["channel", "messages", "hits", "matches", "tokens"], rows))
    _say(f"[bold]stubs[/]: {live[0]} live, {live[1]} deleted; [bold]DuckDB file[/]: {r.db}  (try: hivestream stubs query top-stubs --db {r.db})")


@stubs_app.command()
def whatif(
    files: Annotated[list[Path], typer.Argument(help="stub event logs (JSONL), in order")],
    threshold: Annotated[float, typer.Option("--threshold", help="the similarity threshold to try")],
    top_n: TopNOpt = None,
    budget: BudgetOpt = None,
    channel: Annotated[str | None, typer.Option("--channel", help="only report this channel")] = None,
    recorded_threshold: Annotated[float | None, typer.Option("--recorded-threshold", help="recorded threshold (default: --db's or 0.65)")] = None,
    recorded_top_n: Annotated[int | None, typer.Option("--recorded-top-n", help="recorded top N (default: --db's or 3)")] = None,
    recorded_budget: Annotated[int | None, typer.Option("--recorded-budget", help="recorded token budget (default: --db's or 4000)")] = None,
    db: Annotated[Path | None, typer.Option("--db", help="take the recorded settings from this projection")] = None,
) -> None:
    """Replay the logs with the recorded settings and with new ones; compare hit rate, matches and tokens per channel."""
    _existing(files)
    from projections.stubs.projection import stored_settings

    base = MatchSettings()
    if db is not None:
        if not db.is_file():
            _fail(f"no such DuckDB file: {db}")
        try:
            base = stored_settings(db) or _fail(f"{db} holds no stub run (no recorded settings)")
        except duckdb.Error as e:
            _fail(f"cannot read {db}: {e}")
    rec = _settings(base, recorded_threshold, recorded_top_n, recorded_budget, "recorded ")
    new = _settings(rec, threshold, top_n, budget)
    try:
        log = [e for p in files for e in read_log(p)]
    except OSError as e:
        _fail(f"cannot read input: {e}")
    report = what_if(log, MatchPolicy(defaults=rec), MatchPolicy(defaults=new), channel)
    _print_whatif(report, rec, new)


def _fmt(s: ChannelStats | None, field: str) -> str:
    if s is None:
        return ""
    return f"{s.hit_rate:.1%}" if field == "hit" else str(getattr(s, field))


def _arrow(a: str, b: str) -> str:
    return a if a == b else f"{a} → {b}"


def _print_whatif(r: WhatIfReport, rec: MatchSettings, new: MatchSettings) -> None:
    _say(f"[bold]recorded[/]: threshold {rec.threshold}, top-n {rec.top_n}, budget {rec.token_budget}   "
              f"[bold]what-if[/]: threshold {new.threshold}, top-n {new.top_n}, budget {new.token_budget}"
              + (f"   [bold]channel[/]: {r.channel}" if r.channel else ""))
    logged = r.totals is not None and r.totals.logged is not None
    cols = ["channel", "messages", "hits", "hit rate", "matches", "tokens"] + (["logged hit rate", "logged matches"] if logged else [])
    rows: list[tuple[object, ...]] = []
    for c in [*r.channels, *([r.totals] if r.totals and len(r.channels) > 1 else [])]:
        row: tuple[object, ...] = (c.channel, c.recorded.messages, _arrow(_fmt(c.recorded, "hits"), _fmt(c.new, "hits")),
                                   _arrow(_fmt(c.recorded, "hit"), _fmt(c.new, "hit")),
                                   _arrow(_fmt(c.recorded, "matches"), _fmt(c.new, "matches")), _arrow(_fmt(c.recorded, "tokens"), _fmt(c.new, "tokens")))
        rows.append(row + ((_fmt(c.logged, "hit"), _fmt(c.logged, "matches")) if logged else ()))
    out.print(table("per channel: recorded → what-if", cols, rows))
    if r.reproduces_logged is not None:
        _say(f"[bold]runtime log[/]: the recorded settings reproduce the {len(r.logged_matches)} logged matches "
                  + ("exactly" if r.reproduces_logged else "[red]NOT exactly[/] (other settings or a different index?)"))
    if r.stub_changes:
        out.print(table("stubs that gain or lose matches", ["stub", "title", "recorded", "what-if", "change"],
                         [(f"{c.stub_channel or '(global)'}#{c.stub_id}", c.title, c.recorded, c.new, f"{c.delta:+d}") for c in r.stub_changes]))
    else:
        _say("no stub gains or loses matches")
    if r.rejections:
        _say(f"[bold]rejected log items[/]: {r.rejections} (run `hivestream stubs run` to see them in stub_dead_letters)")


@stubs_app.command()
def query(
    name: Annotated[str | None, typer.Argument(help="query name; omit to list them")] = None,
    db: DbOpt = Path("hivestream.duckdb"),
    as_json: Annotated[bool, typer.Option("--json", help="print JSON rows instead of a table")] = False,
    list_: Annotated[bool, typer.Option("--list", help="list the named queries (as without a name)")] = False,
) -> None:
    """Run a named stub analytics query (never-matched, stale, hit-rate, ...)."""
    problem = print_named_query("stub", "stubs", STUB_QUERIES, None if list_ else name, db, as_json, out, err)
    if problem:
        _fail(problem)


@stubs_app.command("demo")
def demo_cmd(
    threshold: Annotated[float, typer.Option("--threshold", help="minimum similarity for the demo")] = 0.3,
) -> None:
    """Match the sample messages against the sample stubs with real MiniLM embeddings (needs `make install-minilm`)."""
    from streams.stubs.demo import demo_events
    from streams.stubs.replay import run_stub_events
    from streams.stubs.settings import MatchPolicy, MatchSettings

    texts = Path(__file__).parent.parent / "samples" / "stubs" / "texts.json"
    try:
        events, intended = demo_events(texts)
    except RuntimeError as e:
        _fail(str(e))
    result = run_stub_events(events, MatchPolicy(defaults=MatchSettings(threshold=threshold, top_n=1, token_budget=4000)))
    titles = {key[1]: rec.title for key, rec in result.stubs.items()}
    best = {m.message_id: m for m in result.matches if m.rank == 1}
    rows: list[tuple[object, ...]] = []
    hits = 0
    for mid, topic in intended.items():
        m = best.get(mid)
        got = titles.get(m.stub_id) if m else None
        hits += got == topic
        rows.append((mid, topic or "(off-topic)", got or "(nothing)", f"{m.similarity:.3f}" if m else ""))
    out.print(table(f"stub demo: all-MiniLM-L6-v2, threshold {threshold}", ["message", "meant", "matched", "similarity"], rows))
    _say(f"{hits}/{len(intended)} messages matched the stub their author meant (off-topic ones should match nothing)")


def _register_kafka_commands() -> None:
    from hivestream.cli.stubs_kafka import register

    register(stubs_app)


_register_kafka_commands()


def _register_lifecycle_commands() -> None:
    from hivestream.cli.stubs_lifecycle import register

    register(stubs_app)


_register_lifecycle_commands()
